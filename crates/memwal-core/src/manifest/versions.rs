//! [`ManifestStore`]: the versions of one shard's manifest on the object store.
//!
//! # The protocol (argued in full in `docs/fencing.md`)
//! Every version is a new object created with put-if-not-exists, so two writers racing for the
//! same number cannot both win. Garbage collection removes old versions, so a number can be
//! free again: a writer or claimant that read version `n`, stalled, and then creates `n + 1`
//! after collection removed it would succeed on a number already used. Three rules make that
//! harmless:
//!
//! 1. **The latest version is the highest number listed**, never a hint followed by probes.
//!    Collection keeps the newest versions and removes only numbers below them, so a version
//!    created in a collected range is always below the highest, and no reader or writer takes
//!    it for the latest. (The best-effort `version_hint.json` is still written for Lance
//!    readers, and only after the check of rule 2.)
//! 2. **A create is confirmed by a listing**: once it has created version `n`, a claimant or
//!    committer lists the versions again. If none is above `n`, no version above `n` ever
//!    existed (the highest number never goes down), so `n` was never collected and is the
//!    latest. If one is, the create either landed in a collected range or was overtaken by a
//!    later claim: a committer is fenced, a claimant fails if the latest holds an epoch at least
//!    its own and otherwise claims again above it.
//! 3. **Ownership is an epoch and a writer id**: a writer is fenced when the latest version
//!    holds a higher epoch, or its epoch with another writer's id (two claims can only reach the
//!    same epoch through a version created in a collected range).
//!
//! A stale actor's create in a collected range is removed by that actor when it can tell
//! (a claim below a lower-epoch chain, which nobody can have built on), or by the next
//! collection otherwise: it is below the kept versions.

use arrow_schema::Schema;
use bytes::Bytes;
use std::sync::Arc;
use uuid::Uuid;

use super::{ProtoUuid, ShardManifest, ShardStatus, check_same_schema, encode_schema};
use crate::error::{Error, Result};
use crate::shard::ShardName;
use crate::store::{CreateOutcome, ShardPaths, Store, parse_bitrev64_name};
use crate::wal::WalLayout;

/// The WAL layout a claim asks for.
#[derive(Debug, Clone, Copy, Default)]
pub struct LayoutChoice {
    /// The layout the writer's options name: an existing shard of another layout is refused.
    pub asked: Option<WalLayout>,
    /// The layout a new shard gets when none is asked for.
    pub for_new_shard: WalLayout,
}

/// The versions of one shard's manifest. Clones share one commit lock: a writer's commits
/// (generation flushes, compactions, its closing commit) run one at a time, so a version above
/// one of its own creates is never its own.
#[derive(Debug, Clone)]
pub struct ManifestStore {
    store: Store,
    paths: ShardPaths,
    commits: Arc<tokio::sync::Mutex<()>>,
}

const MAX_CLAIM_ATTEMPTS: usize = 16;
const MAX_COMMIT_ATTEMPTS: usize = 10;
/// Listings of the versions that may find the highest removed under them (only a version in
/// a collected range can be, and collection removes it) before `read_latest` gives up.
const MAX_LATEST_ATTEMPTS: usize = 8;

impl ManifestStore {
    /// The manifest store of one shard.
    pub fn new(store: Store, paths: ShardPaths) -> Self {
        ManifestStore {
            store,
            paths,
            commits: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    fn shard(&self) -> Uuid {
        self.paths.shard_id()
    }

    /// Reads version `version`, `None` if it does not exist.
    pub async fn read_version(&self, version: u64) -> Result<Option<ShardManifest>> {
        let path = self.paths.manifest(version);
        let bytes = self.store.get(&path).await.map_err(|e| {
            Error::io(
                format!(
                    "reading manifest version {version} of shard {}",
                    self.shard()
                ),
                e,
            )
        })?;
        bytes
            .map(|b| ShardManifest::decode_checked(path.as_ref(), version, &b))
            .transpose()
    }

    /// The versions in a listing of the manifest directory, ascending.
    pub(crate) async fn listed_versions(&self) -> Result<Vec<u64>> {
        Ok(self.listed().await?.into_iter().map(|(v, _)| v).collect())
    }

    /// The versions in a listing of the manifest directory, with their sizes, ascending.
    pub(crate) async fn listed(&self) -> Result<Vec<(u64, u64)>> {
        let listing = self
            .store
            .list(&self.paths.manifest_dir())
            .await
            .map_err(|e| {
                Error::io(
                    format!("listing the manifest versions of shard {}", self.shard()),
                    e,
                )
            })?;
        let mut versions: Vec<(u64, u64)> = listing
            .iter()
            .filter_map(|m| Some((m.location.filename().and_then(parse_bitrev64_name)?, m.size)))
            .collect();
        versions.sort_unstable();
        Ok(versions)
    }

    /// The latest version number: the highest listed (rule 1 of the module docs), 0 if the
    /// shard has no manifest.
    pub async fn latest_version(&self) -> Result<u64> {
        Ok(self.listed_versions().await?.last().copied().unwrap_or(0))
    }

    /// The latest manifest, `None` for a shard that was never claimed.
    pub async fn read_latest(&self) -> Result<Option<ShardManifest>> {
        for _ in 0..MAX_LATEST_ATTEMPTS {
            let v = self.latest_version().await?;
            if v == 0 {
                return Ok(None);
            }
            // Removed between the listing and the read: only a version created in a collected
            // range is ever removed while highest (by its creator), so list again.
            if let Some(m) = self.read_version(v).await? {
                return Ok(Some(m));
            }
        }
        Err(Error::io_msg(format!(
            "the latest manifest version of shard {} was removed {MAX_LATEST_ATTEMPTS} times while it was read; retry",
            self.shard()
        )))
    }

    /// [`ManifestStore::read_latest`] for an open (of a writer or a reader) or a collection,
    /// which must not take a shard that lost its manifest for one that does not exist: `None`
    /// only if the shard's folder holds no WAL entry and no generation folder either.
    ///
    /// # Errors
    /// `Corrupt` naming the manifest folder if the shard has WAL entries or generation folders
    /// but no manifest version (the folder was deleted, or a restore missed it). A writer
    /// would otherwise start the shard again at version 1 and then meet entries of the epochs
    /// it lost, and a reader or a collection would call the shard missing.
    pub async fn read_latest_of_existing(&self) -> Result<Option<ShardManifest>> {
        if let Some(m) = self.read_latest().await? {
            return Ok(Some(m));
        }
        let list = |dir: object_store::path::Path| async move {
            self.store
                .list(&dir)
                .await
                .map_err(|e| Error::io(format!("listing the WAL of shard {}", self.shard()), e))
        };
        let (wal, segments, dirs) = tokio::try_join!(
            list(self.paths.wal_dir()),
            list(self.paths.segments_dir()),
            self.store.list_dirs(self.paths.shard_dir()),
        )?;
        // Segments count as entries: a segment-layout shard's WAL (spares and the fence file,
        // whose names start otherwise, hold none).
        let entries = wal
            .iter()
            .filter(|m| {
                m.location
                    .filename()
                    .and_then(parse_bitrev64_name)
                    .is_some()
            })
            .count()
            + segments
                .iter()
                .filter(|m| {
                    m.location
                        .filename()
                        .is_some_and(|n| n.ends_with(".seg") && !n.starts_with('.'))
                })
                .count();
        let generations = dirs.iter().filter(|d| d.contains("_gen_")).count();
        if entries == 0 && generations == 0 {
            return Ok(None);
        }
        // A first claim creates version 1 before its writer writes any entry or generation, so
        // a manifest listed now, after them, is a concurrent first open's: the shard is fine.
        if let Some(m) = self.read_latest().await? {
            return Ok(Some(m));
        }
        let count =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        Err(Error::corrupt(
            self.paths.manifest_dir().as_ref(),
            format!(
                "shard {} has no manifest version but holds {} and {}: its manifest folder was deleted or not restored. Restore the folder from a backup of the shard; the WAL alone cannot say which generations were committed or which entries they already hold, so memwal does not rebuild it, and nothing opens, reads or collects the shard until it is back",
                self.shard(),
                count(entries, "WAL entry", "WAL entries"),
                count(generations, "generation folder", "generation folders"),
            ),
            None,
        ))
    }

    /// The latest manifest if a version above `version` exists, `None` if `version` is still
    /// the highest (rule 2 of the module docs).
    async fn newer_than(&self, version: u64) -> Result<Option<ShardManifest>> {
        if self.latest_version().await? <= version {
            return Ok(None);
        }
        self.read_latest().await
    }

    /// Creates `m` at its version. `AlreadyExists` unless the version already holds exactly
    /// these bytes (our own write whose acknowledgement was lost). Leaves the hint alone, and
    /// does not confirm that the version is the latest ([`ManifestStore::newer_than`]).
    async fn create(&self, m: &ShardManifest) -> Result<CreateOutcome> {
        let path = self.paths.manifest(m.version);
        let bytes = m.encode_with_checksum();
        let outcome = match self.store.put_if_absent(&path, bytes.clone()).await {
            Ok(o) => o,
            Err(e) => {
                // A failed sync leaves the version readable but maybe not durable, and a
                // later sync succeeding proves nothing (fsyncgate): never accept it.
                if crate::store::is_sync_failure(&e) {
                    return Err(Error::io(
                        format!(
                            "writing manifest version {} of shard {}: a sync failed, so the version may or may not be durable and is not trusted; retry the operation",
                            m.version,
                            self.shard()
                        ),
                        e,
                    ));
                }
                // Ambiguous: the write may have landed. Look before reporting a failure.
                match self.store.get(&path).await {
                    Ok(Some(existing)) if existing == bytes => CreateOutcome::Created,
                    Ok(Some(_)) => CreateOutcome::AlreadyExists,
                    _ => {
                        return Err(Error::io(
                            format!(
                                "writing manifest version {} of shard {}",
                                m.version,
                                self.shard()
                            ),
                            e,
                        ));
                    }
                }
            }
        };
        let outcome = match outcome {
            CreateOutcome::AlreadyExists => match self.store.get(&path).await {
                Ok(Some(existing)) if existing == bytes => CreateOutcome::Created,
                _ => CreateOutcome::AlreadyExists,
            },
            o => o,
        };
        Ok(outcome)
    }

    /// Moves the best-effort version hint to `version` (Lance readers start their probes
    /// there; memwal lists). A failure only leaves it behind.
    async fn write_hint(&self, version: u64) {
        let hint = Bytes::from(format!("{{\"version\":{version}}}"));
        let _ = self
            .store
            .put_overwrite(&self.paths.version_hint(), hint)
            .await;
    }

    /// Creates `m` at its version, confirms that it is the latest, and moves the hint to it:
    /// `Created` only then. `AlreadyExists` if the version was taken, or if a later version
    /// exists once it was created (nothing then depends on `m`; see the module docs).
    pub async fn write(&self, m: &ShardManifest) -> Result<CreateOutcome> {
        if self.create(m).await? == CreateOutcome::AlreadyExists
            || self.newer_than(m.version).await?.is_some()
        {
            return Ok(CreateOutcome::AlreadyExists);
        }
        self.write_hint(m.version).await;
        Ok(CreateOutcome::Created)
    }

    /// Claims the next epoch: writes version latest+1 with epoch latest+1, carrying every other
    /// field over (the replay cursor, the generations: what the new writer takes over). Benign
    /// version races are retried; a peer that claimed an epoch at least as high as our target
    /// fails the claim with `PeerClaimedEpoch`. A shard recorded with a different schema fails
    /// with `SchemaMismatch` before claiming.
    pub async fn claim_epoch(&self, schema: &Schema, writer_id: &str) -> Result<ShardManifest> {
        let latest = self.read_latest().await?;
        self.claim_epoch_after(latest, schema, writer_id, None, LayoutChoice::default())
            .await
    }

    /// [`ManifestStore::claim_epoch`] from `latest`, the newest manifest its caller has just
    /// read (so the caller can start other reads from it while the claim writes); a version race
    /// re-reads it. `name`, the shard's name if it was opened by one, is recorded (a manifest
    /// keeps the name it has).
    ///
    /// The claim holds only once a listing after its create shows no later version (rule 2 of
    /// the module docs): a later version with an epoch at least ours is a peer's claim; one
    /// below ours means our create landed in a collected range under the real latest, and we
    /// claim again above it.
    pub async fn claim_epoch_after(
        &self,
        latest: Option<ShardManifest>,
        schema: &Schema,
        writer_id: &str,
        name: Option<&ShardName>,
        layout: LayoutChoice,
    ) -> Result<ShardManifest> {
        let schema_bytes = encode_schema(&Schema::new(schema.fields().clone()))?;
        let mut latest = Some(latest);
        for _ in 0..MAX_CLAIM_ATTEMPTS {
            let latest = match latest.take() {
                Some(first) => first,
                None => self.read_latest().await?,
            };
            let next =
                self.claim_version(latest.as_ref(), schema, &schema_bytes, writer_id, name)?;
            let next = self.with_layout(next, latest.is_some(), layout)?;
            if self.create_claim(&next).await? {
                return Ok(next);
            }
        }
        Err(Error::io_msg(format!(
            "Failed to claim shard {} after {MAX_CLAIM_ATTEMPTS} retries due to manifest contention; retry the open",
            self.shard()
        )))
    }

    /// The version a claim from `latest` creates: `latest` with the next version and epoch
    /// (its schema, `schema_bytes`, recorded if it had none), or version 1 of a new shard;
    /// owned by `writer_id`, with the shard's `name` if it had none.
    ///
    /// # Errors
    /// `InvalidArgument` for a sealed shard; `SchemaMismatch` if `latest` records another
    /// schema than `schema`.
    fn claim_version(
        &self,
        latest: Option<&ShardManifest>,
        schema: &Schema,
        schema_bytes: &[u8],
        writer_id: &str,
        name: Option<&ShardName>,
    ) -> Result<ShardManifest> {
        let mut next = match latest {
            Some(m) => {
                if m.status == ShardStatus::Sealed as i32 {
                    return Err(Error::invalid(format!(
                        "shard {} is sealed; refusing claim (drop in flight)",
                        self.shard()
                    )));
                }
                if let Some(stored) = m.schema()? {
                    check_same_schema(self.shard(), &stored, schema)?;
                }
                let mut n = m.clone();
                n.version = m.version + 1;
                n.writer_epoch = m.writer_epoch + 1;
                n.arrow_schema.get_or_insert_with(|| schema_bytes.to_vec());
                n
            }
            None => ShardManifest {
                shard_id: Some(ProtoUuid {
                    uuid: self.shard().as_bytes().to_vec(),
                }),
                version: 1,
                writer_epoch: 1,
                current_generation: 1,
                arrow_schema: Some(schema_bytes.to_vec()),
                ..Default::default()
            },
        };
        if let Some(name) = name {
            next.shard_name
                .get_or_insert_with(|| name.as_str().to_string());
        }
        next.writer_id = writer_id.to_string();
        next.record_claim();
        next.checksum = None;
        Ok(next)
    }

    /// `next`, a claim, with its WAL layout: a new shard (`existed` false) takes the
    /// layout `choice` gives new shards; an existing shard keeps the layout it records.
    ///
    /// # Errors
    /// `InvalidArgument` if the layout asked for is not the existing shard's.
    fn with_layout(
        &self,
        mut next: ShardManifest,
        existed: bool,
        choice: LayoutChoice,
    ) -> Result<ShardManifest> {
        let recorded = WalLayout::of(&next);
        match choice.asked.or((!existed).then_some(choice.for_new_shard)) {
            Some(asked) if existed && asked != recorded => Err(Error::invalid(format!(
                "shard {}'s WAL uses the {} layout, and walLayout '{}' was asked; open it without walLayout, or convert its WAL first with `memwal wal convert <location> --to {}`",
                self.shard(),
                recorded.name(),
                asked.name(),
                asked.name()
            ))),
            Some(WalLayout::Segments) if !existed => {
                next.wal_layout = Some(WalLayout::Segments as i32);
                Ok(next)
            }
            _ => Ok(next),
        }
    }

    /// Creates the claim's version `next` and confirms it (rule 2 of the module docs): `true`
    /// if the claim holds, `false` to claim again from the latest version.
    ///
    /// # Errors
    /// `PeerClaimedEpoch` if the latest version is a peer's claim of an epoch at least ours.
    async fn create_claim(&self, next: &ShardManifest) -> Result<bool> {
        // The version hint is left one version behind: it is best effort, only Lance readers
        // use it, and its durable overwrite would lengthen failover. The next commit moves it.
        let now = match self.create(next).await? {
            CreateOutcome::Created => match self.newer_than(next.version).await? {
                None => return Ok(true),
                Some(now) => {
                    if now.writer_epoch < next.writer_epoch {
                        // Nobody built on our version (a successor's would carry our epoch or
                        // more): it is a number collection had freed. Remove it so a
                        // hint-probing reader cannot find it, and claim above the latest.
                        let _ = self.store.delete(&self.paths.manifest(next.version)).await;
                    }
                    Some(now)
                }
            },
            CreateOutcome::AlreadyExists => self.read_latest().await?,
        };
        if let Some(now) = now
            && now.writer_epoch >= next.writer_epoch
        {
            return Err(Error::peer_claimed_during_open(
                format!(
                    "Failed to claim shard {} (version {}): another writer claimed epoch {} (>= our target {})",
                    self.shard(),
                    next.version,
                    now.writer_epoch,
                    next.writer_epoch
                ),
                now.holder(),
            ));
        }
        Ok(false)
    }

    /// `PeerClaimedEpoch` unless the latest version is the writer's own: of epoch
    /// `local_epoch` and writer `writer_id`, or of a lower epoch (its claim is not listed yet,
    /// which only an open checking before its claim sees). Always reads storage (no cache).
    pub async fn check_fenced(&self, local_epoch: u64, writer_id: &str) -> Result<()> {
        match self.read_latest().await? {
            Some(m) if fences(&m, local_epoch, writer_id) => {
                Err(fenced_by(self.shard(), local_epoch, &m))
            }
            _ => Ok(()),
        }
    }

    /// Commits a new version built by `prepare` from the latest one, as version latest+1:
    /// fails fast with `PeerClaimedEpoch` if a successor claimed the shard; retries version
    /// races. `prepare` returns `None` when the latest version already holds the change (a
    /// commit whose acknowledgement was lost), which then counts as done.
    ///
    /// A commit holds only once a listing after its create shows no later version (rule 2 of
    /// the module docs); otherwise the writer is fenced, whether its version was overtaken by
    /// a claim or landed in a collected range.
    pub async fn commit_update(
        &self,
        local_epoch: u64,
        writer_id: &str,
        prepare: impl FnMut(&ShardManifest) -> Option<ShardManifest>,
    ) -> Result<ShardManifest> {
        let _one_at_a_time = self.commits.lock().await;
        let commit = self.commit_update_once(local_epoch, writer_id, prepare);
        crate::stats::nested(crate::stats::Operation::ManifestCommit, commit).await
    }

    async fn commit_update_once(
        &self,
        local_epoch: u64,
        writer_id: &str,
        mut prepare: impl FnMut(&ShardManifest) -> Option<ShardManifest>,
    ) -> Result<ShardManifest> {
        for attempt in 1..=MAX_COMMIT_ATTEMPTS {
            let latest = self.read_latest().await?.ok_or_else(|| {
                Error::io_msg(format!(
                    "shard {} has no manifest; it was deleted while a writer held it",
                    self.shard()
                ))
            })?;
            if fences(&latest, local_epoch, writer_id) {
                return Err(fenced_by(self.shard(), local_epoch, &latest));
            }
            let Some(mut next) = prepare(&latest) else {
                return Ok(latest);
            };
            next.version = latest.version + 1;
            next.writer_epoch = local_epoch;
            next.writer_id = writer_id.to_string();
            // `latest` is this writer's own (`fences` said so), so its claim is ours.
            next.keep_claim_of(&latest);
            next.checksum = None;
            if self.create(&next).await? == CreateOutcome::Created {
                if let Some(now) = self.newer_than(next.version).await? {
                    // Commits of one writer run one at a time, so a later version is a
                    // successor's claim (ours was overtaken, or created in a number collection
                    // had freed after that claim): fenced either way.
                    return Err(fenced_by(self.shard(), local_epoch, &now));
                }
                self.write_hint(next.version).await;
                return Ok(next);
            }
            if attempt < MAX_COMMIT_ATTEMPTS {
                crate::stats::note_retry();
            }
        }
        Err(Error::io_msg(format!(
            "manifest commit for shard {} failed after {MAX_COMMIT_ATTEMPTS} attempts due to contention",
            self.shard()
        )))
    }
}

/// Whether `latest` fences a writer of `local_epoch` and `writer_id`: a higher epoch, or the
/// same epoch written by another writer (rule 3 of the module docs).
pub(crate) fn fences(latest: &ShardManifest, local_epoch: u64, writer_id: &str) -> bool {
    latest.writer_epoch > local_epoch
        || (latest.writer_epoch == local_epoch && latest.writer_id != writer_id)
}

/// The `PeerClaimedEpoch` error for a writer of `local` epoch that sees `stored`, naming the
/// holder `stored` records.
pub(crate) fn fenced_by(shard: Uuid, local: u64, stored: &ShardManifest) -> Error {
    let why = if stored.writer_epoch == local {
        format!(
            "manifest version {} of shard {shard} holds our epoch {local} for another writer",
            stored.version
        )
    } else {
        format!(
            "local epoch {local} < stored epoch {} for shard {shard}",
            stored.writer_epoch
        )
    };
    Error::peer_claimed(why, stored.holder())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use crate::manifest::FlushedGeneration;
    use arrow_schema::{DataType, Field};

    fn schema() -> Schema {
        Schema::new(vec![Field::new("id", DataType::Int32, false)])
    }

    /// `e` has `code`, and its message contains `part`.
    fn assert_error(e: &Error, code: ErrorCode, part: &str) {
        assert_eq!(e.code(), code, "{e}");
        assert!(e.to_string().contains(part), "{e}");
    }

    fn stores() -> Vec<ManifestStore> {
        let dir = tempfile::tempdir().unwrap().keep();
        [Store::memory(), Store::local(dir).unwrap()]
            .into_iter()
            .map(|s| {
                let p = s.shard_paths(Uuid::new_v4());
                ManifestStore::new(s, p)
            })
            .collect()
    }

    fn version(v: u64, epoch: u64) -> ShardManifest {
        ShardManifest {
            version: v,
            writer_epoch: epoch,
            current_generation: 1,
            ..Default::default()
        }
    }

    // Each version is created once; the latest is the highest, whatever epoch it holds.
    #[tokio::test]
    async fn versions_are_created_once_and_latest_is_found() {
        for m in stores() {
            assert!(m.read_latest().await.unwrap().is_none());
            for v in 1..=5 {
                assert_eq!(
                    m.write(&version(v, v * 10)).await.unwrap(),
                    CreateOutcome::Created
                );
            }
            let latest = m.read_latest().await.unwrap().unwrap();
            assert_eq!((latest.version, latest.writer_epoch), (5, 50));
            assert_eq!(m.read_version(2).await.unwrap().unwrap().writer_epoch, 20);
            assert_eq!(
                m.write(&version(1, 99)).await.unwrap(),
                CreateOutcome::AlreadyExists
            );
        }
    }

    // A version created again after collection removed it (a stalled writer's) is below the
    // kept ones: it is never the latest, whatever the hint says, and `write` refuses it.
    #[tokio::test]
    async fn a_version_created_in_a_collected_range_is_never_the_latest() {
        for m in stores() {
            for v in 1..=6 {
                m.write(&version(v, 1)).await.unwrap();
            }
            for v in 1..=4 {
                m.store.delete(&m.paths.manifest(v)).await.unwrap();
            }
            assert_eq!(
                m.write(&version(3, 1)).await.unwrap(),
                CreateOutcome::AlreadyExists
            );
            m.store
                .put_overwrite(
                    &m.paths.version_hint(),
                    Bytes::from_static(b"{\"version\":3}"),
                )
                .await
                .unwrap();
            assert_eq!(m.latest_version().await.unwrap(), 6);
            assert_eq!(m.read_latest().await.unwrap().unwrap().version, 6);
        }
    }

    #[tokio::test]
    async fn latest_is_found_with_a_stale_or_missing_hint() {
        for m in stores() {
            for v in 1..=40 {
                m.write(&version(v, 1)).await.unwrap();
            }
            m.store
                .put_overwrite(
                    &m.paths.version_hint(),
                    Bytes::from_static(b"{\"version\":3}"),
                )
                .await
                .unwrap();
            assert_eq!(m.latest_version().await.unwrap(), 40);
            m.store
                .put_overwrite(&m.paths.version_hint(), Bytes::from_static(b"garbage"))
                .await
                .unwrap();
            assert_eq!(m.latest_version().await.unwrap(), 40);
        }
    }

    // A claim carries every field of the latest version over, a replay cursor moved by a
    // commit that changed nothing else included.
    #[tokio::test]
    async fn claim_after_a_cursor_only_bump_keeps_the_cursor() {
        for m in stores() {
            let first = m.claim_epoch(&schema(), "a").await.unwrap();
            assert_eq!(
                (first.version, first.writer_epoch, first.current_generation),
                (1, 1, 1)
            );
            let c = m
                .commit_update(1, "a", |l| {
                    let mut n = l.clone();
                    n.replay_after_wal_entry_position = 42;
                    Some(n)
                })
                .await
                .unwrap();
            assert_eq!(c.version, 2);
            let second = m.claim_epoch(&schema(), "b").await.unwrap();
            assert_eq!((second.version, second.writer_epoch), (3, 2));
            assert_eq!(second.replay_after_wal_entry_position, 42);
        }
    }

    // A sealed shard (being dropped) takes no new claim, and nothing is written.
    #[tokio::test]
    async fn sealed_shard_refuses_claims() {
        for m in stores() {
            let mut s = version(1, 1);
            s.status = ShardStatus::Sealed as i32;
            m.write(&s).await.unwrap();
            let e = m.claim_epoch(&schema(), "a").await.unwrap_err();
            assert!(e.to_string().contains("sealed"), "{e}");
            assert_eq!(m.read_latest().await.unwrap().unwrap().version, 1);
        }
    }

    #[tokio::test]
    async fn check_fenced_sees_a_successor() {
        for m in stores() {
            m.claim_epoch(&schema(), "a").await.unwrap();
            m.check_fenced(1, "a").await.unwrap();
            m.claim_epoch(&schema(), "b").await.unwrap();
            let e = m.check_fenced(1, "a").await.unwrap_err();
            assert_error(&e, ErrorCode::Fenced, "local epoch 1 < stored epoch 2");
            assert_eq!(e.fence_reason(), Some(crate::FenceReason::PeerClaimedEpoch));
            m.check_fenced(2, "b").await.unwrap();
            // The same epoch written by another writer fences too: two claims reach one epoch
            // only through a version created in a collected range.
            let e = m.check_fenced(2, "c").await.unwrap_err();
            assert_error(
                &e,
                ErrorCode::Fenced,
                "holds our epoch 2 for another writer",
            );
            // commit_update of the fenced writer fails fast.
            let e = m
                .commit_update(1, "a", |l| Some(l.clone()))
                .await
                .unwrap_err();
            assert_eq!(e.fence_reason(), Some(crate::FenceReason::PeerClaimedEpoch));
        }
    }

    #[tokio::test]
    async fn claim_with_another_schema_is_a_schema_mismatch() {
        for m in stores() {
            m.claim_epoch(&schema(), "a").await.unwrap();
            let other = Schema::new(vec![Field::new("id", DataType::Int64, false)]);
            let e = m.claim_epoch(&other, "b").await.unwrap_err();
            assert_error(&e, ErrorCode::SchemaMismatch, "`id`");
            assert_eq!(m.read_latest().await.unwrap().unwrap().writer_epoch, 1);
        }
    }

    // A commit whose change the latest version already holds (an earlier attempt that lost
    // its acknowledgement) writes nothing and returns that version.
    #[tokio::test]
    async fn commit_update_skips_an_already_applied_change() {
        for m in stores() {
            m.claim_epoch(&schema(), "a").await.unwrap();
            let prepare = |l: &ShardManifest| {
                if l.current_generation >= 2 {
                    return None;
                }
                let mut n = l.clone();
                n.current_generation = 2;
                Some(n)
            };
            assert_eq!(m.commit_update(1, "a", prepare).await.unwrap().version, 2);
            assert_eq!(m.commit_update(1, "a", prepare).await.unwrap().version, 2);
        }
    }

    #[tokio::test]
    async fn corrupt_manifest_is_reported_with_its_path() {
        for m in stores() {
            m.claim_epoch(&schema(), "a").await.unwrap();
            let path = m.paths.manifest(2);
            let mut bytes = m.paths.manifest(1);
            bytes = bytes.clone();
            let good = m.store.get(&bytes).await.unwrap().unwrap();
            let mut bad = good.to_vec();
            let last = bad.len() - 6;
            bad[last] ^= 0x10;
            m.store
                .put_if_absent(&path, Bytes::from(bad))
                .await
                .unwrap();
            let e = m.read_latest().await.unwrap_err();
            assert_error(&e, ErrorCode::Corrupt, path.as_ref());
        }
    }

    // A manifest cut anywhere (even at a field boundary, where protobuf would decode the
    // prefix as a shorter, valid message without its generation list) is corrupt.
    #[tokio::test]
    async fn a_manifest_cut_anywhere_is_corrupt() {
        let m = &stores()[0];
        let mut v = version(1, 1);
        v.replay_after_wal_entry_position = 4;
        v.writer_id = "w".into();
        v.flushed_generations = (1..=2)
            .map(|g| FlushedGeneration {
                generation: g,
                path: format!("0000000{g}_gen_{g}"),
                ..Default::default()
            })
            .collect();
        m.write(&v).await.unwrap();
        let path = m.paths.manifest(1);
        let good = m.store.get(&path).await.unwrap().unwrap();
        assert_eq!(m.read_version(1).await.unwrap().unwrap().writer_id, "w");
        for cut in 0..good.len() {
            let e = ShardManifest::decode_checked(path.as_ref(), 1, &good[..cut]).unwrap_err();
            assert_eq!(e.code(), crate::ErrorCode::Corrupt, "cut at {cut}: {e}");
            assert!(e.to_string().contains(path.as_ref()), "{e}");
        }
    }
}
