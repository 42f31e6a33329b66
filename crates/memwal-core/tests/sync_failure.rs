//! A failed `fsync` is never trusted (PostgreSQL's "fsyncgate"). An injected sync error must
//! reject every put its WAL entry covers, never be retried and trusted, and poison the writer;
//! reopening replays correctly.

mod support;

use std::sync::Arc;

use memwal_core::{FenceReason, WriterConfig};
use support::*;
use uuid::Uuid;

async fn sync_failure_rejects_covered_puts(data_sync: bool) {
    let backend = Backend::local();
    let store = &backend.store;
    let shard = Uuid::new_v4();
    let w = Arc::new(
        open(
            store,
            shard,
            WriterConfig {
                max_wal_persist_retries: 5,
                ..durable()
            },
        )
        .await,
    );
    w.put(vec![batch([0])]).await.unwrap();
    // A WAL entry has two syncs: its data, then its directory.
    let attempts = store.faults().wal_put_attempts();
    if data_sync {
        store.faults().fail_wal_syncs(1);
    } else {
        store.faults().fail_wal_syncs_after(1, 1);
    }
    let puts: Vec<_> = (1..=8)
        .map(|i| {
            let w = w.clone();
            tokio::spawn(async move { w.put(vec![batch([i * 10, i * 10 + 1])]).await })
        })
        .collect();
    let mut acked = vec![0];
    let mut failed = Vec::new();
    for (i, p) in puts.into_iter().enumerate() {
        let i = i as i32 + 1;
        match p.await.unwrap() {
            Ok(_) => acked.extend([i * 10, i * 10 + 1]),
            Err(e) => {
                assert_eq!(
                    e.fence_reason(),
                    Some(FenceReason::PersistenceFailure),
                    "{e}"
                );
                failed.push(i);
            }
        }
    }
    assert!(!failed.is_empty(), "the sync failure rejected no put");
    // Not retried: one WAL put attempt for the failing entry, none after.
    assert_eq!(store.faults().wal_put_attempts() - attempts, 1);
    let e = w.put(vec![batch([99])]).await.unwrap_err();
    assert_eq!(e.fence_reason(), Some(FenceReason::PersistenceFailure));
    w.abort().await.unwrap();

    store.faults().recover();
    let w2 = open(&backend.second_handle(), shard, durable()).await;
    let got = ids(&w2.scan().await.unwrap());
    for id in &acked {
        assert_eq!(
            got.iter().filter(|x| *x == id).count(),
            1,
            "{id} in {got:?}"
        );
    }
    for i in failed {
        let (a, b) = (got.contains(&(i * 10)), got.contains(&(i * 10 + 1)));
        assert_eq!(a, b, "failed put {i} recovered partially: {got:?}");
    }
    assert!(!got.contains(&99));
    w2.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_data_sync_rejects_the_puts_it_covers_and_poisons_the_writer() {
    sync_failure_rejects_covered_puts(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_directory_sync_rejects_the_puts_it_covers_and_poisons_the_writer() {
    sync_failure_rejects_covered_puts(false).await;
}

/// A durable put whose WAL entry's `fdatasync` fails with the real `errno` (the test hook at
/// the `fdatasync` call site returns `io::Error::from_raw_os_error(errno)`).
async fn a_real_errno_from_fdatasync_is_never_retried(errno: i32) {
    use memwal_core::store::fs::sync_errors::{self, Sync};
    let backend = Backend::local();
    let store = &backend.store;
    let shard = Uuid::new_v4();
    let w = open(
        store,
        shard,
        WriterConfig {
            max_wal_persist_retries: 5,
            ..durable()
        },
    )
    .await;
    w.put(vec![batch([0])]).await.unwrap();
    let wal_dir = backend
        .path()
        .unwrap()
        .join(format!("_mem_wal/{shard}/wal"));
    sync_errors::fail_next(Sync::Data, &wal_dir, errno);
    let attempts = store.faults().wal_put_attempts();
    let e = w.put(vec![batch([1])]).await.unwrap_err();
    assert_eq!(
        e.fence_reason(),
        Some(FenceReason::PersistenceFailure),
        "{e}"
    );
    assert!(e.to_string().contains("a sync failed"), "{e}");
    assert_eq!(store.faults().wal_put_attempts() - attempts, 1, "retried");
    w.abort().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_eio_enospc_or_edquot_from_fdatasync_rejects_the_put_without_retry() {
    use rustix::io::Errno;
    for errno in [Errno::IO, Errno::NOSPC, Errno::DQUOT] {
        a_real_errno_from_fdatasync_is_never_retried(errno.raw_os_error()).await;
    }
}

/// A shard whose writer put row 0 durably and stopped, and a second handle on it (another
/// process's) whose WAL syncs pass `skip` and then fail once: the open of a new writer through
/// it, and that handle.
async fn open_after_failing_a_wal_sync(
    backend: &Backend,
    shard: Uuid,
    skip: u64,
) -> (memwal_core::Error, memwal_core::Store) {
    let first = open(&backend.store, shard, durable()).await;
    first.put(vec![batch([0])]).await.unwrap();
    first.abort().await.unwrap();
    let store = backend.second_handle();
    store.faults().fail_wal_syncs_after(skip, 1);
    let e = memwal_core::ShardWriter::open(store.clone(), schema(), on(shard, durable()))
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.code(), memwal_core::ErrorCode::Io, "{e}");
    (e, store)
}

// A fence sentinel whose directory sync failed is readable; reading it back must not accept it (it
// may not be durable), so the open fails with a typed IO error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_sentinel_whose_directory_sync_failed_is_not_read_back_and_accepted() {
    // The sentinel's data sync (when it is staged) passes, and so do the syncs that make the
    // replayed entry durable (its file, then the directory); the sentinel's directory sync
    // fails.
    let (e, _) = open_after_failing_a_wal_sync(&Backend::local(), Uuid::new_v4(), 3).await;
    assert!(e.to_string().contains("sentinel"), "{e}");
}

// A manifest version whose directory sync failed is readable; the writer that wrote it must not
// take it as written (it may not be durable), so its open fails. Without the check, the
// ambiguous-write path reads the version back, finds its own bytes and accepts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_version_whose_directory_sync_failed_is_not_read_back_and_accepted() {
    use memwal_core::store::fs::sync_errors::{self, Sync};
    let backend = Backend::local();
    let shard = Uuid::new_v4();
    let first = open(&backend.store, shard, durable()).await;
    first.put(vec![batch([0])]).await.unwrap();
    first.close().await.unwrap();
    // The same store handle, so that the manifest directory is already known and synced:
    // the armed failure is the publish's own directory sync.
    let manifest_dir = backend
        .path()
        .unwrap()
        .join(format!("_mem_wal/{shard}/manifest"));
    sync_errors::fail_next(
        Sync::Dir,
        &manifest_dir,
        rustix::io::Errno::IO.raw_os_error(),
    );
    let e = memwal_core::ShardWriter::open(backend.store.clone(), schema(), on(shard, durable()))
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.code(), memwal_core::ErrorCode::Io, "{e}");
    assert!(e.to_string().contains("not trusted"), "{e}");
    // The next open's syncs pass: it claims past that version and has every acknowledged row.
    let w = open(&backend.store, shard, durable()).await;
    assert_eq!(ids(&w.scan().await.unwrap()), vec![0]);
    w.close().await.unwrap();
}

// A new writer makes the entries it replays durable before trusting them; a sync failing
// there fails the open with a typed IO error (the entry may not be durable), and a later open
// whose syncs pass replays every acknowledged row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_sync_of_a_replayed_entry_fails_the_open() {
    let (backend, shard) = (Backend::local(), Uuid::new_v4());
    // The staged sentinel's data sync passes; the replayed entry's file sync fails.
    let (e, store) = open_after_failing_a_wal_sync(&backend, shard, 1).await;
    assert!(
        e.to_string().contains("durable before replaying them"),
        "{e}"
    );
    let w = open(&store, shard, durable()).await;
    assert_eq!(scanned_ids(&w).await, vec![0]);
    w.close().await.unwrap();
}
