//! Garbage collection: removes what a shard no longer needs, without weakening fencing.
//!
//! [`collect`] reads the latest manifest and removes, oldest first:
//! 1. **WAL entries at or below the low-water mark** (`ShardManifest::wal_low_water`), whose
//!    rows are all in committed generations: every generation commit raises the mark to its
//!    replay cursor. Fence sentinels and the entry just before each are kept (below). On a
//!    shard of the segment layout, the segments whose every position is at or below the mark
//!    instead, recycled as spares or removed ([`crate::wal::segments::collect`], which argues
//!    why no reader, claimant or stale writer misses one).
//! 2. **Manifest versions** older than the newest [`GcOptions::keep_manifest_versions`].
//! 3. **Generation folders the manifest does not list**, for a generation number the manifest
//!    has already passed, once their newest file is older than [`GcOptions::grace`]: flushes
//!    that lost to a committed generation, and generations that compaction replaced (the grace
//!    period lets a reader holding an older manifest finish reading them).
//!
//! The writer runs it in the background (its `gc` option); anyone may run it at any time
//! (`memwal gc`): it writes nothing, and removes only what a committed manifest allows.
//!
//! # Fencing with collection
//! (Argued with claims, commits and reads together in `docs/fencing.md`.)
//! A slot is written once, ever, by put-if-not-exists: that is what fences a stale writer
//! (see [`crate::wal::appender`]). Removing an entry makes its slot writable again, so
//! collection must never free a slot that a writer could still write *and be acknowledged*:
//!
//! - **A stale writer's next slot is a fence sentinel, kept forever.** A writer of epoch `e`
//!   appends in order, and its successor's sentinel takes the first free slot, so the writer's
//!   next slot is that sentinel's; it never gets past it. Were the sentinel removed, its put
//!   there would succeed, and rows below the successor's cursor are never replayed: an
//!   acknowledged loss. So no sentinel is ever collected, and neither is the entry just
//!   before one, which is where such a writer retries an append whose response it lost.
//! - **Nobody writes at or below the low-water mark.** A live writer appends at the tip,
//!   above its cursor. An opening writer places its sentinel above its claimed manifest's
//!   mark ([`crate::wal::discover_tip`] never answers at or below it), and after the sentinel
//!   is durable checks that no version follows its claim: only a later claim could have raised
//!   the mark and collected the slot the sentinel took (`writer::open`).
//! - **The mark comes from a committed manifest and never moves down**, so anything ever
//!   removed is at or below the mark of every later manifest.
//! - **Old manifest versions are removed below the newest kept ones**, so the highest version
//!   number never goes down. A stalled writer or claimant may still create a number collection
//!   freed; the latest is the highest listed and every create is confirmed by a listing, so
//!   such a version is never taken for the latest and its creator is fenced
//!   ([`crate::manifest::ManifestStore`]).
//! - **An unlisted generation folder is removed only below `current_generation`**: a flush in
//!   progress has a generation number at or above it, and so does a compaction in progress
//!   (its folder takes `current_generation`'s number, which cannot move until it commits:
//!   see [`crate::flush::compaction`]). So only folders of flushes that lost to a committed
//!   generation of the same number (a fenced or crashed writer's), abandoned compactions and
//!   replaced generations qualify. A fenced writer's commit fails on its epoch.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use crate::error::{Error, Result};
use crate::manifest::{ManifestStore, ShardManifest};
use crate::shard::ShardRef;
use crate::store::call::Actor;
use crate::store::faults::as_actor;
use crate::store::{ShardPaths, Store, parse_bitrev64_name};
use crate::wal::segments::{self, log::DEFAULT_SEGMENT_BYTES};
use crate::wal::{self, WalLayout, entry};

pub use crate::config::MIN_KEEP_MANIFEST_VERSIONS;

/// What [`collect`] may remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcOptions {
    /// Manifest versions to keep, newest first (at least [`MIN_KEEP_MANIFEST_VERSIONS`]).
    pub keep_manifest_versions: u64,
    /// How old the newest file of an unlisted generation folder must be before the folder is
    /// removed.
    pub grace: Duration,
    /// Report what would be removed, and remove nothing.
    pub dry_run: bool,
}

impl Default for GcOptions {
    fn default() -> Self {
        GcOptions {
            keep_manifest_versions: 10,
            grace: Duration::from_secs(600),
            dry_run: false,
        }
    }
}

/// What one [`collect`] removed (or, in a dry run, would remove).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcReport {
    /// The manifest version collection read.
    pub manifest_version: u64,
    /// Its WAL low-water mark: entries at or below it may be removed.
    pub low_water: u64,
    /// WAL entries removed (on the segment layout: the positions the segments removed held).
    pub wal_entries_removed: u64,
    /// WAL entries at or below the mark that are kept to fence stale writers (sentinels and
    /// the entry before each), or could not be read to tell. Always 0 on the segment layout.
    pub wal_entries_kept: u64,
    /// WAL segments taken out of the log (segment layout): recycled as spares for the
    /// writer's next segments, or removed.
    pub wal_segments_removed: u64,
    /// Manifest versions removed.
    pub manifest_versions_removed: u64,
    /// Unlisted generation folders removed, by name.
    pub generation_dirs_removed: Vec<String>,
    /// Unlisted generation folders kept (too recent, or of a flush that may be in progress).
    pub generation_dirs_kept: Vec<String>,
    /// Bytes of the objects removed (a segment recycled as a spare keeps its bytes).
    pub bytes_removed: u64,
    /// True if nothing was removed on purpose.
    pub dry_run: bool,
}

/// Collects garbage in `shard` of `store`. See the module docs.
///
/// # Errors
/// `InvalidArgument` for options out of range or a shard with no manifest; `Corrupt` naming
/// the manifest folder for a shard that lost its manifest but holds WAL entries or generation
/// folders (see [`ManifestStore::read_latest_of_existing`]); `Io`/`Timeout` if the store
/// fails (what was removed before stays removed, and a rerun continues).
pub async fn collect(
    store: &Store,
    shard: impl Into<ShardRef>,
    options: &GcOptions,
) -> Result<GcReport> {
    let shard = shard.into();
    as_actor(Actor::Gc, async {
        let paths = store.shard_paths(shard.id());
        let manifests = ManifestStore::new(store.clone(), paths.clone());
        let Some(manifest) = manifests.read_latest_of_existing().await? else {
            return Err(shard.not_found_at(store.location()));
        };
        collect_from(store, &paths, &manifest, options).await
    })
    .await
}

/// [`collect`] for the shard of `paths`, whose latest manifest is `manifest`: the three kinds
/// of removal, in the order of the module docs.
pub(crate) async fn collect_from(
    store: &Store,
    paths: &ShardPaths,
    manifest: &ShardManifest,
    options: &GcOptions,
) -> Result<GcReport> {
    if options.keep_manifest_versions < MIN_KEEP_MANIFEST_VERSIONS {
        return Err(Error::invalid(format!(
            "invalid option: keepManifestVersions must be at least {MIN_KEEP_MANIFEST_VERSIONS}, got {}",
            options.keep_manifest_versions
        )));
    }
    let collection = Collection {
        store,
        paths,
        manifest,
        options,
    };
    let mut report = GcReport {
        manifest_version: manifest.version,
        low_water: manifest.wal_low_water,
        dry_run: options.dry_run,
        ..GcReport::default()
    };
    match WalLayout::of(manifest) {
        WalLayout::Objects => collection.wal_entries(&mut report).await?,
        WalLayout::Segments => collection.wal_segments(&mut report).await?,
    }
    collection.manifest_versions(&mut report).await?;
    collection.generation_dirs(&mut report).await?;
    Ok(report)
}

/// One collection of one shard, as of its latest manifest. Each kind of removal is a method
/// that adds what it removed (or kept) to the [`GcReport`].
struct Collection<'a> {
    store: &'a Store,
    paths: &'a ShardPaths,
    manifest: &'a ShardManifest,
    options: &'a GcOptions,
}

impl Collection<'_> {
    /// Removes the object at `path`, unless this is a dry run.
    async fn remove(&self, path: object_store::path::Path) -> Result<()> {
        if self.options.dry_run {
            return Ok(());
        }
        self.store
            .delete(&path)
            .await
            .map_err(|e| Error::io(format!("removing {path}"), e))
    }

    /// Removal 1: WAL entries at or below the mark, but never a fence sentinel or the entry
    /// before one.
    async fn wal_entries(&self, report: &mut GcReport) -> Result<()> {
        let low_water = self.manifest.wal_low_water;
        let listing = self.store.list(&self.paths.wal_dir()).await.map_err(|e| {
            Error::io(
                format!("listing the WAL of shard {}", self.paths.shard_id()),
                e,
            )
        })?;
        // The slot just above the mark is looked at too: a sentinel there keeps the entry below.
        let mut below: Vec<(u64, u64)> = listing
            .iter()
            .filter_map(|m| {
                let p = m.location.filename().and_then(parse_bitrev64_name)?;
                (p <= low_water + 1).then_some((p, m.size))
            })
            .collect();
        below.sort_unstable();
        let keep = self.fencing_slots(&below).await?;
        for (p, size) in below {
            if p > low_water {
                continue;
            }
            if keep.contains(&p) {
                report.wal_entries_kept += 1;
                continue;
            }
            self.remove(self.paths.wal_entry(p)).await?;
            report.wal_entries_removed += 1;
            report.bytes_removed += size;
        }
        Ok(())
    }

    /// Removal 1 on the segment layout: segments wholly at or below the mark, recycled or
    /// removed, and leftovers of spares (on a blocking thread).
    async fn wal_segments(&self, report: &mut GcReport) -> Result<()> {
        let files = segments::files_of(self.store, self.paths, DEFAULT_SEGMENT_BYTES)?;
        let (low_water, grace, dry_run) = (
            self.manifest.wal_low_water,
            self.options.grace,
            self.options.dry_run,
        );
        let shard = self.paths.shard_id();
        let collected = tokio::task::spawn_blocking(move || {
            segments::collect::collect(&files, low_water, grace, dry_run)
        })
        .await
        .map_err(|e| Error::io_msg(format!("collecting the WAL segments of shard {shard}: {e}")))?
        .map_err(|e| Error::io(format!("collecting the WAL segments of shard {shard}"), e))?;
        report.wal_segments_removed += collected.segments;
        report.wal_entries_removed += collected.positions;
        report.bytes_removed += collected.bytes_removed;
        Ok(())
    }

    /// The positions among `below` (position, size; ascending) that must stay taken to fence
    /// stale writers: every sentinel, and the slot just before each (module docs).
    async fn fencing_slots(&self, below: &[(u64, u64)]) -> Result<BTreeSet<u64>> {
        let sentinel_max = entry::encode_sentinel(u64::MAX)?.len() as u64;
        let mut keep = BTreeSet::new();
        for &(p, size) in below {
            // Only a small entry can be a sentinel; reading the rest would cost their bytes.
            if size > sentinel_max {
                continue;
            }
            match wal::read_entry(self.store, self.paths, p).await {
                Ok(Some(e)) if !e.is_sentinel => {}
                Ok(None) => {}
                // A sentinel, or an entry that cannot be told apart from one: kept.
                _ => {
                    keep.insert(p);
                    keep.insert(p.saturating_sub(1));
                }
            }
        }
        Ok(keep)
    }

    /// Removal 2: manifest versions older than the newest `keep_manifest_versions`, oldest
    /// first.
    async fn manifest_versions(&self, report: &mut GcReport) -> Result<()> {
        let oldest_kept = self
            .manifest
            .version
            .saturating_sub(self.options.keep_manifest_versions - 1);
        let manifests = ManifestStore::new(self.store.clone(), self.paths.clone());
        let versions = manifests.listed().await?;
        let versions = versions.into_iter().filter(|(v, _)| *v < oldest_kept);
        for (v, size) in versions {
            self.remove(self.paths.manifest(v)).await?;
            report.manifest_versions_removed += 1;
            report.bytes_removed += size;
        }
        Ok(())
    }

    /// Removal 3: generation folders the manifest does not list, of generations it has
    /// passed, once past the grace period; in name order.
    async fn generation_dirs(&self, report: &mut GcReport) -> Result<()> {
        let now = SystemTime::now();
        let mut dirs = self.store.list_dirs(self.paths.shard_dir()).await?;
        dirs.sort();
        for dir in dirs {
            let Some(generation) = dir
                .split_once("_gen_")
                .and_then(|(_, g)| g.parse::<u64>().ok())
            else {
                continue;
            };
            if self
                .manifest
                .flushed_generations
                .iter()
                .any(|g| g.path == dir)
            {
                continue;
            }
            self.generation_dir(dir, generation, now, report).await?;
        }
        Ok(())
    }

    /// Removes the unlisted folder `dir` of `generation` with every file in it, unless a flush
    /// or compaction may still be writing it or a reader of an older manifest reading it.
    async fn generation_dir(
        &self,
        dir: String,
        generation: u64,
        now: SystemTime,
        report: &mut GcReport,
    ) -> Result<()> {
        let files = self
            .store
            .list(&self.paths.shard_dir().clone().join(dir.as_str()))
            .await
            .map_err(|e| Error::io(format!("listing generation folder {dir}"), e))?;
        // A folder with no file is one a store shows only while it lists (a local one).
        let Some(newest) = files
            .iter()
            .map(|m| SystemTime::from(m.last_modified))
            .max()
        else {
            return Ok(());
        };
        let old_enough = now.duration_since(newest).unwrap_or_default() >= self.options.grace;
        if generation >= self.manifest.current_generation || !old_enough {
            report.generation_dirs_kept.push(dir);
            return Ok(());
        }
        for f in files {
            self.remove(f.location).await?;
            report.bytes_removed += f.size;
        }
        report.generation_dirs_removed.push(dir);
        Ok(())
    }
}
