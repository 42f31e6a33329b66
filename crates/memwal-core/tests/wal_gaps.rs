//! No silent gaps (`docs/format.md`, "WAL entries"). A WAL entry removed outside memwal, or an
//! entry copied into a slot or a shard where it does not belong, is `Corrupt` naming the slot, for
//! the writer's open, the reader and the tailer alike, and nothing is written past it.
//!
//! Before: with entry 4 of 10 deleted, reader and writer returned 30 of 100 acknowledged rows
//! without an error, and the new writer's close moved the replay cursor past the hole for good;
//! an entry copied into the next free slot was replayed twice.

mod support;

use memwal_core::{ErrorCode, ShardReader, WalTailer};
use support::*;

/// Ten durable puts of ten rows each, one WAL entry each, on `shard`; the writer is closed
/// without a generation flush (`abort`), so replay needs every entry.
async fn ten_entries(shard: &Shard) {
    let w = shard.open(durable()).await;
    for i in 0..10 {
        w.put(vec![rows(i * 10, 10)]).await.unwrap();
    }
    w.abort().await.unwrap();
    assert_eq!(shard.wal_len().await, 10);
}

fn assert_corrupt_at(e: &memwal_core::Error, object: &str, words: &str) {
    assert_eq!(e.code(), ErrorCode::Corrupt, "{e}");
    let text = e.to_string();
    assert!(text.contains(object), "{text}");
    assert!(text.contains(words), "{text}");
}

#[tokio::test]
async fn a_missing_entry_is_corrupt_for_the_writer_the_reader_and_the_tailer_until_restored() {
    for (backend, shard) in each_backend() {
        ten_entries(&shard).await;
        let path = shard.store.shard_paths(shard.id).wal_entry(4);
        let taken = backend.take(&path).await;
        let object = path.to_string();

        let e = shard.try_open(durable()).await.unwrap_err();
        assert_corrupt_at(&e, &object, "WAL entry 4 of shard");
        assert_corrupt_at(&e, &object, "an entry exists at position 10");
        let reader = ShardReader::open(shard.store.clone(), shard.id)
            .await
            .unwrap();
        assert_corrupt_at(&reader.scan().await.unwrap_err(), &object, "hole");
        let tailer = WalTailer::open(shard.store.clone(), shard.id)
            .await
            .unwrap();
        assert!(tailer.read(3).await.unwrap().is_some());
        assert_corrupt_at(&tailer.read(4).await.unwrap_err(), &object, "hole");
        assert!(
            tailer.read(11).await.unwrap().is_none(),
            "the tip is no hole"
        );
        assert_corrupt_at(&tailer.verify().await.unwrap_err(), &object, "hole");
        // Nothing was written past the hole, and it stays a hole.
        assert!(backend.raw_get(&path).await.is_none());

        backend.plant(&path, taken).await;
        tailer.verify().await.unwrap();
        let w = shard.open(durable()).await;
        let got = ids(&w.scan().await.unwrap());
        assert_eq!(got, (0..100).collect::<Vec<_>>(), "{}", backend.name);
        w.close().await.unwrap();
        shard.assert_recovered(0..100).await;
    }
}

#[tokio::test]
async fn a_tailer_at_the_hole_is_told_so_by_next_position() {
    let (backend, shard) = Backend::memory().with_shard();
    ten_entries(&shard).await;
    let path = shard.store.shard_paths(shard.id).wal_entry(10 - 1);
    backend.take(&path).await;
    let tailer = WalTailer::open(shard.store.clone(), shard.id)
        .await
        .unwrap();
    // No manifest hint past the hole: the search stops at the first empty slot, position 9.
    assert_corrupt_at(
        &tailer.next_position().await.unwrap_err(),
        path.as_ref(),
        "hole",
    );
}

#[tokio::test]
async fn an_entry_copied_into_the_next_slot_is_corrupt_not_replayed_twice() {
    for (backend, shard) in each_backend() {
        ten_entries(&shard).await;
        let paths = shard.store.shard_paths(shard.id);
        let copy = backend.raw_get(&paths.wal_entry(10)).await.unwrap();
        backend.plant(&paths.wal_entry(11), copy).await;
        let object = paths.wal_entry(11).to_string();
        let e = shard.try_open(durable()).await.unwrap_err();
        assert_corrupt_at(&e, &object, "belongs at position 10");
        let reader = ShardReader::open(shard.store.clone(), shard.id)
            .await
            .unwrap();
        assert_corrupt_at(&reader.scan().await.unwrap_err(), &object, "belongs at");
    }
}

#[tokio::test]
async fn an_entry_copied_from_another_shard_is_corrupt() {
    let (backend, shard) = Backend::memory().with_shard();
    ten_entries(&shard).await;
    let other = Shard::new(&shard.store);
    let w = other.open(durable()).await;
    w.put(vec![batch([1])]).await.unwrap();
    w.abort().await.unwrap();
    let foreign = backend
        .raw_get(&shard.store.shard_paths(other.id).wal_entry(1))
        .await
        .unwrap();
    let slot = backend.plant_wal_entry(shard.id, 11, foreign).await;
    let e = shard.try_open(durable()).await.unwrap_err();
    assert_corrupt_at(&e, slot.as_ref(), &format!("of shard {}", other.id));
}
