//! [`SimFs`]: an in-memory file system that simulates power loss.
//!
//! It tracks, per file, the data as of its last sync and, per directory, the entries as of its
//! last sync (the model of ALICE and of LevelDB/RocksDB's fault-injection environments: after a
//! power loss, anything not synced may be gone). A *persistence point* is a data sync
//! (`create_file`/`replace_file` with `sync`) or a `sync_dir`.
//!
//! - [`SimFs::crash_after`]`(k)`: the first `k` persistence points succeed; the next one fails
//!   and the machine is dead: every later operation fails with EIO.
//! - [`SimFs::recover`]: the state a reboot would find, as a **new** `SimFs` (the old one stays
//!   dead, so background tasks of the crashed process cannot write into the recovered disk):
//!   [`CrashMode::DropUnsynced`] keeps exactly what was synced; [`CrashMode::Random`] keeps a
//!   random subset of the unsynced directory changes and a random prefix of unsynced file data
//!   (torn writes), like a file system that wrote some of its dirty state before dying.
//!
//! Used by the reliability suite (`tests/power_loss.rs`) through [`crate::Store::on_fs`].
//! Compiled only with the `testing` feature: production builds do not carry it.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Component, Path};
use std::sync::Mutex;
use std::time::SystemTime;

use super::fs::{FileInfo, Fs};
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
}

#[derive(Debug, Clone)]
struct State {
    dirs: HashMap<u64, Dir>,
    files: HashMap<u64, File>,
    next_id: u64,
    points: u64,
    crash_after: Option<u64>,
    dead: bool,
}

const ROOT: u64 = 0;

/// See the module docs.
#[derive(Debug)]
pub struct SimFs {
    state: Mutex<State>,
}

impl Default for SimFs {
    fn default() -> Self {
        let mut dirs = HashMap::new();
        dirs.insert(ROOT, Dir::default());
        SimFs {
            state: Mutex::new(State {
                dirs,
                files: HashMap::new(),
                next_id: 1,
                points: 0,
                crash_after: None,
                dead: false,
            }),
        }
    }
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
    /// is durable only after a `sync_dir` of `dir`.
    fn link(&mut self, dir: u64, name: String, node: Node) {
        self.dirs
            .get_mut(&dir)
            .expect("parent")
            .entries
            .insert(name, node);
    }

    fn new_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn new_file(&mut self, data: &[u8], sync: bool) -> io::Result<u64> {
        if sync {
            self.persistence_point()?;
        }
        let id = self.new_id();
        self.files.insert(
            id,
            File {
                data: data.to_vec(),
                synced: sync.then(|| data.to_vec()),
            },
        );
        Ok(id)
    }
}

impl SimFs {
    /// An empty file system with only `/`.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
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
        let mut rng = SplitMix64::new(match mode {
            CrashMode::DropUnsynced => 0,
            CrashMode::Random(seed) => seed,
        });
        let random = matches!(mode, CrashMode::Random(_));
        let mut ids: Vec<u64> = state.dirs.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let dir = state.dirs.get_mut(&id).expect("listed");
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
                let pick = if now == then || !random || !coin(&mut rng) {
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
        let mut ids: Vec<u64> = state.files.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let f = state.files.get_mut(&id).expect("listed");
            let data = match &f.synced {
                Some(d) if *d == f.data => d.clone(),
                Some(d) if !random || coin(&mut rng) => d.clone(),
                None if !random => Vec::new(),
                _ => {
                    let cut = (rng.next_u64() % (f.data.len() as u64 + 1)) as usize;
                    f.data[..cut].to_vec()
                }
            };
            f.data = data.clone();
            f.synced = Some(data);
        }
        state.points = 0;
        state.crash_after = None;
        state.dead = false;
        SimFs {
            state: Mutex::new(state),
        }
    }
}

impl Fs for SimFs {
    fn create_file(&self, path: &Path, data: &[u8], sync: bool) -> io::Result<()> {
        let mut s = self.lock();
        s.check_alive()?;
        let (dir, name) = s.vacant(path)?;
        let id = s.new_file(data, sync)?;
        s.link(dir, name, Node::File(id));
        Ok(())
    }

    fn replace_file(&self, path: &Path, data: &[u8], sync: bool) -> io::Result<()> {
        let mut s = self.lock();
        s.check_alive()?;
        let (dir, name) = s.parent_of(path)?;
        if let Some(Node::Dir(_)) = s.dirs[&dir].entries.get(&name) {
            return Err(is_a_directory(path));
        }
        let id = s.new_file(data, sync)?;
        s.link(dir, name, Node::File(id));
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

    #[test]
    fn an_entry_synced_without_its_data_holds_no_data() {
        let fs = SimFs::new();
        fs.create_file(p("/f"), b"abc", false).unwrap();
        fs.sync_dir(p("/")).unwrap();
        let after = fs.recover(CrashMode::DropUnsynced);
        assert_eq!(after.read(p("/f")).unwrap(), b"");
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
