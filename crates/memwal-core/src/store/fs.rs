//! The file-system operations the local store needs, behind a trait so that a power-loss
//! simulator (`sim_fs::SimFs`, with the `testing` feature) can stand in for the real disk
//! ([`StdFs`]).
//!
//! Every operation is synchronous; [`super::local::LocalStore`] runs them on Tokio's blocking
//! pool. Durability is explicit: `create_file`/`replace_file` flush the file's data when asked,
//! directory entries are durable only after [`Fs::sync_dir`] on their directory, and a name
//! created by linking a staged file points at a durable inode only after [`Fs::sync_file`].
//!
//! # Why a linked file needs its own sync
//! A staged file may be unnamed (`O_TMPFILE`): its data sync writes its inode with a link count
//! of 0. `linkat` then raises the count to 1 in memory only. With a journal (ext4's default),
//! the link and the directory change commit together, so the directory's `fsync` carries both;
//! without one (ext4 `^has_journal`, which these machines run), the directory `fsync` writes the
//! directory's blocks and not the file's inode. After a power loss the name would point at an
//! inode whose on-disk link count is 0, which the orphan cleanup at mount frees: the file is
//! gone although its name and data were synced. So the publish order is: data sync, link,
//! [`Fs::sync_file`] (the inode, link count 1), then [`Fs::sync_dir`].

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// What `stat` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileInfo {
    /// Size in bytes (0 for directories).
    pub len: u64,
    /// True for a directory.
    pub is_dir: bool,
    /// Last modification time.
    pub modified: SystemTime,
}

/// See the module docs.
pub trait Fs: Send + Sync + std::fmt::Debug + 'static {
    /// Atomically creates `path` holding `data`: readers never see it partially written, and
    /// it fails with `AlreadyExists` if `path` exists. With `sync`, the data is flushed to
    /// stable storage before the name is published. The new directory entry is durable only
    /// after `sync_dir` of the parent.
    fn create_file(&self, path: &Path, data: &[u8], sync: bool) -> io::Result<()>;
    /// `create_file` at the first of `paths` (all in one directory) that does not exist, in
    /// order: the index of the name created, `AlreadyExists` if every name exists.
    fn create_file_first_free(
        &self,
        paths: &[PathBuf],
        data: &[u8],
        sync: bool,
    ) -> io::Result<usize> {
        let staged = self.stage(common_dir(paths)?, data, sync)?;
        self.publish_first_free(&staged, paths)
    }
    /// Readies `data` (flushed to stable storage with `sync`) for a new file in directory
    /// `dir`, without naming it: [`Fs::publish_first_free`] names it, as often as needed. A
    /// file system that can should write and sync here, so that this overlaps other work and
    /// a lost race for a name costs a `link`, not another sync. The default writes nothing
    /// until publishing.
    fn stage(&self, dir: &Path, data: &[u8], sync: bool) -> io::Result<Staged> {
        Ok(Staged {
            dir: dir.to_path_buf(),
            kind: StagedKind::Deferred {
                data: data.to_vec(),
                sync,
            },
        })
    }
    /// Opens, ahead of time, a file that a later [`Fs::stage`] in `dir` writes, so that creating
    /// its inode is not on that stage's path (see [`StdFs`]). Called off the critical path;
    /// nothing is named and nothing is written. The default does nothing.
    fn prepare(&self, dir: &Path) -> io::Result<()> {
        let _ = dir;
        Ok(())
    }
    /// Names `staged` at the first of `paths` (all in its directory) that does not exist, in
    /// order, as `create_file` would: the index of the name created, `AlreadyExists` if every
    /// name exists. The new entry is durable only after `sync_dir` of the directory.
    fn publish_first_free(&self, staged: &Staged, paths: &[PathBuf]) -> io::Result<usize> {
        if common_dir(paths)? != staged.dir {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "publishing a file staged in {} under another directory",
                    staged.dir.display()
                ),
            ));
        }
        match &staged.kind {
            StagedKind::Deferred { data, sync } => {
                first_free(paths, |path| self.create_file(path, data, *sync))
            }
            #[cfg(target_os = "linux")]
            StagedKind::Unnamed { dir, file } => {
                use rustix::fs::{AtFlags, CWD, linkat};
                use std::os::fd::AsRawFd;
                let by_fd = format!("/proc/self/fd/{}", file.as_raw_fd());
                first_free(paths, |path| {
                    let name = path.file_name().unwrap_or_default();
                    // EEXIST maps to `AlreadyExists`: the next name is tried.
                    linkat(CWD, by_fd.as_str(), dir, name, AtFlags::SYMLINK_FOLLOW)
                        .map_err(io::Error::from)
                })
            }
            // link(2) fails with EEXIST if the name exists: an atomic put-if-not-exists.
            StagedKind::Named(staging) => first_free(paths, |path| fs::hard_link(staging, path)),
            #[cfg(feature = "testing")]
            StagedKind::Sim(_) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a file staged by the power-loss simulator is published by the simulator",
            )),
        }
    }
    /// Atomically replaces (or creates) `path` with `data`; with `sync`, data flushed first.
    /// The file is created under a name before its data sync, so that sync also writes its
    /// link count; a rename moves that name and needs only [`Fs::sync_dir`].
    fn replace_file(&self, path: &Path, data: &[u8], sync: bool) -> io::Result<()>;
    /// Makes the file at `path` durable, data and inode (`fsync`, not `fdatasync`): after a
    /// create or publish, this is what makes its link count durable on a file system without a
    /// journal (see the module docs).
    fn sync_file(&self, path: &Path) -> io::Result<()>;
    /// Creates one directory; `AlreadyExists` if it exists.
    fn create_dir(&self, path: &Path) -> io::Result<()>;
    /// Makes the entries of directory `path` durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// The whole content of a file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Size and kind.
    fn stat(&self, path: &Path) -> io::Result<FileInfo>;
    /// Names in a directory, with whether each is a directory.
    fn read_dir(&self, path: &Path) -> io::Result<Vec<(String, bool)>>;
    /// Removes the file at `path` (garbage collection). Not synced: an entry that comes back
    /// after a crash is collected again.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Removes the directory at `path`, which must be empty.
    fn remove_dir(&self, path: &Path) -> io::Result<()>;
    /// Whether `path` exists.
    fn exists(&self, path: &Path) -> io::Result<bool> {
        match self.stat(path) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    // Files written in place (the segment-log WAL, `docs/wal-segments.md`).

    /// Creates the file `path` (`AlreadyExists` if it exists) holding `len` zero bytes, with
    /// its data and inode synced, so that later writes into it change no metadata (its
    /// directory entry is durable only after [`Fs::sync_dir`]).
    fn allocate(&self, path: &Path, len: u64) -> io::Result<()> {
        let _ = (path, len);
        Err(unsupported("allocating a file"))
    }
    /// Opens the existing file `path` for reads and writes in place. The handle follows the
    /// file, not the name: a rename does not move its writes elsewhere.
    fn open_file(&self, path: &Path) -> io::Result<Box<dyn FileHandle>> {
        let _ = path;
        Err(unsupported("opening a file for writes in place"))
    }
    /// Renames `from` to `to` (both in one directory), failing with `AlreadyExists` if `to`
    /// exists: two writers can never take one name. Durable only after [`Fs::sync_dir`].
    fn rename_noreplace(&self, from: &Path, to: &Path) -> io::Result<()> {
        let _ = (from, to);
        Err(unsupported("renaming without replacing"))
    }
    /// The name of the network (or user-space) file system `path` is on, `None` for a local
    /// one. For a path that does not exist yet, its nearest existing ancestor's.
    fn network_file_system(&self, path: &Path) -> io::Result<Option<&'static str>> {
        let _ = path;
        Ok(None)
    }
}

/// `statfs` magic numbers of file systems that may be shared between hosts, or whose page
/// cache memwal cannot rely on: the segment-log WAL's fence re-check reads what a claimant on
/// the same host wrote, and is no fence across hosts.
const NETWORK_FILE_SYSTEMS: &[(i64, &str)] = &[
    (0x6969, "NFS"),
    (0x517B, "SMB"),
    (0xFF53_4D42, "CIFS"),
    (0xFE53_4D42, "SMB2"),
    (0x6573_5546, "FUSE"),
    (0x00C3_6400, "Ceph"),
    (0x0102_1997, "9P"),
    (0x5346_414F, "AFS"),
    (0x0BD0_0BD0, "Lustre"),
    (0x4750_4653, "GPFS"),
];

/// See [`Fs::network_file_system`], for the real file system.
#[cfg(target_os = "linux")]
fn statfs_network_kind(path: &Path) -> io::Result<Option<&'static str>> {
    let mut at = Some(path);
    while let Some(p) = at {
        match rustix::fs::statfs(p) {
            Ok(st) => {
                // Its type is i64 here, but not on every architecture.
                #[allow(clippy::unnecessary_cast)]
                let magic = st.f_type as i64;
                return Ok(NETWORK_FILE_SYSTEMS
                    .iter()
                    .find(|(m, _)| *m == magic)
                    .map(|(_, name)| *name));
            }
            Err(rustix::io::Errno::NOENT) => at = p.parent(),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(None)
}

/// An open file written in place, from [`Fs::open_file`].
pub trait FileHandle: Send + Sync + std::fmt::Debug {
    /// Writes `data` at `offset` (into the page cache: durable only after
    /// [`FileHandle::sync_data`]).
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Reads up to `len` bytes at `offset` (fewer at the end of the file).
    fn read_at(&self, offset: u64, len: usize) -> io::Result<Vec<u8>>;
    /// `fdatasync`: every write so far, and the metadata needed to read it back, durable.
    fn sync_data(&self) -> io::Result<()>;
}

fn unsupported(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("{what} is not supported by this file system"),
    )
}

/// Tries `create` on each of `paths` in order: the index of the first it created, skipping
/// names that exist (`AlreadyExists` if all do); any other error ends the search.
fn first_free(
    paths: &[PathBuf],
    mut create: impl FnMut(&Path) -> io::Result<()>,
) -> io::Result<usize> {
    for (i, path) in paths.iter().enumerate() {
        match create(path) {
            Ok(()) => return Ok(i),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(all_exist(paths))
}

fn all_exist(paths: &[PathBuf]) -> io::Error {
    io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "{} and the {} names after it exist",
            paths
                .first()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            paths.len().saturating_sub(1)
        ),
    )
}

/// The directory of `paths`, which must all be in one (`AlreadyExists` for no paths, as for
/// a search that found no free name).
fn common_dir(paths: &[PathBuf]) -> io::Result<&Path> {
    let dir = paths
        .first()
        .ok_or_else(|| all_exist(paths))?
        .parent()
        .unwrap_or(Path::new(""));
    if paths
        .iter()
        .any(|p| p.parent() != Some(dir) || p.file_name().is_none())
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a create at the first free of several names needs them all in one directory",
        ));
    }
    Ok(dir)
}

/// File data readied by [`Fs::stage`] for a directory but not yet named. Invariant: when it
/// is not `Deferred`, its data is written (and synced if asked) and only a link remains.
#[derive(Debug)]
pub struct Staged {
    dir: PathBuf,
    kind: StagedKind,
}

#[derive(Debug)]
enum StagedKind {
    /// Nothing written yet: publishing creates the file.
    Deferred { data: Vec<u8>, sync: bool },
    /// Linux: an unnamed file in the directory (`O_TMPFILE`), linked by its /proc name.
    #[cfg(target_os = "linux")]
    Unnamed {
        dir: rustix::fd::OwnedFd,
        file: File,
    },
    /// A named staging file in the directory; removed on drop.
    Named(PathBuf),
    /// The power-loss simulator's unnamed file (its inode id).
    #[cfg(feature = "testing")]
    Sim(u64),
}

#[cfg(feature = "testing")]
impl Staged {
    /// The power-loss simulator's unnamed file `id`, staged for directory `dir`.
    pub(crate) fn sim(dir: &Path, id: u64) -> Staged {
        Staged {
            dir: dir.to_path_buf(),
            kind: StagedKind::Sim(id),
        }
    }

    /// The directory it was staged for and, if the simulator staged it, its inode id.
    pub(crate) fn sim_parts(&self) -> (&Path, Option<u64>) {
        match self.kind {
            StagedKind::Sim(id) => (&self.dir, Some(id)),
            _ => (&self.dir, None),
        }
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let StagedKind::Named(staging) = &self.kind {
            let _ = fs::remove_file(staging);
        }
    }
}

/// Prefix of staging files; names starting with it are never objects.
pub const STAGING_PREFIX: &str = ".staging-";

/// The real file system (POSIX semantics; `fdatasync` for file data, `fsync` for directories).
///
/// # Files opened ahead
/// On Linux a staged file is an unnamed `O_TMPFILE`, and creating its inode can take longer
/// than all of an append's syncs: without a journal, ext4 does not reuse an inode for a minute
/// or more after its file was deleted, and scans past every such inode of the block group for
/// each new one (`recently_deleted`), so after garbage collection has deleted WAL entries an
/// open took 0.8 ms here, against about 0.45 ms for an append's three syncs. So
/// [`Fs::prepare`] opens the next one ahead, on another thread while the current entry is
/// written and synced, and `stage` takes it ([`spares`]): durable one-row puts at 64 clients
/// with background collection every 15 s, 35.2k against 31.8k puts/s (means of six 60 s runs
/// each, alternated; faster in five of the six pairs). Only for durable writers, whose puts
/// wait for the append ([`crate::store::PrepareNext`]): for non-durable ones the extra thread
/// took CPU from the puts (7% fewer in one measurement). The file is unnamed and empty until
/// staged, so this changes nothing a crash can see: the publish protocol (module docs) is the
/// same, and a spare never used is freed when its descriptor closes.
#[derive(Debug, Default, Clone, Copy)]
pub struct StdFs;

/// `fdatasync` of a new file in `dir`: the one call site, so that tests can make it fail with
/// a real errno ([`sync_errors`], `testing` feature only) as the kernel would.
fn sync_data(file: &File, dir: &Path) -> io::Result<()> {
    #[cfg(feature = "testing")]
    if let Some(errno) = sync_errors::take(sync_errors::Sync::Data, dir) {
        return Err(io::Error::from_raw_os_error(errno));
    }
    #[cfg(not(feature = "testing"))]
    let _ = dir;
    file.sync_data()
}

/// Test hook (`testing` feature only): make the next syncs of [`StdFs`] in a directory fail
/// with a given errno, returned by the sync call site as `io::Error::from_raw_os_error`,
/// exactly the value a real failing `fdatasync` or `fsync` yields.
#[cfg(feature = "testing")]
pub mod sync_errors {
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Which sync of a directory fails.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Sync {
        /// The `fdatasync` of a new file staged in the directory (nothing is published).
        Data,
        /// The `fsync` of the directory itself (after a name was published in it).
        Dir,
    }

    /// Armed failures; keyed by directory so that tests running in parallel (each in its own
    /// temp directory) do not take each other's.
    static ARMED: Mutex<Vec<(Sync, PathBuf, i32)>> = Mutex::new(Vec::new());
    /// `ARMED.len()`, so that an unarmed sync costs one atomic load.
    static COUNT: AtomicUsize = AtomicUsize::new(0);

    /// The next `which` sync in `dir` fails with `errno` (one per call).
    pub fn fail_next(which: Sync, dir: &Path, errno: i32) {
        let mut armed = ARMED.lock().unwrap_or_else(|e| e.into_inner());
        armed.push((which, dir.to_path_buf(), errno));
        COUNT.store(armed.len(), Ordering::SeqCst);
    }

    pub(super) fn take(which: Sync, dir: &Path) -> Option<i32> {
        if COUNT.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let mut armed = ARMED.lock().unwrap_or_else(|e| e.into_inner());
        let i = armed.iter().position(|(w, d, _)| *w == which && d == dir)?;
        let (_, _, errno) = armed.remove(i);
        COUNT.store(armed.len(), Ordering::SeqCst);
        Some(errno)
    }
}

fn staging_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!(
        "{STAGING_PREFIX}{:016x}-{name}",
        rand::random::<u64>()
    ))
}

fn write_staging(dir: &Path, name: &str, data: &[u8], sync: bool) -> io::Result<PathBuf> {
    let staging = staging_path(dir, name);
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&staging)?;
        f.write_all(data)?;
        if sync {
            // fdatasync suffices for a new file: it flushes the data and the size needed to
            // read it back, and with them the inode (link count 1: the file has a name). A
            // second name added by `link` needs `sync_file`; see the module docs.
            sync_data(&f, dir)?;
        }
        Ok(())
    })();
    match result {
        Ok(()) => Ok(staging),
        Err(e) => {
            let _ = fs::remove_file(&staging);
            Err(e)
        }
    }
}

/// Linux: an unnamed file in `dir` (`O_TMPFILE`), written and synced, to be named with
/// `linkat` (which fails if the name exists). No staging name is created or removed, so the
/// directory changes once per create. `None` when the file system or kernel cannot do this
/// (the caller then uses a named staging file).
#[cfg(target_os = "linux")]
fn stage_unnamed(dir_path: &Path, data: &[u8], sync: bool) -> Option<io::Result<Staged>> {
    let (dir, mut file) = match spares::take(dir_path) {
        Some(spare) => spare,
        None => match open_unnamed(dir_path)? {
            Ok(opened) => opened,
            Err(e) => return Some(Err(e)),
        },
    };
    if let Err(e) = file.write_all(data) {
        return Some(Err(e));
    }
    // The inode is written with a link count of 0 here: `sync_file` after the link makes
    // the name's inode durable (module docs).
    if sync && let Err(e) = sync_data(&file, dir_path) {
        return Some(Err(e));
    }
    Some(Ok(Staged {
        dir: dir_path.to_path_buf(),
        kind: StagedKind::Unnamed { dir, file },
    }))
}

#[cfg(not(target_os = "linux"))]
fn stage_unnamed(_dir: &Path, _data: &[u8], _sync: bool) -> Option<io::Result<Staged>> {
    None
}

/// Linux: a new unnamed file (`O_TMPFILE`) in `dir_path`, with the directory's descriptor to
/// link it by; `None` when the file system or kernel cannot do this.
#[cfg(target_os = "linux")]
fn open_unnamed(dir_path: &Path) -> Option<io::Result<(rustix::fd::OwnedFd, File)>> {
    use rustix::fs::{CWD, Mode, OFlags, openat};
    use rustix::io::Errno;
    use std::os::fd::AsRawFd;

    let dir = match openat(
        CWD,
        dir_path,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(d) => d,
        Err(e) => return Some(Err(e.into())),
    };
    let fd = match openat(
        &dir,
        ".",
        OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    ) {
        Ok(fd) => fd,
        Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL | Errno::NOENT) => return None,
        Err(e) => return Some(Err(e.into())),
    };
    // Linking goes through /proc; without it, use a named staging file.
    if fs::symlink_metadata(format!("/proc/self/fd/{}", fd.as_raw_fd())).is_err() {
        return None;
    }
    Some(Ok((dir, File::from(fd))))
}

/// Linux: unnamed files opened ahead by [`Fs::prepare`] for [`StdFs`]'s stages (see
/// [`StdFs`]), a few per directory. Process-wide, keyed by the directory's path: a spare is an
/// empty inode of that directory, usable by any store writing there.
#[cfg(target_os = "linux")]
mod spares {
    use std::collections::VecDeque;
    use std::fs::File;
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;
    use std::time::Duration;

    use rustix::fd::OwnedFd;
    use tokio::time::Instant;

    /// Spares kept for one directory: one for the next stage, one for the stage after it
    /// when a prepare is slower than an append.
    const PER_DIR: usize = 2;
    /// Spares kept in all (each holds two descriptors).
    const TOTAL: usize = 16;
    /// A spare this old belongs to a directory no longer written (a stage takes its
    /// directory's oldest spare): it may make room for another directory's. Younger spares are
    /// never evicted, because closing an unused spare frees its inode, which only adds to the
    /// recently deleted inodes that every later create scans past: with more directories
    /// written than places, the directories without one simply open their own file.
    const IDLE: Duration = Duration::from_secs(10);

    struct Spare {
        path: PathBuf,
        dir: OwnedFd,
        file: File,
        opened: Instant,
    }

    /// Oldest first.
    static SPARES: Mutex<VecDeque<Spare>> = Mutex::new(VecDeque::new());

    fn lock() -> std::sync::MutexGuard<'static, VecDeque<Spare>> {
        SPARES.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A spare of `dir` (its descriptor and the unnamed file), if one is ready and `dir` is
    /// still the directory it was opened in: a directory removed and made again under the
    /// same path is another directory, which the old one's file could not be linked into.
    pub(super) fn take(dir: &Path) -> Option<(OwnedFd, File)> {
        let spare = {
            let mut spares = lock();
            let i = spares.iter().position(|s| s.path == dir)?;
            spares.remove(i)?
        };
        let same =
            |a: rustix::fs::Stat, b: rustix::fs::Stat| a.st_dev == b.st_dev && a.st_ino == b.st_ino;
        match (rustix::fs::fstat(&spare.dir), rustix::fs::stat(dir)) {
            (Ok(opened), Ok(now)) if same(opened, now) => Some((spare.dir, spare.file)),
            _ => None,
        }
    }

    /// Whether a spare for `dir` would be kept now: `dir` has fewer than [`PER_DIR`], and
    /// there is a free place or an idle spare to make room.
    fn has_room(spares: &VecDeque<Spare>, dir: &Path, now: Instant) -> bool {
        spares.iter().filter(|s| s.path == dir).count() < PER_DIR
            && (spares.len() < TOTAL || spares.iter().any(|s| now - s.opened >= IDLE))
    }

    /// Whether a spare opened now for `dir` would be kept.
    pub(super) fn wanted(dir: &Path) -> bool {
        has_room(&lock(), dir, Instant::now())
    }

    /// Keeps a spare for `dir`, opened at `opened`, evicting the oldest idle spare if every
    /// place is taken; if there is no room after all (another prepare filled it meanwhile),
    /// the spare is closed and its inode, never named, is freed.
    pub(super) fn put(dir: &Path, (fd, file): (OwnedFd, File), opened: Instant) {
        let mut spares = lock();
        let now = Instant::now();
        if !has_room(&spares, dir, now) {
            return;
        }
        if spares.len() >= TOTAL
            && let Some(i) = spares.iter().position(|s| now - s.opened >= IDLE)
        {
            spares.remove(i);
        }
        spares.push_back(Spare {
            path: dir.to_path_buf(),
            dir: fd,
            file,
            opened,
        });
    }

    /// Spares held for `dir` (tests).
    #[cfg(test)]
    pub(super) fn count(dir: &Path) -> usize {
        lock().iter().filter(|s| s.path == dir).count()
    }

    /// Spares held in all (tests).
    #[cfg(test)]
    pub(super) fn total() -> usize {
        lock().len()
    }

    #[cfg(test)]
    pub(super) const LIMITS: (usize, usize, Duration) = (PER_DIR, TOTAL, IDLE);
}

/// Spares held for `dir` (tests of the stores that ask for them).
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn spare_count(dir: &Path) -> usize {
    spares::count(dir)
}

/// Held by tests that count spares: the spares are process-wide, and the test that fills them
/// all would evict another's.
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn spare_tests() -> std::sync::MutexGuard<'static, ()> {
    static SPARE_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SPARE_TESTS.lock().unwrap_or_else(|e| e.into_inner())
}

impl Fs for StdFs {
    fn create_file(&self, path: &Path, data: &[u8], sync: bool) -> io::Result<()> {
        self.create_file_first_free(&[path.to_path_buf()], data, sync)
            .map(|_| ())
    }

    /// Never `Deferred` (whose publishing calls `create_file`, which stages).
    fn stage(&self, dir: &Path, data: &[u8], sync: bool) -> io::Result<Staged> {
        if let Some(staged) = stage_unnamed(dir, data, sync) {
            return staged;
        }
        Ok(Staged {
            dir: dir.to_path_buf(),
            kind: StagedKind::Named(write_staging(dir, "", data, sync)?),
        })
    }

    #[cfg(target_os = "linux")]
    fn prepare(&self, dir: &Path) -> io::Result<()> {
        if spares::wanted(dir)
            && let Some(opened) = open_unnamed(dir)
        {
            spares::put(dir, opened?, tokio::time::Instant::now());
        }
        Ok(())
    }

    fn replace_file(&self, path: &Path, data: &[u8], sync: bool) -> io::Result<()> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let dir = path.parent().unwrap_or(Path::new(""));
        let staging = write_staging(dir, &name, data, sync)?;
        fs::rename(&staging, path).inspect_err(|_| {
            let _ = fs::remove_file(&staging);
        })
    }

    fn create_dir(&self, path: &Path) -> io::Result<()> {
        fs::create_dir(path)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        #[cfg(feature = "testing")]
        if let Some(errno) = sync_errors::take(sync_errors::Sync::Dir, path) {
            return Err(io::Error::from_raw_os_error(errno));
        }
        File::open(path)?.sync_all()
    }

    fn sync_file(&self, path: &Path) -> io::Result<()> {
        // fsync, not fdatasync: a link count is not needed to read the data back, so
        // fdatasync may skip the inode this is for.
        File::open(path)?.sync_all()
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }

    fn stat(&self, path: &Path) -> io::Result<FileInfo> {
        let m = fs::metadata(path)?;
        Ok(FileInfo {
            len: if m.is_dir() { 0 } else { m.len() },
            is_dir: m.is_dir(),
            modified: m.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        })
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir(path)
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<(String, bool)>> {
        let mut out = Vec::new();
        for e in fs::read_dir(path)? {
            let e = e?;
            let is_dir = e.file_type()?.is_dir();
            out.push((e.file_name().to_string_lossy().into_owned(), is_dir));
        }
        Ok(out)
    }

    fn allocate(&self, path: &Path, len: u64) -> io::Result<()> {
        let file = OpenOptions::new().write(true).create_new(true).open(path)?;
        // Zeros written, not a hole or an unwritten extent: a write into either allocates or
        // converts blocks, which is metadata the append's fdatasync would then have to write.
        let zeros = vec![0u8; 1 << 20];
        let mut left = len;
        let mut writer = io::BufWriter::with_capacity(zeros.len(), &file);
        while left > 0 {
            let n = left.min(zeros.len() as u64) as usize;
            writer.write_all(&zeros[..n])?;
            left -= n as u64;
        }
        writer.flush()?;
        drop(writer);
        file.sync_all()
    }

    fn open_file(&self, path: &Path) -> io::Result<Box<dyn FileHandle>> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        Ok(Box::new(StdFile(file)))
    }

    fn network_file_system(&self, path: &Path) -> io::Result<Option<&'static str>> {
        #[cfg(target_os = "linux")]
        {
            statfs_network_kind(path)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = path;
            Ok(None)
        }
    }

    fn rename_noreplace(&self, from: &Path, to: &Path) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        {
            use rustix::fs::{CWD, RenameFlags, renameat_with};
            renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE).map_err(io::Error::from)
        }
        #[cfg(not(target_os = "linux"))]
        {
            // No atomic no-replace rename: a hard link fails if `to` exists, then the old name
            // goes (a crash between leaves both names, which a reader of either sees alike).
            fs::hard_link(from, to)?;
            fs::remove_file(from)
        }
    }
}

/// A [`FileHandle`] of [`StdFs`].
#[derive(Debug)]
struct StdFile(File);

impl FileHandle for StdFile {
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        self.0.write_all_at(data, offset)
    }

    fn read_at(&self, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0u8; len];
        let mut got = 0;
        while got < len {
            match self.0.read_at(&mut buf[got..], offset + got as u64)? {
                0 => break,
                n => got += n,
            }
        }
        buf.truncate(got);
        Ok(buf)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_allocated_is_written_in_place_and_renamed_without_replacing() {
        let dir = tempfile::tempdir().unwrap();
        let (spare, seg, other) = (
            dir.path().join(".spare"),
            dir.path().join("1.seg"),
            dir.path().join("2.seg"),
        );
        StdFs.allocate(&spare, 3 << 20).unwrap();
        assert_eq!(StdFs.stat(&spare).unwrap().len, 3 << 20);
        assert_eq!(
            StdFs.allocate(&spare, 1).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        let f = StdFs.open_file(&spare).unwrap();
        f.write_at(4096, b"record").unwrap();
        f.sync_data().unwrap();
        StdFs.rename_noreplace(&spare, &seg).unwrap();
        // The handle follows the file across the rename.
        f.write_at(4102, b"!").unwrap();
        assert_eq!(f.read_at(4096, 7).unwrap(), b"record!");
        assert_eq!(
            f.read_at((3 << 20) - 2, 10).unwrap(),
            vec![0, 0],
            "short at the end"
        );
        StdFs.allocate(&other, 10).unwrap();
        assert_eq!(
            StdFs.rename_noreplace(&other, &seg).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        assert_eq!(&StdFs.read(&seg).unwrap()[4096..4103], b"record!");
    }

    /// Publishes `staged` at `a`, then at `[a, b]` twice: the first free name each time, then
    /// `AlreadyExists`; another directory is refused.
    fn check_publish(staged: &Staged, dir: &Path) {
        let (a, b) = (dir.join("a"), dir.join("b"));
        let named = StdFs
            .read_dir(dir)
            .unwrap()
            .into_iter()
            .filter(|(n, _)| !n.starts_with(STAGING_PREFIX))
            .count();
        assert_eq!(named, 0, "staging named a file");
        assert_eq!(
            StdFs
                .publish_first_free(staged, std::slice::from_ref(&a))
                .unwrap(),
            0
        );
        let both = [a.clone(), b.clone()];
        assert_eq!(StdFs.publish_first_free(staged, &both).unwrap(), 1);
        let e = StdFs.publish_first_free(staged, &both).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(StdFs.read(&a).unwrap(), b"one");
        assert_eq!(StdFs.read(&b).unwrap(), b"one");
        let elsewhere = tempfile::tempdir().unwrap();
        let e = StdFs
            .publish_first_free(staged, &[elsewhere.path().join("c")])
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn unnamed_staged_file_links_at_the_first_free_name() {
        let dir = tempfile::tempdir().unwrap();
        let staged = match stage_unnamed(dir.path(), b"one", true) {
            // The file system cannot do it; `stage` falls back to a named staging file.
            None => return,
            Some(r) => r.unwrap(),
        };
        assert!(matches!(staged.kind, StagedKind::Unnamed { .. }));
        check_publish(&staged, dir.path());
        drop(staged);
        assert_eq!(StdFs.read_dir(dir.path()).unwrap().len(), 2);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_prepared_file_is_what_the_next_stage_writes() {
        let _serial = spare_tests();
        let dir = tempfile::tempdir().unwrap();
        let (per_dir, _, _) = spares::LIMITS;
        for _ in 0..per_dir + 1 {
            StdFs.prepare(dir.path()).unwrap();
        }
        if spares::count(dir.path()) == 0 {
            return; // no O_TMPFILE here: stages use named staging files
        }
        assert_eq!(
            spares::count(dir.path()),
            per_dir,
            "at most {per_dir} spares"
        );
        let staged = StdFs.stage(dir.path(), b"one", true).unwrap();
        assert_eq!(spares::count(dir.path()), per_dir - 1, "the stage took one");
        assert!(matches!(staged.kind, StagedKind::Unnamed { .. }));
        check_publish(&staged, dir.path());
    }

    // Without the check in `spares::take`, the stage would write the old directory's file and
    // the link into the new directory would fail.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_spare_of_a_directory_removed_and_made_again_is_not_used() {
        let _serial = spare_tests();
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("d");
        fs::create_dir(&dir).unwrap();
        StdFs.prepare(&dir).unwrap();
        if spares::count(&dir) == 0 {
            return;
        }
        fs::remove_dir(&dir).unwrap();
        fs::create_dir(&dir).unwrap();
        let staged = StdFs.stage(&dir, b"one", true).unwrap();
        assert_eq!(spares::count(&dir), 0, "the stale spare was dropped");
        StdFs.publish_first_free(&staged, &[dir.join("a")]).unwrap();
        assert_eq!(StdFs.read(&dir.join("a")).unwrap(), b"one");
    }

    // Other lib tests' WAL puts may add spares of their own directories meanwhile; they too
    // evict only idle spares.
    #[cfg(target_os = "linux")]
    #[test]
    fn only_idle_spares_make_room_for_other_directories() {
        let _serial = spare_tests();
        let (_, total, idle) = spares::LIMITS;
        let dirs: Vec<_> = (0..=total + 1)
            .map(|_| tempfile::tempdir().unwrap())
            .collect();
        let Some(Ok(_)) = open_unnamed(dirs[0].path()) else {
            return; // no O_TMPFILE here
        };
        // The spares are process-wide: leave none of these directories' behind, even on failure.
        struct Drain<'a>(&'a [tempfile::TempDir]);
        impl Drop for Drain<'_> {
            fn drop(&mut self) {
                for d in self.0 {
                    while spares::take(d.path()).is_some() {}
                }
            }
        }
        let _drain = Drain(&dirs);
        let long_ago = tokio::time::Instant::now() - 2 * idle;
        for d in &dirs[..total] {
            spares::put(d.path(), open_unnamed(d.path()).unwrap().unwrap(), long_ago);
        }
        assert!(spares::total() <= total);
        // Every place taken by idle spares: a new directory's spare evicts the oldest.
        StdFs.prepare(dirs[total].path()).unwrap();
        assert_eq!(spares::count(dirs[total].path()), 1);
        assert_eq!(
            spares::count(dirs[0].path()),
            0,
            "the oldest idle spare was evicted"
        );
        // Spares in use are never evicted: fill the places with fresh ones.
        for d in &dirs[..total] {
            while spares::take(d.path()).is_some() {}
            StdFs.prepare(d.path()).unwrap();
        }
        StdFs.prepare(dirs[total + 1].path()).unwrap();
        assert_eq!(
            spares::count(dirs[total + 1].path()),
            0,
            "no idle spare to evict"
        );
        assert_eq!(spares::count(dirs[total].path()), 1, "a fresh spare stays");
    }

    #[test]
    fn named_staged_file_links_at_the_first_free_name_and_is_removed_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let staging = write_staging(dir.path(), "", b"one", true).unwrap();
        let staged = Staged {
            dir: dir.path().to_path_buf(),
            kind: StagedKind::Named(staging.clone()),
        };
        check_publish(&staged, dir.path());
        drop(staged);
        assert!(!staging.exists());
        assert_eq!(StdFs.read_dir(dir.path()).unwrap().len(), 2);
    }

    #[test]
    fn deferred_staging_writes_only_when_published() {
        let dir = tempfile::tempdir().unwrap();
        let staged = Staged {
            dir: dir.path().to_path_buf(),
            kind: StagedKind::Deferred {
                data: b"one".to_vec(),
                sync: true,
            },
        };
        check_publish(&staged, dir.path());
    }

    #[test]
    fn create_file_is_exclusive_and_leaves_no_staging() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a");
        StdFs.create_file(&p, b"one", true).unwrap();
        let e = StdFs.create_file(&p, b"two", true).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(StdFs.read(&p).unwrap(), b"one");
        StdFs.replace_file(&p, b"three", true).unwrap();
        assert_eq!(StdFs.read(&p).unwrap(), b"three");
        let names = StdFs.read_dir(dir.path()).unwrap();
        assert_eq!(names, vec![("a".to_string(), false)]);
        StdFs.sync_dir(dir.path()).unwrap();
    }
}
