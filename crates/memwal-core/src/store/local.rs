//! [`LocalStore`]: memwal's [`Backend`] on a local directory, whose every persistence point
//! memwal controls.
//!
//! # Why not `object_store::local::LocalFileSystem`
//! `LocalFileSystem::with_fsync(true)` is durable too, but its writes and syncs happen inside
//! one opaque call. memwal needs the persistence points in its own code so that they can be
//! (a) exercised by a power-loss simulator (`sim_fs::SimFs`, with the `testing` feature: the
//! reliability suite crashes at every sync and checks that nothing acknowledged is lost, and
//! that the same suite fails when syncing is switched off), and (b) failed on purpose (an
//! `fsync` error must reject the puts it covers and poison the writer, never be retried and
//! trusted: it surfaces as a [`SyncFailure`]).
//!
//! # Durability protocol of a put (create-if-absent)
//! 1. The first time this store puts into a directory, make the directory and every ancestor
//!    up to the store root durable: create what is missing top-down, and `fsync` each of them
//!    and its parent, **whether or not it already existed**. A directory that exists may have
//!    been created by a process that crashed before syncing it, or by an earlier put whose
//!    directory sync failed; its existence proves nothing about a power loss. Afterwards the
//!    directory is known for the life of the store (memwal never removes directories), so
//!    the hot path pays nothing; a failed sync leaves it unknown, to be synced again.
//! 2. Write the bytes to an unnamed (`O_TMPFILE`) or staging file, `fdatasync` it, and link it
//!    to the final name (`link` fails if the name exists: put-if-not-exists; readers never see
//!    a partial file). A create can carry data staged earlier ([`Backend::stage`]), which
//!    leaves only the link. A create at the first free of several names links the one file
//!    under each in turn, making a name it finds taken durable before it tries the next.
//! 3. `fsync` the file: its inode's link count was 0 when its data was synced, and without a
//!    journal nothing else writes it (see [`super::fs`]).
//! 4. `fsync` the parent directory, so the new name survives a power loss.
//!
//! Only then does the put return. Staging files (`.staging-…`) are never listed as objects.
//!
//! # Which errors are sync failures
//! Any error of a sync, and an error of a write, link or create whose errno says the kernel
//! may have dropped written data (`EIO`, `ENOSPC`, `EDQUOT`: the errors `fdatasync` reports
//! for writeback it lost) is a [`SyncFailure`], never retried and trusted. They are told
//! apart by errno (`raw_os_error`), never by `ErrorKind`: Rust maps these errnos to kinds
//! that are unstable or that change between releases (`EIO` has no stable kind).

use std::collections::HashSet;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectMeta, Result};

use super::backend::{self, Backend, FirstFree, SyncFailure};
use super::faults::Faults;
use super::fs::{FileInfo, Fs, STAGING_PREFIX, Staged};
use super::paths::is_wal_path;

/// See the module docs.
pub struct LocalStore {
    shared: Arc<Shared>,
}

/// The store's state; blocking tasks hold an `Arc` of it.
struct Shared {
    fs: Arc<dyn Fs>,
    root: PathBuf,
    fsync: bool,
    faults: Arc<Faults>,
    /// Directories this store made durable, with their ancestors up to `root` (memwal never
    /// removes directories); see the module docs.
    known_dirs: Mutex<HashSet<PathBuf>>,
}

impl fmt::Debug for LocalStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "LocalStore({}, {:?})",
            self.shared.root.display(),
            self.shared.fs
        )
    }
}

/// The object at `location`, as `stat` of its file describes it.
fn object_meta(location: Path, info: FileInfo) -> ObjectMeta {
    ObjectMeta {
        location,
        last_modified: info.modified.into(),
        size: info.len,
        e_tag: None,
        version: None,
    }
}

/// Message of an injected sync failure's OS error.
const INJECTED_SYNC_FAILURE: &str = "injected sync failure";

/// A failed sync of `path`, carried as a [`SyncFailure`] so that
/// [`backend::is_sync_failure`] recognises it after `to_store_error`.
fn sync_failure(path: &std::path::Path, source: io::Error) -> io::Error {
    io::Error::other(SyncFailure {
        path: path.display().to_string(),
        source,
    })
}

/// Whether `e`, from writing, syncing or linking a file, may mean the kernel dropped data
/// written to it (module docs, "Which errors are sync failures"). By errno: `EIO` (failed
/// writeback), `ENOSPC` and `EDQUOT` (writeback that could not allocate blocks, e.g. on a
/// thin or delayed-allocation device). An error with no errno (a simulated or injected one
/// from a custom [`Fs`]) counts when its kind is `Other`, since it cannot say more.
fn may_have_lost_writeback(e: &io::Error) -> bool {
    use rustix::io::Errno;
    match e.raw_os_error() {
        Some(errno) => [Errno::IO, Errno::NOSPC, Errno::DQUOT]
            .iter()
            .any(|lost| lost.raw_os_error() == errno),
        None => e.kind() == io::ErrorKind::Other,
    }
}

fn to_store_error(path: &Path, e: io::Error) -> object_store::Error {
    match e.kind() {
        io::ErrorKind::NotFound => object_store::Error::NotFound {
            path: path.to_string(),
            source: Box::new(e),
        },
        io::ErrorKind::AlreadyExists => object_store::Error::AlreadyExists {
            path: path.to_string(),
            source: Box::new(e),
        },
        _ => match e.downcast::<SyncFailure>() {
            Ok(sync) => object_store::Error::Generic {
                store: "LocalStore",
                source: Box::new(sync),
            },
            Err(e) => object_store::Error::Generic {
                store: "LocalStore",
                source: Box::new(e),
            },
        },
    }
}

impl LocalStore {
    /// A store rooted at `root` on `fs`. With `fsync` false nothing is durable across a
    /// power loss (only for tests that must see that happen). Sync failures are injected
    /// through `faults`.
    pub fn new(fs: Arc<dyn Fs>, root: PathBuf, fsync: bool, faults: Arc<Faults>) -> Self {
        LocalStore {
            shared: Arc::new(Shared {
                fs,
                root,
                fsync,
                faults,
                known_dirs: Mutex::new(HashSet::new()),
            }),
        }
    }

    fn handle(&self) -> Arc<Shared> {
        self.shared.clone()
    }
}

impl Shared {
    fn fs_path(&self, location: &Path) -> PathBuf {
        let mut p = self.root.clone();
        for part in location.parts() {
            p.push(part.as_ref());
        }
        p
    }

    fn sync_dir(&self, dir: &std::path::Path, wal: bool) -> io::Result<()> {
        if !self.fsync {
            return Ok(());
        }
        if wal && self.faults.take_wal_sync_failure() {
            return Err(sync_failure(dir, io::Error::other(INJECTED_SYNC_FAILURE)));
        }
        self.fs
            .sync_dir(dir)
            .map_err(|source| sync_failure(dir, source))
    }

    /// Makes `dir` and its ancestors up to the root exist durably, the first time this
    /// store uses them (module docs, step 1): each directory not yet known is created if
    /// missing and synced, and so is its parent, which holds its entry.
    fn ensure_dir(&self, dir: &std::path::Path) -> io::Result<()> {
        let known = |d: &std::path::Path| {
            self.known_dirs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(d)
        };
        if known(dir) {
            return Ok(());
        }
        // Not yet known, from `dir` up to the root, whose own entry counts too; above the
        // root, only directories that are missing (which the store creates).
        let mut unknown = Vec::new();
        let mut cur = Some(dir);
        while let Some(d) = cur {
            if known(d) || (!d.starts_with(&self.root) && self.fs.exists(d)?) {
                break;
            }
            unknown.push(d.to_path_buf());
            cur = d.parent();
        }
        for d in unknown.iter().rev() {
            match self.fs.create_dir(d) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        // After every create, so that each sync covers the entries made below it; a child
        // before its parent, each directory once.
        let mut synced: HashSet<&std::path::Path> = HashSet::new();
        for d in &unknown {
            for to_sync in [Some(d.as_path()), d.parent()].into_iter().flatten() {
                if synced.insert(to_sync) {
                    self.sync_dir(to_sync, false)?;
                }
            }
        }
        self.known_dirs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(unknown);
        Ok(())
    }

    /// Fails like a data sync when a WAL sync failure is injected: nothing is published, as
    /// with a real EIO from `fdatasync` in `Fs::create_file`.
    fn injected_data_sync_failure(
        &self,
        location: &Path,
        path: &std::path::Path,
    ) -> io::Result<()> {
        if self.fsync && is_wal_path(location) && self.faults.take_wal_sync_failure() {
            return Err(sync_failure(path, io::Error::other(INJECTED_SYNC_FAILURE)));
        }
        Ok(())
    }

    /// An error from writing a file: with syncing on, one that may mean lost writeback is a
    /// sync failure, never retried and trusted ([`may_have_lost_writeback`]).
    fn write_error(&self, path: &std::path::Path, e: io::Error) -> io::Error {
        if self.fsync && may_have_lost_writeback(&e) {
            sync_failure(path, e)
        } else {
            e
        }
    }

    /// Has the file system open the file of the next create in `dir` ahead ([`Fs::prepare`]),
    /// on another blocking thread while this one is written and synced ([`PrepareNext`]: a
    /// durable writer's WAL entries are appended one after another). Best effort: an error
    /// here only means the next stage opens its own file.
    fn prepare_next(&self, dir: &std::path::Path) {
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (fs, dir) = (self.fs.clone(), dir.to_path_buf());
            drop(runtime.spawn_blocking(move || fs.prepare(&dir)));
        }
    }

    /// See [`LocalStore::make_durable`].
    fn make_durable_blocking(&self, locations: &[Path]) -> io::Result<()> {
        if !self.fsync {
            return Ok(());
        }
        let mut dirs: Vec<(PathBuf, bool)> = Vec::new();
        for location in locations {
            let path = self.fs_path(location);
            self.sync_file(&path, is_wal_path(location))?;
            let parent = path.parent().unwrap_or(&self.root).to_path_buf();
            if !dirs.iter().any(|(d, _)| *d == parent) {
                dirs.push((parent, is_wal_path(location)));
            }
        }
        for (dir, wal) in dirs {
            self.sync_dir(&dir, wal)?;
        }
        Ok(())
    }

    /// `fsync` of the file at `path` (a WAL file's may fail on purpose, as its other syncs).
    fn sync_file(&self, path: &std::path::Path, wal: bool) -> io::Result<()> {
        if wal && self.faults.take_wal_sync_failure() {
            return Err(sync_failure(path, io::Error::other(INJECTED_SYNC_FAILURE)));
        }
        self.fs
            .sync_file(path)
            .map_err(|source| match source.kind() {
                io::ErrorKind::NotFound => source,
                _ => sync_failure(path, source),
            })
    }

    /// Stages `data` for a create in the directory of `location` ([`Fs::stage`]).
    fn stage_blocking(&self, location: &Path, data: &[u8]) -> io::Result<Staged> {
        let path = self.fs_path(location);
        let parent = path.parent().unwrap_or(&self.root).to_path_buf();
        self.ensure_dir(&parent)?;
        self.injected_data_sync_failure(location, &path)?;
        self.fs
            .stage(&parent, data, self.fsync)
            .map_err(|e| self.write_error(&path, e))
    }

    /// Creates `staged` at the first free of `locations` (module docs); the index created.
    /// With `prepare_next`, the next create's file is opened meanwhile.
    fn create_blocking(
        &self,
        locations: &[Path],
        staged: &backend::Staged,
        prepare_next: bool,
    ) -> io::Result<usize> {
        let location = &locations[0];
        let path = self.fs_path(location);
        let parent = path.parent().unwrap_or(&self.root).to_path_buf();
        self.ensure_dir(&parent)?;
        if prepare_next {
            self.prepare_next(&parent);
        }
        let prestaged = staged.file.as_deref();
        if prestaged.is_none() {
            self.injected_data_sync_failure(location, &path)?;
        }
        let paths: Vec<PathBuf> = locations.iter().map(|l| self.fs_path(l)).collect();
        let created = self
            .create_first_free(
                &paths,
                prestaged,
                &staged.bytes,
                self.fsync,
                &parent,
                location,
            )
            .map_err(|e| match e.kind() {
                io::ErrorKind::AlreadyExists | io::ErrorKind::NotFound => e,
                _ => self.write_error(&path, e),
            })?;
        if self.fsync {
            // The link count of the linked file (module docs, step 3).
            let linked = &paths[created];
            self.fs
                .sync_file(linked)
                .map_err(|source| sync_failure(linked, source))?;
        }
        self.sync_dir(&parent, is_wal_path(location))?;
        Ok(created)
    }

    /// Replaces (or creates) the file at `location` with `data`: its data sync writes its
    /// link count too (`Fs::replace_file`), then its directory is synced.
    fn overwrite_blocking(&self, location: &Path, data: &[u8]) -> io::Result<()> {
        let path = self.fs_path(location);
        let parent = path.parent().unwrap_or(&self.root).to_path_buf();
        self.ensure_dir(&parent)?;
        self.fs
            .replace_file(&path, data, self.fsync)
            .map_err(|e| self.write_error(&path, e))?;
        self.sync_dir(&parent, is_wal_path(location))
    }

    /// Creates `data` (or names `prestaged`) at the first free of `paths`, in order; the
    /// index created.
    ///
    /// A name found taken is made durable (its inode, then the directory) before the next is
    /// tried: whoever linked it may have died before syncing it, and a name created above it
    /// must never outlive it in a power loss, or the WAL would have a hole below a durable
    /// entry (a fence sentinel is created this way, above whatever a predecessor still linked).
    fn create_first_free(
        &self,
        paths: &[PathBuf],
        prestaged: Option<&Staged>,
        data: &[u8],
        sync: bool,
        parent: &std::path::Path,
        location: &Path,
    ) -> io::Result<usize> {
        let wal = is_wal_path(location);
        let staged;
        let staged = match prestaged {
            Some(s) => s,
            None if paths.len() == 1 => return self.fs.create_file_first_free(paths, data, sync),
            None => {
                staged = self.fs.stage(parent, data, sync)?;
                &staged
            }
        };
        for (i, path) in paths.iter().enumerate() {
            match self
                .fs
                .publish_first_free(staged, std::slice::from_ref(path))
            {
                Ok(_) => return Ok(i),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && i + 1 < paths.len() => {
                    if sync {
                        self.sync_file(path, wal)?;
                        self.sync_dir(parent, wal)?;
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "every name was taken",
        ))
    }

    /// Removes the file at `location` (a missing one is not an error, as with an object
    /// store), then its directory if that is a generation directory left empty: generation
    /// directory names are never reused, and no other directory is removed, so a directory
    /// known to exist durably ([`Shared::ensure_dir`]) stays so.
    fn delete_blocking(&self, location: &Path) -> io::Result<()> {
        let path = self.fs_path(location);
        match self.fs.remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        }
        if let Some(dir) = path.parent()
            && dir
                .file_name()
                .is_some_and(|n| n.to_string_lossy().contains("_gen_"))
            && self.fs.read_dir(dir).is_ok_and(|e| e.is_empty())
            && self.fs.remove_dir(dir).is_ok()
        {
            self.known_dirs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(dir);
        }
        Ok(())
    }

    fn list_blocking(&self, prefix: Option<&Path>) -> io::Result<Vec<ObjectMeta>> {
        let base = prefix.map(|p| self.fs_path(p)).unwrap_or(self.root.clone());
        let mut out = Vec::new();
        let mut stack = vec![(base, prefix.cloned().unwrap_or_default())];
        while let Some((dir, loc)) = stack.pop() {
            let entries = match self.fs.read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) if e.kind() == io::ErrorKind::NotADirectory => continue,
                Err(e) => return Err(e),
            };
            for (name, is_dir) in entries {
                if name.starts_with(STAGING_PREFIX) {
                    continue;
                }
                let child = loc.clone().join(name.as_str());
                let p = dir.join(&name);
                if is_dir {
                    stack.push((p, child));
                } else {
                    match self.fs.stat(&p) {
                        Ok(info) => out.push(object_meta(child, info)),
                        // Removed since the directory was read (garbage collection): an
                        // object store's listing would not show it either.
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        Ok(out)
    }

    fn list_dirs_blocking(&self, prefix: &Path) -> io::Result<Vec<Path>> {
        let dir = self.fs_path(prefix);
        let entries = match self.fs.read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        Ok(entries
            .into_iter()
            .filter(|(name, is_dir)| *is_dir && !name.starts_with(STAGING_PREFIX))
            .map(|(name, _)| prefix.clone().join(name.as_str()))
            .collect())
    }
}

/// Runs blocking file-system work off the async workers.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| object_store::Error::JoinError { source: e })
}

#[async_trait]
impl Backend for LocalStore {
    async fn create(
        &self,
        paths: &[Path],
        data: &backend::Staged,
        prepare_next: bool,
    ) -> Result<FirstFree> {
        let Some(first) = paths.first().cloned() else {
            return Ok(FirstFree::Taken(0));
        };
        let n = paths.len();
        let (me, paths, data) = (self.handle(), paths.to_vec(), data.clone());
        match blocking(move || me.create_blocking(&paths, &data, prepare_next)).await? {
            Ok(i) => Ok(FirstFree::Created(i)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(FirstFree::Taken(n)),
            Err(e) => Err(to_store_error(&first, e)),
        }
    }

    async fn stage(&self, near: &Path, data: Bytes) -> Result<backend::Staged> {
        let (me, loc, bytes) = (self.handle(), near.clone(), data.clone());
        let file = blocking(move || me.stage_blocking(&loc, &bytes))
            .await?
            .map_err(|e| to_store_error(near, e))?;
        Ok(backend::Staged {
            bytes: data,
            file: Some(Arc::new(file)),
        })
    }

    async fn get(&self, path: &Path) -> Result<Option<Bytes>> {
        let (me, loc) = (self.handle(), path.clone());
        match blocking(move || me.fs.read(&me.fs_path(&loc))).await? {
            Ok(data) => Ok(Some(Bytes::from(data))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(to_store_error(path, e)),
        }
    }

    async fn head(&self, path: &Path) -> Result<bool> {
        let (me, loc) = (self.handle(), path.clone());
        match blocking(move || me.fs.stat(&me.fs_path(&loc))).await? {
            Ok(info) => Ok(!info.is_dir),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(to_store_error(path, e)),
        }
    }

    async fn list(&self, prefix: &Path) -> Result<Vec<ObjectMeta>> {
        let (me, p) = (self.handle(), prefix.clone());
        blocking(move || me.list_blocking(Some(&p)))
            .await?
            .map_err(|e| to_store_error(prefix, e))
    }

    async fn list_dirs(&self, prefix: &Path) -> Result<Vec<Path>> {
        let (me, p) = (self.handle(), prefix.clone());
        blocking(move || me.list_dirs_blocking(&p))
            .await?
            .map_err(|e| to_store_error(prefix, e))
    }

    async fn overwrite(&self, path: &Path, data: Bytes) -> Result<()> {
        let (me, loc) = (self.handle(), path.clone());
        blocking(move || me.overwrite_blocking(&loc, &data))
            .await?
            .map_err(|e| to_store_error(path, e))
    }

    async fn delete(&self, path: &Path) -> Result<()> {
        let (me, loc) = (self.handle(), path.clone());
        blocking(move || me.delete_blocking(&loc))
            .await?
            .map_err(|e| to_store_error(path, e))
    }

    /// The file of each of `paths` (its inode), then each of their directories: a writer may
    /// have linked one and died before syncing it, and on a file system without a journal a
    /// linked file whose inode was never synced is freed at the next mount. A file missing at
    /// its turn is `NotFound`; a failed sync is a [`SyncFailure`].
    async fn make_durable(&self, paths: &[Path]) -> Result<()> {
        let Some(first) = paths.first().cloned() else {
            return Ok(());
        };
        let (me, locations) = (self.handle(), paths.to_vec());
        blocking(move || me.make_durable_blocking(&locations))
            .await?
            .map_err(|e| to_store_error(&first, e))
    }

    fn local_files(&self) -> Option<backend::LocalFiles> {
        Some(backend::LocalFiles {
            fs: self.shared.fs.clone(),
            root: self.shared.root.clone(),
        })
    }
}
