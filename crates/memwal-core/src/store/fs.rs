//! The file-system operations the local store needs, behind a trait so that a power-loss
//! simulator ([`super::sim_fs::SimFs`]) can stand in for the real disk ([`StdFs`]).
//!
//! Every operation is synchronous; [`super::local::LocalStore`] runs them on Tokio's blocking
//! pool. Durability is explicit: `create_file`/`replace_file` flush the file's data when asked,
//! and directory entries are durable only after [`Fs::sync_dir`] on their directory.

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
    /// order: the index of the name created, `AlreadyExists` if every name exists. A file
    /// system that can should write and sync the data once and then only try names, so that
    /// a lost race for one name costs a `link`, not another sync.
    fn create_file_first_free(
        &self,
        paths: &[PathBuf],
        data: &[u8],
        sync: bool,
    ) -> io::Result<usize> {
        first_free(paths, |path| self.create_file(path, data, sync))
    }
    /// Atomically replaces (or creates) `path` with `data`; with `sync`, data flushed first.
    fn replace_file(&self, path: &Path, data: &[u8], sync: bool) -> io::Result<()>;
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
    /// Whether `path` exists.
    fn exists(&self, path: &Path) -> io::Result<bool> {
        match self.stat(path) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
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

/// Prefix of staging files; names starting with it are never objects.
pub const STAGING_PREFIX: &str = ".staging-";

/// The real file system (POSIX semantics; `fdatasync` for file data, `fsync` for directories).
#[derive(Debug, Default, Clone, Copy)]
pub struct StdFs;

fn staging_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(
        "{STAGING_PREFIX}{:016x}-{name}",
        rand::random::<u64>()
    ))
}

fn write_staging(path: &Path, data: &[u8], sync: bool) -> io::Result<PathBuf> {
    let staging = staging_path(path);
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&staging)?;
        f.write_all(data)?;
        if sync {
            // fdatasync suffices for a new file: it flushes the data and the size needed to
            // read it back; the name is published (and synced) separately.
            f.sync_data()?;
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

/// Linux: write an unnamed file in the target directory (`O_TMPFILE`), sync it, then give it
/// the first free of `paths` with `linkat`, which fails if the name exists. No staging name is
/// created or removed, so the directory changes once per put. `None` when the file system or
/// kernel cannot do this (the caller then uses a staging file).
#[cfg(target_os = "linux")]
fn create_via_tmpfile(paths: &[PathBuf], data: &[u8], sync: bool) -> Option<io::Result<usize>> {
    use rustix::fs::{AtFlags, CWD, Mode, OFlags, linkat, openat};
    use rustix::io::Errno;
    use std::os::fd::AsRawFd;

    let parent = paths.first()?.parent()?;
    if paths.iter().any(|p| p.file_name().is_none()) {
        return None;
    }
    let dir = match openat(
        CWD,
        parent,
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
    let mut file = File::from(fd);
    if let Err(e) = file.write_all(data) {
        return Some(Err(e));
    }
    if sync && let Err(e) = file.sync_data() {
        return Some(Err(e));
    }
    let by_fd = format!("/proc/self/fd/{}", file.as_raw_fd());
    let linked = first_free(paths, |path| {
        let name = path.file_name().unwrap_or_default();
        // EEXIST maps to `AlreadyExists`: the next name is tried.
        linkat(CWD, by_fd.as_str(), &dir, name, AtFlags::SYMLINK_FOLLOW).map_err(io::Error::from)
    });
    match linked {
        // No /proc: fall back to a named staging file.
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        r => Some(r),
    }
}

#[cfg(not(target_os = "linux"))]
fn create_via_tmpfile(_paths: &[PathBuf], _data: &[u8], _sync: bool) -> Option<io::Result<usize>> {
    None
}

impl Fs for StdFs {
    fn create_file(&self, path: &Path, data: &[u8], sync: bool) -> io::Result<()> {
        self.create_file_first_free(&[path.to_path_buf()], data, sync)
            .map(|_| ())
    }

    fn create_file_first_free(
        &self,
        paths: &[PathBuf],
        data: &[u8],
        sync: bool,
    ) -> io::Result<usize> {
        if let Some(result) = create_via_tmpfile(paths, data, sync) {
            return result;
        }
        let Some(first) = paths.first() else {
            return Err(all_exist(paths));
        };
        let staging = write_staging(first, data, sync)?;
        // link(2) fails with EEXIST if `path` exists: an atomic put-if-not-exists.
        let linked = first_free(paths, |path| fs::hard_link(&staging, path));
        let _ = fs::remove_file(&staging);
        linked
    }

    fn replace_file(&self, path: &Path, data: &[u8], sync: bool) -> io::Result<()> {
        let staging = write_staging(path, data, sync)?;
        fs::rename(&staging, path).inspect_err(|_| {
            let _ = fs::remove_file(&staging);
        })
    }

    fn create_dir(&self, path: &Path) -> io::Result<()> {
        fs::create_dir(path)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
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

    fn read_dir(&self, path: &Path) -> io::Result<Vec<(String, bool)>> {
        let mut out = Vec::new();
        for e in fs::read_dir(path)? {
            let e = e?;
            let is_dir = e.file_type()?.is_dir();
            out.push((e.file_name().to_string_lossy().into_owned(), is_dir));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn tmpfile_publish_is_exclusive() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x");
        let q = dir.path().join("y");
        match create_via_tmpfile(std::slice::from_ref(&p), b"one", true) {
            // The file system cannot do it; `create_file` falls back to a staging file.
            None => return,
            Some(r) => assert_eq!(r.unwrap(), 0),
        }
        let both = [p.clone(), q.clone()];
        assert_eq!(create_via_tmpfile(&both, b"two", true).unwrap().unwrap(), 1);
        let e = create_via_tmpfile(&both, b"three", true)
            .unwrap()
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&p).unwrap(), b"one");
        assert_eq!(std::fs::read(&q).unwrap(), b"two");
        assert_eq!(StdFs.read_dir(dir.path()).unwrap().len(), 2);
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
