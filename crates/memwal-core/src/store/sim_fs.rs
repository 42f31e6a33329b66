//! [`SimFs`]: an in-memory file system that simulates power loss.
//!
//! It tracks, per file, the data as of its last sync and, per directory, the entries as of its
//! last sync (the model of ALICE and of LevelDB/RocksDB's fault-injection environments: after a
//! power loss, anything not synced may be gone). A *persistence point* is a data sync
//! (`create_file`/`replace_file`/`stage` with `sync`), a `sync_file` or a `sync_dir`.
//!
//! # The file system it models: ext4 without a journal
//! Each file is an inode with a link count, whose on-disk copy is written only by a sync of
//! that file: a data sync (`fdatasync` of new data writes the inode as it is then) or
//! `sync_file` (`fsync`). A `sync_dir` writes the directory's entries and **not** the inodes
//! they name (with a journal the two would commit together; without one they do not). A file
//! is staged unnamed, as with `O_TMPFILE`: its data sync records a link count of 0. After a
//! power loss, an inode whose on-disk link count is 0 is freed by the orphan cleanup at
//! mount, and every entry naming it is dropped (what `e2fsck` does with an entry naming a
//! freed inode). So a name published by link and `sync_dir` alone does not survive; a
//! `sync_file` after the link makes it.
//!
//! - [`SimFs::crash_after`]`(k)`: the first `k` persistence points succeed; the next one fails
//!   and the machine is dead: every later operation fails with EIO.
//! - [`SimFs::fail_next_file_syncs`]`(n)`: the next `n` file syncs fail with EIO and write
//!   nothing, while the machine stays up (a writer that sees it stops; the next one opens on
//!   the same disk).
//!
//! Files written in place ([`Fs::open_file`], the segment log) keep their length; after a
//! power loss with [`CrashMode::Random`], each 512-byte sector written since the file's last
//! sync is as it was or as it is, by a coin each: a disk writes back sectors in any order.
//! [`Fs::allocate`] syncs the new file's data and inode; [`Fs::rename_noreplace`] moves a name,
//! durable once its folder is synced.
//! - [`SimFs::recover`]: the state a reboot would find, as a **new** `SimFs` (the old one stays
//!   dead, so background tasks of the crashed process cannot write into the recovered disk):
//!   [`CrashMode::DropUnsynced`] keeps exactly what was synced; [`CrashMode::Random`] keeps a
//!   random subset of the unsynced directory changes and a random prefix of unsynced file data
//!   (torn writes), like a file system that wrote some of its dirty state before dying.
//!
//! Used by the reliability suite (`tests/power_loss.rs`) through [`crate::Store::on_fs`].
//! Compiled only with the `testing` feature: production builds do not carry it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::fs::{FileHandle, FileInfo, Fs, Staged};
use super::splitmix64::SplitMix64;

/// What survives a simulated power loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// Exactly what was synced.
    DropUnsynced,
    /// What was synced, plus a random (seeded) part of what was not.
    Random(u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    File(u64),
    Dir(u64),
}

#[derive(Debug, Clone, Default)]
struct Dir {
    entries: BTreeMap<String, Node>,
    synced: BTreeMap<String, Node>,
}

#[derive(Debug, Clone)]
struct File {
    data: Vec<u8>,
    /// Data as of the last sync; `None` if never synced.
    synced: Option<Vec<u8>>,
    /// Directory entries naming it.
    links: u32,
    /// The link count of its on-disk inode, as of its last sync (0 if never synced).
    synced_links: u32,
}

#[derive(Debug, Clone)]
struct State {
    dirs: HashMap<u64, Dir>,
    files: HashMap<u64, File>,
    next_id: u64,
    points: u64,
    crash_after: Option<u64>,
    dead: bool,
    /// `sync_file` calls still to fail with EIO (the machine stays up).
    failing_file_syncs: u64,
}

const ROOT: u64 = 0;

/// See the module docs.
#[derive(Debug)]
pub struct SimFs {
    // Shared with the handles of files opened for writes in place, which outlive a borrow.
    state: Arc<Mutex<State>>,
}

impl Default for SimFs {
    fn default() -> Self {
        let mut dirs = HashMap::new();
        dirs.insert(ROOT, Dir::default());
        SimFs {
            state: Arc::new(Mutex::new(State {
                dirs,
                files: HashMap::new(),
                next_id: 1,
                points: 0,
                crash_after: None,
                dead: false,
                failing_file_syncs: 0,
            })),
        }
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

fn eio(what: &str) -> io::Error {
    io::Error::other(format!("simulated power loss: {what}"))
}

fn not_found(p: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} not found", p.display()),
    )
}

fn not_a_directory(p: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotADirectory,
        format!("{} is not a directory", p.display()),
    )
}

fn is_a_directory(p: &Path) -> io::Error {
    io::Error::other(format!("{} is a directory", p.display()))
}

/// A fair coin from `rng`.
fn coin(rng: &mut SplitMix64) -> bool {
    rng.next_u64() & 1 == 1
}

impl State {
    fn check_alive(&self) -> io::Result<()> {
        if self.dead {
            Err(eio("the machine is down"))
        } else {
            Ok(())
        }
    }

    /// Counts one persistence point; fails (and kills the machine) past the crash point.
    fn persistence_point(&mut self) -> io::Result<()> {
        self.check_alive()?;
        if let Some(k) = self.crash_after
            && self.points >= k
        {
            self.dead = true;
            return Err(eio("power lost during a sync"));
        }
        self.points += 1;
        Ok(())
    }

    fn components(path: &Path) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for c in path.components() {
            match c {
                Component::RootDir => {}
                Component::Normal(n) => out.push(n.to_string_lossy().into_owned()),
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("unsupported path {}", path.display()),
                    ));
                }
            }
        }
        Ok(out)
    }

    fn lookup(&self, path: &Path) -> io::Result<Option<Node>> {
        let mut node = Node::Dir(ROOT);
        for name in Self::components(path)? {
            let Node::Dir(d) = node else {
                return Err(not_a_directory(path));
            };
            match self.dirs[&d].entries.get(&name) {
                Some(n) => node = *n,
                None => return Ok(None),
            }
        }
        Ok(Some(node))
    }

    /// The parent directory id and the final name of `path`.
    fn parent_of(&self, path: &Path) -> io::Result<(u64, String)> {
        let name = path
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?
            .to_string_lossy()
            .into_owned();
        let parent = path.parent().unwrap_or(Path::new("/"));
        match self.lookup(parent)? {
            Some(Node::Dir(d)) => Ok((d, name)),
            Some(Node::File(_)) => Err(not_a_directory(parent)),
            None => Err(not_found(parent)),
        }
    }

    /// The parent directory id and the final name of `path`, which must not exist yet
    /// (`AlreadyExists`).
    fn vacant(&self, path: &Path) -> io::Result<(u64, String)> {
        let (dir, name) = self.parent_of(path)?;
        if self.dirs[&dir].entries.contains_key(&name) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists", path.display()),
            ));
        }
        Ok((dir, name))
    }

    /// Names `node` `name` in directory `dir`, replacing any entry of that name. The entry
    /// is durable only after a `sync_dir` of `dir`; the file's new link count only after a
    /// sync of the file.
    fn link(&mut self, dir: u64, name: String, node: Node) {
        if let Node::File(f) = node {
            self.files.get_mut(&f).expect("linked file").links += 1;
        }
        let old = self
            .dirs
            .get_mut(&dir)
            .expect("parent")
            .entries
            .insert(name, node);
        if let Some(Node::File(f)) = old {
            let f = self.files.get_mut(&f).expect("replaced file");
            f.links = f.links.saturating_sub(1);
        }
    }

    /// Writes file `id`'s data and inode (its link count) to disk.
    fn sync_inode(&mut self, id: u64) {
        let f = self.files.get_mut(&id).expect("synced file");
        f.synced = Some(f.data.clone());
        f.synced_links = f.links;
    }

    fn new_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// A file holding `data`, unnamed (link count 0).
    fn new_file(&mut self, data: &[u8]) -> u64 {
        let id = self.new_id();
        self.files.insert(
            id,
            File {
                data: data.to_vec(),
                synced: None,
                links: 0,
                synced_links: 0,
            },
        );
        id
    }

    /// A file holding `data` created as `name` in `dir` (`open(O_CREAT)`, write, and with
    /// `sync` a data sync, which writes the inode with its link count of 1).
    fn new_named_file(
        &mut self,
        dir: u64,
        name: String,
        data: &[u8],
        sync: bool,
    ) -> io::Result<()> {
        let id = self.new_file(data);
        self.link(dir, name, Node::File(id));
        if sync {
            self.persistence_point()?;
            self.sync_inode(id);
        }
        Ok(())
    }
}

impl SimFs {
    /// An empty file system with only `/`.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Persistence points passed so far.
    pub fn persistence_points(&self) -> u64 {
        self.lock().points
    }

    /// Let `k` more persistence points succeed (counting from now), then lose power.
    pub fn crash_after(&self, k: u64) {
        let mut s = self.lock();
        s.crash_after = Some(s.points + k);
    }

    /// Makes the next `n` file syncs ([`Fs::sync_file`], and a handle's `sync_data`) fail with
    /// EIO and write nothing, as an
    /// `fsync` whose inode writeback failed: the machine stays up, the file stays named, and
    /// its on-disk inode is as it was (after a link, a link count of 0).
    pub fn fail_next_file_syncs(&self, n: u64) {
        self.lock().failing_file_syncs = n;
    }

    /// Loses power now: every later operation fails.
    pub fn crash_now(&self) {
        self.lock().dead = true;
    }

    /// Whether the machine is down.
    pub fn is_dead(&self) -> bool {
        self.lock().dead
    }

    /// What a reboot finds, as a new file system (this one stays down). See the module docs.
    pub fn recover(&self, mode: CrashMode) -> SimFs {
        let mut s = self.lock();
        s.dead = true;
        let mut state = s.clone();
        drop(s);
        // Seeded, so that a crash state is reproducible.
        let mut luck = Luck {
            rng: SplitMix64::new(match mode {
                CrashMode::DropUnsynced => 0,
                CrashMode::Random(seed) => seed,
            }),
            random: matches!(mode, CrashMode::Random(_)),
        };
        // Directories first, then files: the draws come in that order, so a seed always
        // recovers the same state.
        state.recover_dirs(&mut luck);
        let freed = state.recover_files(&mut luck);
        state.mount(&freed);
        SimFs {
            state: Arc::new(Mutex::new(state)),
        }
    }
}

/// A file written in place (`synced` on disk, `now` in memory, of one length) after a power
/// loss: each 512-byte sector as it was or as it is, by a coin each.
fn torn_in_place(synced: &[u8], now: &[u8], rng: &mut SplitMix64) -> Vec<u8> {
    const SECTOR: usize = 512;
    let mut out = synced.to_vec();
    for start in (0..now.len()).step_by(SECTOR) {
        let end = (start + SECTOR).min(now.len());
        if out[start..end] != now[start..end] && coin(rng) {
            out[start..end].copy_from_slice(&now[start..end]);
        }
    }
    out
}

/// What decides, at a recovery, whether an unsynced change reached the disk.
struct Luck {
    rng: SplitMix64,
    /// [`CrashMode::Random`]: some unsynced changes survive. Otherwise none does.
    random: bool,
}

impl State {
    /// Each directory's entries as the disk holds them after the power loss: the synced ones,
    /// and with [`CrashMode::Random`], for each name changed since, a coin's choice of the new
    /// entry or the old.
    fn recover_dirs(&mut self, luck: &mut Luck) {
        let mut ids: Vec<u64> = self.dirs.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let dir = self.dirs.get_mut(&id).expect("listed");
            let mut names: Vec<String> = dir
                .entries
                .keys()
                .chain(dir.synced.keys())
                .cloned()
                .collect();
            names.sort();
            names.dedup();
            let mut kept = BTreeMap::new();
            for name in names {
                let now = dir.entries.get(&name).copied();
                let then = dir.synced.get(&name).copied();
                let pick = if now == then || !luck.random || !coin(&mut luck.rng) {
                    then
                } else {
                    now
                };
                if let Some(n) = pick {
                    kept.insert(name, n);
                }
            }
            dir.entries = kept.clone();
            dir.synced = kept;
        }
    }

    /// Each file's data and link count as the disk holds them after the power loss (with
    /// [`CrashMode::Random`], unsynced data may survive as a prefix, a torn write, and an
    /// unsynced inode may have been written back); the files whose link count is then 0.
    fn recover_files(&mut self, luck: &mut Luck) -> HashSet<u64> {
        let random = luck.random;
        let rng = &mut luck.rng;
        let mut ids: Vec<u64> = self.files.keys().copied().collect();
        ids.sort_unstable();
        let mut orphans = HashSet::new();
        for id in ids {
            let f = self.files.get_mut(&id).expect("listed");
            let data = match &f.synced {
                Some(d) if *d == f.data => d.clone(),
                Some(d) if !random || coin(rng) => d.clone(),
                // Written in place, not grown: each sector may have reached the disk or not.
                Some(d) if d.len() == f.data.len() => torn_in_place(d, &f.data, rng),
                None if !random => Vec::new(),
                _ => {
                    let cut = (rng.next_u64() % (f.data.len() as u64 + 1)) as usize;
                    f.data[..cut].to_vec()
                }
            };
            f.data = data.clone();
            f.synced = Some(data);
            // The kernel may have written an unsynced inode back on its own.
            let links = if f.links != f.synced_links && random && coin(rng) {
                f.links
            } else {
                f.synced_links
            };
            if links == 0 {
                orphans.insert(id);
            }
        }
        orphans
    }

    /// The mount after the reboot: the orphan cleanup frees the `orphans` (module docs), what
    /// `e2fsck` would do with the entries and link counts follows, and the machine is up with
    /// no fault armed.
    fn mount(&mut self, orphans: &HashSet<u64>) {
        for id in orphans {
            self.files.remove(id);
        }
        for dir in self.dirs.values_mut() {
            dir.entries
                .retain(|_, n| !matches!(n, Node::File(f) if orphans.contains(f)));
            dir.synced = dir.entries.clone();
        }
        let mut counts: HashMap<u64, u32> = HashMap::new();
        for dir in self.dirs.values() {
            for n in dir.entries.values() {
                if let Node::File(f) = n {
                    *counts.entry(*f).or_default() += 1;
                }
            }
        }
        for (id, f) in self.files.iter_mut() {
            // e2fsck sets each link count to the entries found.
            f.links = counts.get(id).copied().unwrap_or(0);
            f.synced_links = f.links;
        }
        self.points = 0;
        self.crash_after = None;
        self.dead = false;
        self.failing_file_syncs = 0;
    }
}

/// A file of a [`SimFs`] opened for writes in place: it follows the inode, as a file
/// descriptor does, whatever its names become.
#[derive(Debug)]
struct SimFile {
    state: Arc<Mutex<State>>,
    id: u64,
}

impl FileHandle for SimFile {
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut s = lock(&self.state);
        s.check_alive()?;
        let f = s
            .files
            .get_mut(&self.id)
            .ok_or_else(|| eio("the file is gone"))?;
        let end = offset as usize + data.len();
        if f.data.len() < end {
            f.data.resize(end, 0);
        }
        f.data[offset as usize..end].copy_from_slice(data);
        Ok(())
    }

    fn read_at(&self, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        let s = lock(&self.state);
        s.check_alive()?;
        let f = s
            .files
            .get(&self.id)
            .ok_or_else(|| eio("the file is gone"))?;
        let start = (offset as usize).min(f.data.len());
        let end = start.saturating_add(len).min(f.data.len());
        Ok(f.data[start..end].to_vec())
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut s = lock(&self.state);
        s.check_alive()?;
        if s.failing_file_syncs > 0 {
            s.failing_file_syncs -= 1;
            return Err(eio("injected file sync failure"));
        }
        s.persistence_point()?;
        let f = s
            .files
            .get_mut(&self.id)
            .ok_or_else(|| eio("the file is gone"))?;
        // `fdatasync`: the data, not the link count (nothing here changes it).
        f.synced = Some(f.data.clone());
        Ok(())
    }
}

impl Fs for SimFs {
    fn create_file(&self, path: &Path, data: &[u8], sync: bool) -> io::Result<()> {
        let mut s = self.lock();
        s.check_alive()?;
        let (dir, name) = s.vacant(path)?;
        s.new_named_file(dir, name, data, sync)
    }

    /// An unnamed file (`O_TMPFILE`), its data synced with `sync` while its link count is 0.
    fn stage(&self, dir: &Path, data: &[u8], sync: bool) -> io::Result<Staged> {
        let mut s = self.lock();
        s.check_alive()?;
        match s.lookup(dir)? {
            Some(Node::Dir(_)) => {}
            Some(Node::File(_)) => return Err(not_a_directory(dir)),
            None => return Err(not_found(dir)),
        }
        let id = s.new_file(data);
        if sync {
            s.persistence_point()?;
            s.sync_inode(id);
        }
        Ok(Staged::sim(dir, id))
    }

    /// Links the staged file at the first free name (`linkat`): its link count rises in
    /// memory only.
    fn publish_first_free(&self, staged: &Staged, paths: &[PathBuf]) -> io::Result<usize> {
        let (dir, id) = staged.sim_parts();
        let Some(id) = id else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the power-loss simulator publishes only files it staged",
            ));
        };
        let mut s = self.lock();
        s.check_alive()?;
        if !s.files.contains_key(&id) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the staged file belongs to another simulated disk",
            ));
        }
        for (i, path) in paths.iter().enumerate() {
            if path.parent() != Some(dir) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("publishing a file staged in {} elsewhere", dir.display()),
                ));
            }
            match s.vacant(path) {
                Ok((d, name)) => {
                    s.link(d, name, Node::File(id));
                    return Ok(i);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "every name to publish at exists",
        ))
    }

    fn replace_file(&self, path: &Path, data: &[u8], sync: bool) -> io::Result<()> {
        let mut s = self.lock();
        s.check_alive()?;
        let (dir, name) = s.parent_of(path)?;
        if let Some(Node::Dir(_)) = s.dirs[&dir].entries.get(&name) {
            return Err(is_a_directory(path));
        }
        s.new_named_file(dir, name, data, sync)
    }

    fn sync_file(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        s.check_alive()?;
        let id = match s.lookup(path)? {
            Some(Node::File(f)) => f,
            Some(Node::Dir(_)) => return Err(is_a_directory(path)),
            None => return Err(not_found(path)),
        };
        if s.failing_file_syncs > 0 {
            s.failing_file_syncs -= 1;
            return Err(eio("injected file sync failure"));
        }
        s.persistence_point()?;
        s.sync_inode(id);
        Ok(())
    }

    fn create_dir(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        s.check_alive()?;
        let (dir, name) = s.vacant(path)?;
        let id = s.new_id();
        s.dirs.insert(id, Dir::default());
        s.link(dir, name, Node::Dir(id));
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        s.check_alive()?;
        let Some(Node::Dir(d)) = s.lookup(path)? else {
            return Err(not_found(path));
        };
        s.persistence_point()?;
        let dir = s.dirs.get_mut(&d).expect("looked up");
        dir.synced = dir.entries.clone();
        Ok(())
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let s = self.lock();
        s.check_alive()?;
        match s.lookup(path)? {
            Some(Node::File(f)) => Ok(s.files[&f].data.clone()),
            Some(Node::Dir(_)) => Err(is_a_directory(path)),
            None => Err(not_found(path)),
        }
    }

    fn stat(&self, path: &Path) -> io::Result<FileInfo> {
        let s = self.lock();
        s.check_alive()?;
        match s.lookup(path)? {
            Some(Node::File(f)) => Ok(FileInfo {
                len: s.files[&f].data.len() as u64,
                is_dir: false,
                modified: SystemTime::UNIX_EPOCH,
            }),
            Some(Node::Dir(_)) => Ok(FileInfo {
                len: 0,
                is_dir: true,
                modified: SystemTime::UNIX_EPOCH,
            }),
            None => Err(not_found(path)),
        }
    }

    /// Unlinks the name now; the directory's synced entries keep it until its next sync, so
    /// a power loss before that brings it back.
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        s.check_alive()?;
        let (dir, name) = s.parent_of(path)?;
        match s.dirs[&dir].entries.get(&name).copied() {
            Some(Node::File(f)) => {
                s.dirs.get_mut(&dir).expect("parent").entries.remove(&name);
                let file = s.files.get_mut(&f).expect("linked file");
                file.links = file.links.saturating_sub(1);
                Ok(())
            }
            Some(Node::Dir(_)) => Err(is_a_directory(path)),
            None => Err(not_found(path)),
        }
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        s.check_alive()?;
        let (dir, name) = s.parent_of(path)?;
        match s.dirs[&dir].entries.get(&name).copied() {
            Some(Node::Dir(d)) if s.dirs[&d].entries.is_empty() => {
                s.dirs.get_mut(&dir).expect("parent").entries.remove(&name);
                Ok(())
            }
            Some(Node::Dir(_)) => Err(io::Error::new(
                io::ErrorKind::DirectoryNotEmpty,
                format!("{} is not empty", path.display()),
            )),
            Some(Node::File(_)) => Err(not_a_directory(path)),
            None => Err(not_found(path)),
        }
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<(String, bool)>> {
        let s = self.lock();
        s.check_alive()?;
        match s.lookup(path)? {
            Some(Node::Dir(d)) => Ok(s.dirs[&d]
                .entries
                .iter()
                .map(|(n, node)| (n.clone(), matches!(node, Node::Dir(_))))
                .collect()),
            Some(Node::File(_)) => Err(not_a_directory(path)),
            None => Err(not_found(path)),
        }
    }

    fn allocate(&self, path: &Path, len: u64) -> io::Result<()> {
        let mut s = self.lock();
        s.check_alive()?;
        let (dir, name) = s.vacant(path)?;
        let id = s.new_file(&vec![0u8; len as usize]);
        s.link(dir, name, Node::File(id));
        // Its data and inode synced, as `fsync` after writing the zeros does.
        s.persistence_point()?;
        s.sync_inode(id);
        Ok(())
    }

    fn open_file(&self, path: &Path) -> io::Result<Box<dyn FileHandle>> {
        let s = self.lock();
        s.check_alive()?;
        match s.lookup(path)? {
            Some(Node::File(id)) => Ok(Box::new(SimFile {
                state: self.state.clone(),
                id,
            })),
            Some(Node::Dir(_)) => Err(is_a_directory(path)),
            None => Err(not_found(path)),
        }
    }

    fn rename_noreplace(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.lock();
        s.check_alive()?;
        let (from_dir, from_name) = s.parent_of(from)?;
        let Some(node) = s.dirs[&from_dir].entries.get(&from_name).copied() else {
            return Err(not_found(from));
        };
        let (to_dir, to_name) = s.vacant(to)?;
        s.dirs
            .get_mut(&from_dir)
            .expect("parent")
            .entries
            .remove(&from_name);
        // Moved, not linked again: the link count stays as it is.
        s.dirs
            .get_mut(&to_dir)
            .expect("parent")
            .entries
            .insert(to_name, node);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> &Path {
        Path::new(s)
    }

    #[test]
    fn unsynced_entries_and_data_are_lost() {
        let fs = SimFs::new();
        fs.create_dir(p("/d")).unwrap();
        fs.sync_dir(p("/")).unwrap();
        fs.create_file(p("/d/synced"), b"one", true).unwrap();
        fs.sync_dir(p("/d")).unwrap();
        fs.create_file(p("/d/data-only"), b"two", true).unwrap();
        fs.create_file(p("/d/nothing"), b"three", false).unwrap();
        let after = fs.recover(CrashMode::DropUnsynced);
        assert_eq!(after.read(p("/d/synced")).unwrap(), b"one");
        assert!(!after.exists(p("/d/data-only")).unwrap());
        assert!(!after.exists(p("/d/nothing")).unwrap());
        assert!(
            fs.read(p("/d/synced")).is_err(),
            "the crashed machine stays down"
        );
    }

    /// Without a journal, the inode of a file never synced is not on disk: the orphan
    /// cleanup and `e2fsck` drop the synced entry naming it.
    #[test]
    fn an_entry_synced_without_its_inode_is_dropped() {
        let fs = SimFs::new();
        fs.create_file(p("/f"), b"abc", false).unwrap();
        fs.sync_dir(p("/")).unwrap();
        let after = fs.recover(CrashMode::DropUnsynced);
        assert!(!after.exists(p("/f")).unwrap());
    }

    #[test]
    fn crash_after_k_points_kills_the_machine() {
        let fs = SimFs::new();
        fs.crash_after(1);
        fs.create_file(p("/a"), b"a", true).unwrap();
        assert!(fs.sync_dir(p("/")).is_err());
        assert!(fs.is_dead());
        assert!(fs.create_file(p("/b"), b"b", false).is_err());
        assert_eq!(fs.persistence_points(), 1);
    }

    #[test]
    fn random_recovery_is_reproducible_and_never_invents_data() {
        let build = || {
            let fs = SimFs::new();
            for i in 0..20 {
                fs.create_file(Path::new(&format!("/f{i}")), &[i as u8; 64], i % 2 == 0)
                    .unwrap();
            }
            fs
        };
        let a = build().recover(CrashMode::Random(7));
        let b = build().recover(CrashMode::Random(7));
        assert_eq!(a.read_dir(p("/")).unwrap(), b.read_dir(p("/")).unwrap());
        for (name, _) in a.read_dir(p("/")).unwrap() {
            let data = a.read(&Path::new("/").join(&name)).unwrap();
            let i: u8 = name[1..].parse().unwrap();
            assert!(data.iter().all(|&x| x == i) && data.len() <= 64);
        }
    }
}

#[cfg(test)]
mod no_journal_tests {
    use super::*;

    fn p(s: &str) -> &Path {
        Path::new(s)
    }

    #[test]
    fn a_linked_file_survives_only_once_its_inode_is_synced() {
        let fs = SimFs::new();
        let linked = |sync_inode: bool| {
            let staged = fs.stage(p("/"), b"data", true).unwrap();
            let name = if sync_inode { "/synced" } else { "/unsynced" };
            fs.publish_first_free(&staged, &[PathBuf::from(name)])
                .unwrap();
            if sync_inode {
                fs.sync_file(p(name)).unwrap();
            }
        };
        linked(false);
        linked(true);
        fs.sync_dir(p("/")).unwrap();
        let after = fs.recover(CrashMode::DropUnsynced);
        assert_eq!(after.read(p("/synced")).unwrap(), b"data");
        assert!(!after.exists(p("/unsynced")).unwrap());
    }
}
