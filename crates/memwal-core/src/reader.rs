//! Read-only access to a shard: [`ShardReader`], [`WalTailer`], and the generation reading
//! that [`crate::ShardWriter::scan`] shares.
//!
//! Readers claim no epoch and never write anything: not a manifest, not a hint. A
//! `ShardReader` sees what a new writer would recover: the flushed generations listed in the
//! latest manifest, then every WAL entry after the replay cursor up to the first missing
//! position (fence sentinels skipped).

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{Schema, SchemaRef};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use uuid::Uuid;

use crate::error::{Error, ErrorCode, Result};
use crate::manifest::{FlushedGeneration, ManifestStore, ShardManifest};
use crate::shard::ShardRef;
use crate::store::call::Actor;
use crate::store::{ShardPaths, Store};
use crate::wal::{self, WalEntry, WalLayout, segments};

/// Rebuilds `batch` with exactly `schema` (same field names and types; nullability may be
/// looser in the batch if its data has no nulls where the schema forbids them). A batch that has
/// `schema` already is returned as it is.
pub(crate) fn conform(batch: RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    if Arc::ptr_eq(batch.schema_ref(), schema) {
        return Ok(batch);
    }
    RecordBatch::try_new(schema.clone(), batch.columns().to_vec()).map_err(|e| {
        Error::SchemaMismatch {
            message: format!("batch does not fit the shard schema: {e}"),
        }
    })
}

/// Reads one flushed generation's Parquet file, with the shard's `schema` if given.
///
/// # Errors
/// `Corrupt` if the file is missing (the manifest that lists it says it was written) or
/// damaged.
pub(crate) async fn read_generation(
    store: &Store,
    paths: &ShardPaths,
    generation: &FlushedGeneration,
    schema: Option<&SchemaRef>,
) -> Result<Vec<RecordBatch>> {
    read_generation_if_present(store, paths, generation, schema)
        .await?
        .ok_or_else(|| generation_missing(paths, generation))
}

/// The `Corrupt` error for a generation the manifest lists whose file is missing.
fn generation_missing(paths: &ShardPaths, generation: &FlushedGeneration) -> Error {
    Error::corrupt(
        paths.generation_file(&generation.path).as_ref(),
        format!(
            "generation {} is listed in the manifest but its file is missing",
            generation.generation
        ),
        None,
    )
}

/// The Arrow schema of one flushed generation's file (read whole: only an open of a shard
/// whose manifest records no schema asks, once).
///
/// # Errors
/// `Corrupt` if the file is missing or is not a Parquet file.
pub(crate) async fn generation_schema(
    store: &Store,
    paths: &ShardPaths,
    generation: &FlushedGeneration,
) -> Result<SchemaRef> {
    let bytes = generation_bytes_if_present(store, paths, generation)
        .await?
        .ok_or_else(|| generation_missing(paths, generation))?;
    ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map(|b| b.schema().clone())
        .map_err(|e| {
            Error::corrupt(
                paths.generation_file(&generation.path).as_ref(),
                format!(
                    "generation {} is not a readable Parquet file",
                    generation.generation
                ),
                Some(Arc::new(e)),
            )
        })
}

/// The bytes of one flushed generation's file, checked against the manifest's checksum;
/// `None` if the file is missing.
async fn generation_bytes_if_present(
    store: &Store,
    paths: &ShardPaths,
    generation: &FlushedGeneration,
) -> Result<Option<bytes::Bytes>> {
    let path = paths.generation_file(&generation.path);
    let Some(bytes) = store
        .get(&path)
        .await
        .map_err(|e| Error::io(format!("reading generation file {path}"), e))?
    else {
        return Ok(None);
    };
    if let Some(stored) = generation.checksum {
        let actual = crc32c::crc32c(&bytes);
        if actual != stored {
            return Err(Error::corrupt(
                path.as_ref(),
                format!(
                    "generation {} checksum mismatch (stored {stored:08x}, computed {actual:08x}); the file is damaged",
                    generation.generation
                ),
                None,
            ));
        }
    }
    Ok(Some(bytes))
}

/// [`read_generation`], `None` if the file is missing: for a reader holding a manifest that
/// may be old, whose generation compaction replaced and collection then removed.
async fn read_generation_if_present(
    store: &Store,
    paths: &ShardPaths,
    generation: &FlushedGeneration,
    schema: Option<&SchemaRef>,
) -> Result<Option<Vec<RecordBatch>>> {
    let path = paths.generation_file(&generation.path);
    let Some(bytes) = generation_bytes_if_present(store, paths, generation).await? else {
        return Ok(None);
    };
    let corrupt = |e: parquet::errors::ParquetError| {
        Error::corrupt(
            path.as_ref(),
            format!(
                "generation {} is not a readable Parquet file",
                generation.generation
            ),
            Some(Arc::new(e)),
        )
    };
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .map_err(corrupt)?
        .with_batch_size(64 * 1024)
        .build()
        .map_err(corrupt)?;
    let mut out = Vec::new();
    for b in reader {
        let b = b.map_err(|e| {
            Error::corrupt(
                path.as_ref(),
                format!("generation {} could not be decoded", generation.generation),
                Some(Arc::new(e)),
            )
        })?;
        out.push(match schema {
            Some(s) => {
                conform(b, s).map_err(|e| Error::corrupt(path.as_ref(), e.to_string(), None))?
            }
            None => b,
        });
    }
    Ok(Some(out))
}

/// A committed generation file, from [`ShardReader::generation_files`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerationFile {
    /// The generation number.
    pub generation: u64,
    /// Rows it holds, as the manifest records them.
    pub rows: Option<u64>,
    /// Where other tools open it: a file path in a local store, `s3://bucket/key` (or `gs://`,
    /// `az://`) in an object store.
    pub uri: String,
    /// Its object path in the store.
    pub object: String,
}

/// A shard found by [`list_shards`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedShard {
    /// The shard's id.
    pub id: Uuid,
    /// Its name, as its latest manifest records it (`None` for a shard only ever opened by id,
    /// or one whose manifest cannot be read: opening it reports why).
    pub name: Option<String>,
}

/// What a store holds, from [`list_shards`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardListing {
    /// Shards with a manifest, by id.
    pub shards: Vec<ListedShard>,
    /// Shard folders with no manifest and no WAL entry or generation either, by id: a first
    /// open cut off before it wrote one. They hold nothing acknowledged; readers skip them.
    pub incomplete: Vec<Uuid>,
}

/// The shards in `store`, with their names, and the shard folders that have no manifest.
pub async fn list_shards(store: &Store) -> Result<ShardListing> {
    use futures::StreamExt;
    let store = &store.acting_as(Actor::Reader);
    let ids = store.list_shards().await?;
    let found: Vec<Result<(Uuid, Option<Option<String>>)>> = futures::stream::iter(ids)
        .map(|id| async move {
            let manifests = ManifestStore::new(store.clone(), store.shard_paths(id));
            // A folder without a manifest is incomplete only if it holds nothing else; one that
            // lost its manifest is a shard, whose open says what is wrong.
            match manifests.read_latest_of_existing().await {
                Ok(Some(m)) => Ok((id, Some(m.shard_name))),
                Ok(None) => Ok((id, None)),
                Err(e) if e.code() == ErrorCode::Corrupt => Ok((id, Some(None))),
                Err(e) => Err(e),
            }
        })
        .buffered(16)
        .collect()
        .await;
    let mut listing = ShardListing::default();
    for f in found {
        match f? {
            (id, Some(name)) => listing.shards.push(ListedShard { id, name }),
            (id, None) => listing.incomplete.push(id),
        }
    }
    Ok(listing)
}

/// A read-only view of one shard. See the module docs.
#[derive(Debug, Clone)]
pub struct ShardReader {
    store: Store,
    paths: ShardPaths,
    manifests: ManifestStore,
    name: Option<String>,
}

/// What a [`ShardReader::scan`] returns.
#[derive(Debug, Clone)]
pub struct ScanResult {
    /// The shard's schema (empty if the shard holds no schema and no rows).
    pub schema: SchemaRef,
    /// Every row, in insertion order.
    pub batches: Vec<RecordBatch>,
}

impl ShardReader {
    /// Opens `shard` (a [`ShardRef`], or a shard id) in `store`.
    ///
    /// # Errors
    /// `InvalidArgument` if the shard has no manifest and nothing else either; `Corrupt`
    /// naming the manifest folder if it has WAL entries or generation folders but no manifest
    /// (see [`ManifestStore::read_latest_of_existing`]).
    pub async fn open(store: Store, shard: impl Into<ShardRef>) -> Result<Self> {
        let shard = shard.into();
        let store = store.acting_as(Actor::Reader);
        let paths = store.shard_paths(shard.id());
        let manifests = ManifestStore::new(store.clone(), paths.clone());
        let Some(manifest) = manifests.read_latest_of_existing().await? else {
            return Err(shard.not_found_at(store.location()));
        };
        Ok(ShardReader {
            store,
            paths,
            manifests,
            name: manifest.shard_name,
        })
    }

    /// The shard id.
    pub fn shard_id(&self) -> Uuid {
        self.paths.shard_id()
    }

    /// The shard's name, as its manifest recorded it at open (`None` for a shard only ever
    /// opened by id).
    pub fn shard_name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The latest manifest.
    pub async fn manifest(&self) -> Result<ShardManifest> {
        self.manifests.read_latest().await?.ok_or_else(|| {
            Error::io_msg(format!(
                "shard {} lost its manifest while being read",
                self.shard_id()
            ))
        })
    }

    /// The committed generation files, oldest first, as the latest manifest lists them: what
    /// another tool should read (never a glob, which can also match a generation whose flush
    /// did not reach the manifest). Rows after the replay cursor are only in the WAL; `scan`
    /// includes them.
    pub async fn generation_files(&self) -> Result<Vec<GenerationFile>> {
        let manifest = self.manifest().await?;
        Ok(manifest
            .flushed_generations
            .iter()
            .map(|g| {
                let object = self.paths.generation_file(&g.path);
                GenerationFile {
                    generation: g.generation,
                    rows: g.physical_rows,
                    uri: self.store.uri_of(&object),
                    object: object.to_string(),
                }
            })
            .collect())
    }

    /// Generation folders in the shard's folder that the latest manifest does not list, sorted:
    /// a flush or compaction in progress, one a writer abandoned (it crashed or was fenced
    /// before its commit), or generations compaction replaced (until garbage collection removes
    /// them). Their rows are in the WAL or in a committed generation too, so a tool that read
    /// them would count rows twice.
    pub async fn uncommitted_generations(&self) -> Result<Vec<String>> {
        // Listed before the manifest is read: a flush committed in between is then not
        // reported.
        let dirs = self.store.list_dirs(self.paths.shard_dir()).await?;
        let manifest = self.manifest().await?;
        let mut out: Vec<String> = dirs
            .into_iter()
            .filter(|d| d.contains("_gen_"))
            .filter(|d| !manifest.flushed_generations.iter().any(|g| &g.path == d))
            .collect();
        out.sort();
        Ok(out)
    }

    /// Every row a new writer would recover, in insertion order: the flushed generations of
    /// the latest manifest, then the WAL entries after its replay cursor.
    ///
    /// # While a writer flushes and collects
    /// The scan reads as of one manifest. Garbage collection may meanwhile remove what a newer
    /// manifest no longer needs: WAL entries its generations now hold, generations compaction
    /// replaced. The scan tells such a removal from damage by the latest manifest read after
    /// the miss (collection removes only what a committed manifest allows, so a collected
    /// entry is at or below the low-water mark of every later manifest), and then reads again
    /// as of that newer manifest: it never returns with rows missing, and never reports
    /// collection as corruption. Every row acknowledged before the scan began is in the
    /// result, once (`docs/fencing.md`, "What a reader sees during collection").
    ///
    /// # Errors
    /// `Corrupt` for damage that no newer manifest explains (a hole in the WAL above every
    /// low-water mark, a missing or damaged file the latest manifest lists); `Io` if the
    /// shard changes faster than it can be read, [`MAX_SNAPSHOT_ATTEMPTS`] times in a row.
    pub async fn scan(&self) -> Result<ScanResult> {
        let mut manifest = self.manifest().await?;
        for _ in 0..MAX_SNAPSHOT_ATTEMPTS {
            match self.scan_as_of(&manifest).await? {
                Snapshot::Read(result) => return Ok(result),
                Snapshot::Collected(newer) => manifest = *newer,
            }
        }
        Err(Error::io_msg(format!(
            "shard {} was collected faster than it could be read ({MAX_SNAPSHOT_ATTEMPTS} attempts, last as of manifest version {}); retry the scan",
            self.shard_id(),
            manifest.version
        )))
    }

    /// The rows as of `manifest`, or the newer manifest to read as of when collection removed
    /// something this read needed.
    async fn scan_as_of(&self, manifest: &ShardManifest) -> Result<Snapshot> {
        let mut schema = manifest.schema()?;
        let mut batches = Vec::new();
        for g in &manifest.flushed_generations {
            let Some(part) =
                read_generation_if_present(&self.store, &self.paths, g, schema.as_ref()).await?
            else {
                let latest = self.manifest().await?;
                if latest.version != manifest.version {
                    return Ok(Snapshot::Collected(Box::new(latest)));
                }
                return Err(read_generation(&self.store, &self.paths, g, None)
                    .await
                    .err()
                    .unwrap_or_else(|| Error::io_msg("a generation file reappeared; retry")));
            };
            if schema.is_none() {
                schema = part.first().map(|b| b.schema());
            }
            batches.extend(part);
        }
        let start = manifest.replay_after_wal_entry_position + 1;
        let wal_batches = match WalLayout::of(manifest) {
            WalLayout::Objects => match self.wal_objects(manifest, start).await? {
                Ok(entries) => entries,
                Err(newer) => return Ok(Snapshot::Collected(newer)),
            },
            WalLayout::Segments => match self.wal_segments(manifest, start).await? {
                Ok(entries) => entries,
                Err(newer) => return Ok(Snapshot::Collected(newer)),
            },
        };
        for entry in wal_batches {
            let s = schema.get_or_insert_with(|| entry.schema.clone()).clone();
            for b in entry.batches {
                batches.push(conform(b, &s).map_err(|e| {
                    Error::corrupt(
                        self.paths.wal_entry(entry.position).as_ref(),
                        e.to_string(),
                        None,
                    )
                })?);
            }
        }
        Ok(Snapshot::Read(ScanResult {
            schema: schema.unwrap_or_else(|| Arc::new(Schema::empty())),
            batches,
        }))
    }

    /// The entries of an object-layout WAL from `start` on, as of `manifest`, or the newer
    /// manifest to read as of if collection removed one this read needed.
    async fn wal_objects(
        &self,
        manifest: &ShardManifest,
        start: u64,
    ) -> Result<std::result::Result<Vec<WalEntry>, Box<ShardManifest>>> {
        let mut wal_batches = Vec::new();
        let first_empty = wal::read_run(&self.store, &self.paths, start, |entry| {
            if !entry.is_sentinel {
                wal_batches.push(entry);
            }
            Ok(())
        })
        .await?;
        // The run stops at an empty slot: the tip, unless collection emptied it after a newer
        // generation took its rows, or the WAL has a hole there.
        if let Some(newer) = self.collected_past(manifest, first_empty).await? {
            return Ok(Err(Box::new(newer)));
        }
        if let Some(gap) = wal::find_gap(&self.store, &self.paths, first_empty - 1).await? {
            if let Some(newer) = self.collected_past(manifest, gap.missing).await? {
                return Ok(Err(Box::new(newer)));
            }
            return Err(gap.error(&self.paths));
        }
        Ok(Ok(wal_batches))
    }

    /// The entries of a segment-layout WAL from `start` on, as of `manifest`, or the newer
    /// manifest to read as of if collection took a segment this read needed: then no segment
    /// holds `start` any more, or (defensively) the read found damage that a newer mark
    /// explains.
    async fn wal_segments(
        &self,
        manifest: &ShardManifest,
        start: u64,
    ) -> Result<std::result::Result<Vec<WalEntry>, Box<ShardManifest>>> {
        let read = segments::read_entries(&self.store, &self.paths, start).await;
        let missing_from_start = match &read {
            Ok(found) => found.first_available.filter(|first| *first > start),
            Err(e) if e.code() == ErrorCode::Corrupt => Some(start),
            Err(_) => None,
        };
        let Some(first) = missing_from_start else {
            return Ok(Ok(wal_rows(read?.entries)));
        };
        if let Some(newer) = self.collected_past(manifest, start).await? {
            return Ok(Err(Box::new(newer)));
        }
        read?;
        Err(Error::corrupt(
            self.paths.segments_dir().as_ref(),
            format!(
                "WAL positions {start} to {} are in no segment, and no manifest newer than version {} has a low-water mark that covers them: a hole in the WAL",
                first - 1,
                manifest.version
            ),
            None,
        ))
    }

    /// The latest manifest, if it is newer than `manifest` and its low-water mark reaches
    /// `position`: then an empty slot there may be collection's doing, not the tip or a hole.
    /// Read after the slot was found empty, so a collection that emptied it had committed
    /// that mark first.
    async fn collected_past(
        &self,
        manifest: &ShardManifest,
        position: u64,
    ) -> Result<Option<ShardManifest>> {
        let latest = self.manifest().await?;
        if latest.version == manifest.version {
            return Ok(None);
        }
        let low_water = wal::low_water(&self.store, &self.paths, &latest).await?;
        Ok((position <= low_water).then_some(latest))
    }
}

/// The entries that hold rows, fence sentinels left out.
fn wal_rows(entries: Vec<WalEntry>) -> Vec<WalEntry> {
    entries.into_iter().filter(|e| !e.is_sentinel).collect()
}

/// Reads of a shard as of one manifest that collection overtook before they finished, in a
/// row, before [`ShardReader::scan`] gives up.
const MAX_SNAPSHOT_ATTEMPTS: usize = 16;

/// What one read as of a manifest found.
enum Snapshot {
    /// Every row as of that manifest.
    Read(ScanResult),
    /// Collection removed something the read needed; read again as of this newer manifest.
    Collected(Box<ShardManifest>),
}

/// Reads a shard's WAL entries by position, for change-data capture. Never writes.
///
/// Each call reads the layout the latest manifest records (a shard with no readable manifest
/// is read as an object-layout one). On the segment layout a tailer remembers where it found
/// the records of the segment it read last, so that reading on from there reads only what is
/// new (`wal::segments::read`, which also says when a record of the last segment is returned).
#[derive(Debug, Clone)]
pub struct WalTailer {
    store: Store,
    paths: ShardPaths,
    manifests: ManifestStore,
    segments: Arc<segments::read::ReadCache>,
}

/// `manifest`, if it records the segment layout.
fn on_segments(manifest: Option<&ShardManifest>) -> Option<&ShardManifest> {
    manifest.filter(|m| WalLayout::of(m) == WalLayout::Segments)
}

impl WalTailer {
    /// A tailer over `shard` (a [`ShardRef`], or a shard id) in `store` (which need not have
    /// any entry yet).
    pub async fn open(store: Store, shard: impl Into<ShardRef>) -> Result<Self> {
        let store = store.acting_as(Actor::Tailer);
        let paths = store.shard_paths(shard.into().id());
        let manifests = ManifestStore::new(store.clone(), paths.clone());
        Ok(WalTailer {
            store,
            paths,
            manifests,
            segments: Arc::default(),
        })
    }

    /// The latest manifest, `None` for a shard with no manifest yet. The manifest is only a
    /// hint here: a damaged one must not stop a tailer from finding the tip (it then probes
    /// from the start), so it counts as none.
    async fn latest(&self) -> Result<Option<ShardManifest>> {
        match self.manifests.read_latest().await {
            Ok(m) => Ok(m),
            Err(e) if e.code() == ErrorCode::Corrupt => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The WAL position hint of `manifest` and its WAL low-water mark ([`wal::low_water`]),
    /// `(0, 0)` for a shard with no (readable) manifest.
    async fn hint_and_low_water(&self, manifest: Option<&ShardManifest>) -> Result<(u64, u64)> {
        match manifest {
            Some(m) => Ok((
                m.wal_entry_position_last_seen
                    .max(m.replay_after_wal_entry_position),
                wal::low_water(&self.store, &self.paths, m).await?,
            )),
            None => Ok((0, 0)),
        }
    }

    /// Runs `read` on the shard's segments on a blocking thread, with what this tailer
    /// remembers of them.
    async fn segments<T: Send + 'static>(
        &self,
        read: impl FnOnce(
            &segments::log::SegmentFiles,
            &segments::read::ReadCache,
        ) -> std::result::Result<T, segments::log::LogError>
        + Send
        + 'static,
    ) -> Result<T> {
        let files = segments::files_of(
            &self.store,
            &self.paths,
            segments::log::DEFAULT_SEGMENT_BYTES,
        )?;
        let cache = self.segments.clone();
        let shard = self.paths.shard_id();
        tokio::task::spawn_blocking(move || read(&files, &cache))
            .await
            .map_err(|e| Error::io_msg(format!("reading the WAL segments of shard {shard}: {e}")))?
            .map_err(|e| segments::log_error(shard, e))
    }

    /// The first position of a segment-layout shard that collection has not removed: past
    /// the low-water mark of `manifest`, and held by a segment. Its own manifests always record
    /// the mark, so no listing is needed to find it, unlike [`wal::low_water`].
    async fn segments_first_position(&self, manifest: &ShardManifest) -> Result<u64> {
        let held = self.segments(segments::read::first_available).await?;
        Ok((manifest.wal_low_water + 1).max(held.unwrap_or(0)))
    }

    /// The first position with no entry (the tip). Positions from [`WalTailer::first_position`]
    /// up to it all hold entries.
    ///
    /// # Errors
    /// `Corrupt` naming the slot if the first empty slot found has an entry after it (a hole
    /// in the WAL, see [`crate::wal`]), or the segment at the tip is damaged.
    pub async fn next_position(&self) -> Result<u64> {
        let latest = self.latest().await?;
        if let Some(m) = on_segments(latest.as_ref()) {
            let tip = self.segments(segments::read::tip).await?;
            // No segment yet: the claim that recorded the layout has not created its own.
            return Ok(tip.map_or(m.replay_after_wal_entry_position + 1, |t| t.end));
        }
        let (hint, low_water) = self.hint_and_low_water(latest.as_ref()).await?;
        let tip = wal::discover_tip(&self.store, &self.paths, hint, low_water).await?;
        match wal::hole_at(&self.store, &self.paths, tip).await? {
            Some(gap) => Err(gap.error(&self.paths)),
            None => Ok(tip),
        }
    }

    /// The first position garbage collection has not removed: the low-water mark plus one
    /// (1 while nothing was collected), or on the segment layout the first position a segment
    /// holds if that is higher. Every entry from here to the tip is readable.
    pub async fn first_position(&self) -> Result<u64> {
        let latest = self.latest().await?;
        if let Some(m) = on_segments(latest.as_ref()) {
            return self.segments_first_position(m).await;
        }
        Ok(self.hint_and_low_water(latest.as_ref()).await?.1 + 1)
    }

    /// Checks the WAL above the low-water mark for a hole (an empty slot below a written one)
    /// with one LIST: what [`WalTailer::read`] and [`WalTailer::next_position`] only see where
    /// they look. On the segment layout, reads every segment from the mark on, by the rules
    /// replay follows.
    ///
    /// # Errors
    /// `Corrupt` naming the first such slot, or the damaged segment and offset.
    pub async fn verify(&self) -> Result<()> {
        let latest = self.latest().await?;
        if let Some(m) = on_segments(latest.as_ref()) {
            let start = m.wal_low_water + 1;
            return self
                .segments(move |files, _| segments::read::verify(files, start))
                .await;
        }
        let (_, low_water) = self.hint_and_low_water(latest.as_ref()).await?;
        match wal::find_gap(&self.store, &self.paths, low_water).await? {
            Some(gap) => Err(gap.error(&self.paths)),
            None => Ok(()),
        }
    }

    /// The entry at `position` (1-based), or `None` if there is none yet.
    ///
    /// # Errors
    /// `Truncated` (carrying the first available position) if the slot is empty and at or
    /// below the low-water mark, or on the segment layout below the first position a segment
    /// holds: garbage collection removed it. `Corrupt` naming the slot if it is empty above
    /// the mark but the next one holds an entry (a hole in the WAL, see [`crate::wal`]), or if
    /// the entry is damaged or belongs elsewhere.
    pub async fn read(&self, position: u64) -> Result<Option<WalEntry>> {
        if position == 0 {
            return Err(Error::invalid(
                "WAL positions start at 1; position 0 holds no entry",
            ));
        }
        // Only a local directory can hold segments: elsewhere no manifest needs reading first.
        if self.store.local_files().is_some() {
            let latest = self.latest().await?;
            if let Some(m) = on_segments(latest.as_ref()) {
                return self.read_segments(m, position).await;
            }
        }
        if let Some(entry) = wal::read_entry(&self.store, &self.paths, position).await? {
            return Ok(Some(entry));
        }
        // The mark is read after the slot was found empty: a collection that emptied it had
        // committed the mark first. Only a slot at or below the replay cursor can be below the
        // mark, so only such a slot may cost a listing of the WAL (see `wal::low_water`).
        if let Some(m) = self.latest().await?
            && position <= m.replay_after_wal_entry_position.max(m.wal_low_water)
        {
            let low_water = wal::low_water(&self.store, &self.paths, &m).await?;
            if position <= low_water {
                return Err(Error::truncated(self.paths.shard_id(), position, low_water));
            }
        }
        match wal::hole_at(&self.store, &self.paths, position).await? {
            Some(gap) => Err(gap.error(&self.paths)),
            None => Ok(None),
        }
    }

    /// [`WalTailer::read`] on the segment layout, which `manifest` records.
    async fn read_segments(
        &self,
        manifest: &ShardManifest,
        position: u64,
    ) -> Result<Option<WalEntry>> {
        use segments::read::At;
        let at = self
            .segments(move |files, cache| segments::read::read_position(files, cache, position))
            .await?;
        match at {
            At::Record(r) => {
                let object = segments::record_name(&self.paths, r.seq, r.offset);
                let place = wal::entry::EntryPlace {
                    shard: self.paths.shard_id(),
                    position,
                };
                wal::entry::decode_entry(place, &object, bytes::Bytes::from(r.payload)).map(Some)
            }
            At::NotYet => Ok(None),
            // Resumes where `first_position` would say.
            At::Collected { first_available } => Err(Error::truncated(
                self.paths.shard_id(),
                position,
                (first_available - 1).max(manifest.wal_low_water),
            )),
        }
    }
}
