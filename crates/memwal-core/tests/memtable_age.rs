//! Sealing by age (`maxMemtableAgeMs`): a MemTable that has held rows for `max_memtable_age_ms` is
//! flushed as a generation however small it is, so a quiet shard's rows reach Parquet and its
//! replay stays short; an empty MemTable is never sealed. The checks wait for an outcome (with a
//! generous limit), never for a speed.

mod support;

use std::time::Duration;

use memwal_core::ShardWriter;
use support::*;

async fn generations(w: &ShardWriter) -> usize {
    w.manifest()
        .await
        .unwrap()
        .map_or(0, |m| m.flushed_generations.len())
}

/// Polls until `w` has `n` generations; panics after 30 s.
async fn until_generations(w: &ShardWriter, n: usize) {
    for _ in 0..3000 {
        if generations(w).await >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no generation {n} within 30 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memtable_that_held_rows_for_max_age_is_flushed_and_an_empty_one_never() {
    let (_backend, shard) = Backend::memory().with_shard();
    let w = shard
        .open(durable().with(|c| c.max_memtable_age_ms = Some(50)))
        .await;
    // Nothing in it: nothing to seal, however long it waits.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(generations(&w).await, 0);
    w.put(vec![batch([1, 2])]).await.unwrap();
    until_generations(&w, 1).await;
    // The writer goes on; the next MemTable is sealed by age in its turn.
    w.put(vec![batch([3])]).await.unwrap();
    until_generations(&w, 2).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(generations(&w).await, 2, "an empty MemTable was sealed");
    let m = w.manifest().await.unwrap().unwrap();
    let rows: Vec<u64> = m
        .flushed_generations
        .iter()
        .map(|g| g.physical_rows.unwrap())
        .collect();
    assert_eq!(rows, vec![2, 1]);
    w.close().await.unwrap();
    shard.assert_recovered([1, 2, 3]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_age_limit_only_size_seals() {
    let (_backend, shard) = Backend::memory().with_shard();
    let w = shard
        .open(durable().with(|c| c.max_memtable_age_ms = None))
        .await;
    w.put(vec![batch([1])]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(generations(&w).await, 0);
    w.close().await.unwrap();
    shard.assert_recovered([1]).await;
}

#[test]
fn the_age_limit_is_checked() {
    use memwal_core::WriterConfig;
    for bad in [Some(0), Some(7 * 86_400_000 + 1)] {
        let e = WriterConfig {
            max_memtable_age_ms: bad,
            ..WriterConfig::default()
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("max_memtable_age_ms"), "{e}");
    }
    assert_eq!(WriterConfig::default().max_memtable_age_ms, Some(3_600_000));
}
