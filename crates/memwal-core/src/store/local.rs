//! [`LocalStore`]: an `object_store` implementation over a local directory whose every
//! persistence point memwal controls.
//!
//! # Why not `object_store::local::LocalFileSystem`
//! `LocalFileSystem::with_fsync(true)` is durable too, but its writes and syncs happen inside
//! one opaque call. memwal needs the persistence points in its own code so that they can be
//! (a) exercised by a power-loss simulator (`sim_fs::SimFs`, with the `testing` feature: the
//! reliability suite crashes at every sync and checks that nothing acknowledged is lost, and
//! that the same suite fails when syncing is switched off), and (b) failed on purpose (an
//! `fsync` error must reject the puts it covers and poison the writer, never be retried and
//! trusted: it surfaces as [`super::SyncFailure`]).
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
//!    a partial file). A put can carry data staged earlier (`LocalStore::stage`), which
//!    leaves only the link.
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
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
    Result,
};

use super::faults::Faults;
use super::fs::{FileInfo, Fs, STAGING_PREFIX, Staged};
use super::paths::is_wal_path;
use super::{CreatedAt, OrNext, PrepareNext, Prestaged, SyncFailure};

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

impl fmt::Display for LocalStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LocalStore({})", self.shared.root.display())
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
/// [`super::is_sync_failure`] recognises it after `to_store_error`.
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

fn not_implemented(op: &str) -> object_store::Error {
    object_store::Error::NotImplemented {
        operation: op.to_string(),
        implementer: "LocalStore".to_string(),
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

    /// Stages `data` for a create in the directory of `location` ([`Fs::stage`]): written and
    /// synced now where the file system can, so that a put carrying it as [`Prestaged`] only
    /// links a name and syncs the directory.
    pub(crate) async fn stage(&self, location: &Path, data: Bytes) -> Result<Arc<Staged>> {
        let me = self.handle();
        let loc = location.clone();
        blocking(move || me.stage_blocking(&loc, &data))
            .await?
            .map(Arc::new)
            .map_err(|e| to_store_error(location, e))
    }

    /// Makes the files at `locations`, written by anyone (another process may have linked one
    /// and died before its sync), durable: each file's inode, then each of their directories.
    /// A file missing at its turn is `NotFound`. A failed sync is a [`SyncFailure`].
    pub(crate) async fn make_durable(&self, locations: Vec<Path>) -> Result<()> {
        let me = self.handle();
        let Some(first) = locations.first().cloned() else {
            return Ok(());
        };
        blocking(move || me.make_durable_blocking(&locations))
            .await?
            .map_err(|e| to_store_error(&first, e))
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

    /// Writes `data` at `location` (or, for a create with `or_next`, at the first free of
    /// `location` and `or_next`; with `prestaged`, names that instead of writing `data`); the
    /// index written. With `prepare_next`, a create has the next one's file opened meanwhile.
    fn put_blocking(
        &self,
        location: &Path,
        or_next: &[Path],
        prestaged: Option<&Staged>,
        data: Bytes,
        mode: &PutMode,
        prepare_next: bool,
    ) -> io::Result<usize> {
        let path = self.fs_path(location);
        let parent = path.parent().unwrap_or(&self.root).to_path_buf();
        self.ensure_dir(&parent)?;
        if prepare_next && matches!(mode, PutMode::Create) {
            self.prepare_next(&parent);
        }
        if prestaged.is_none() {
            self.injected_data_sync_failure(location, &path)?;
        }
        let sync = self.fsync;
        let written = match mode {
            PutMode::Create => {
                let paths: Vec<PathBuf> = std::iter::once(path.clone())
                    .chain(or_next.iter().map(|l| self.fs_path(l)))
                    .collect();
                self.create_first_free(&paths, prestaged, &data, sync, &parent, location)
            }
            PutMode::Overwrite => self.fs.replace_file(&path, &data, sync).map(|()| 0),
            PutMode::Update(_) => unreachable!("rejected by put_opts"),
        };
        let created = written.map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists | io::ErrorKind::NotFound => e,
            _ => self.write_error(&path, e),
        })?;
        if sync && matches!(mode, PutMode::Create) {
            // The link count of a linked file (module docs, step 3). An overwrite renames a
            // file whose data sync already wrote its link count (`Fs::replace_file`).
            let linked = if created == 0 {
                path.clone()
            } else {
                self.fs_path(&or_next[created - 1])
            };
            self.fs
                .sync_file(&linked)
                .map_err(|source| sync_failure(&linked, source))?;
        }
        self.sync_dir(&parent, is_wal_path(location))?;
        Ok(created)
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

    fn list_with_delimiter_blocking(&self, prefix: Option<&Path>) -> io::Result<ListResult> {
        let dir = prefix.map(|p| self.fs_path(p)).unwrap_or(self.root.clone());
        let loc = prefix.cloned().unwrap_or_default();
        let mut result = ListResult {
            common_prefixes: Vec::new(),
            objects: Vec::new(),
            extensions: Default::default(),
        };
        let entries = match self.fs.read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(result),
            Err(e) => return Err(e),
        };
        for (name, is_dir) in entries {
            if name.starts_with(STAGING_PREFIX) {
                continue;
            }
            let child = loc.clone().join(name.as_str());
            if is_dir {
                result.common_prefixes.push(child);
            } else {
                match self.fs.stat(&dir.join(&name)) {
                    Ok(info) => result.objects.push(object_meta(child, info)),
                    // Removed since the directory was read (see `list_blocking`).
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(result)
    }
}

/// Runs blocking file-system work off the async workers.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| object_store::Error::JoinError { source: e })
}

#[async_trait]
impl ObjectStore for LocalStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        if matches!(opts.mode, PutMode::Update(_)) {
            return Err(not_implemented("put_opts with PutMode::Update"));
        }
        let data: Bytes = payload.into();
        let me = self.handle();
        let location = location.clone();
        let mode = opts.mode.clone();
        let loc = location.clone();
        let or_next = opts
            .extensions
            .get::<OrNext>()
            .map(|o| o.0.clone())
            .unwrap_or_default();
        let prestaged = opts.extensions.get::<Prestaged>().map(|p| p.0.clone());
        let prepare_next = opts.extensions.get::<PrepareNext>().is_some();
        let created = blocking(move || {
            me.put_blocking(
                &loc,
                &or_next,
                prestaged.as_deref(),
                data,
                &mode,
                prepare_next,
            )
        })
        .await?
        .map_err(|e| to_store_error(&location, e))?;
        let mut extensions = object_store::Extensions::new();
        extensions.insert(CreatedAt(created));
        Ok(PutResult {
            e_tag: None,
            version: None,
            extensions,
        })
    }

    async fn put_multipart_opts(
        &self,
        _location: &Path,
        _opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        Err(not_implemented("put_multipart_opts"))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        if options.range.is_some() || options.if_match.is_some() || options.if_none_match.is_some()
        {
            return Err(not_implemented("get_opts with ranges or preconditions"));
        }
        let me = self.handle();
        let loc = location.clone();
        let (data, info) = blocking(move || {
            let p = me.fs_path(&loc);
            let data = me.fs.read(&p)?;
            let info = me.fs.stat(&p)?;
            Ok::<_, io::Error>((data, info))
        })
        .await?
        .map_err(|e| to_store_error(location, e))?;
        let size = data.len() as u64;
        // The size of the bytes read, which a concurrent replace cannot make disagree.
        let meta = ObjectMeta {
            size,
            ..object_meta(location.clone(), info)
        };
        let bytes = Bytes::from(data);
        Ok(GetResult {
            payload: GetResultPayload::Stream(stream::once(async move { Ok(bytes) }).boxed()),
            meta,
            range: 0..size,
            attributes: Default::default(),
            extensions: Default::default(),
        })
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let all = object_store::ObjectStoreExt::get(self, location)
            .await?
            .bytes()
            .await?;
        Ok(ranges
            .iter()
            .map(|r| all.slice(r.start as usize..(r.end as usize).min(all.len())))
            .collect())
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let me = self.handle();
        locations
            .then(move |location| {
                let me = me.clone();
                async move {
                    let location = location?;
                    let loc = location.clone();
                    blocking(move || me.delete_blocking(&loc))
                        .await?
                        .map_err(|e| to_store_error(&location, e))?;
                    Ok(location)
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let me = self.handle();
        let prefix = prefix.cloned();
        stream::once(async move {
            let p = prefix.clone();
            blocking(move || me.list_blocking(p.as_ref()))
                .await
                .and_then(|r| r.map_err(|e| to_store_error(&prefix.unwrap_or_default(), e)))
        })
        .flat_map(|r| match r {
            Ok(v) => stream::iter(v.into_iter().map(Ok)).boxed(),
            Err(e) => stream::once(async move { Err(e) }).boxed(),
        })
        .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let me = self.handle();
        let p = prefix.cloned();
        blocking(move || me.list_with_delimiter_blocking(p.as_ref()))
            .await?
            .map_err(|e| to_store_error(&prefix.cloned().unwrap_or_default(), e))
    }

    async fn copy_opts(&self, _from: &Path, _to: &Path, _options: CopyOptions) -> Result<()> {
        Err(not_implemented("copy"))
    }

    async fn rename_opts(&self, _from: &Path, _to: &Path, _options: RenameOptions) -> Result<()> {
        Err(not_implemented("rename"))
    }
}
