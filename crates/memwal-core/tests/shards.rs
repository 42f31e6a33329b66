//! Shards by name (README, "API model"): a name reaches the same shard every time, with neither a
//! name nor an id a writer opens the shard named `default`, and listings show names and skip shard
//! folders that have no manifest (a first open cut off before writing one).

mod support;

use bytes::Bytes;
use memwal_core::{
    DEFAULT_SHARD_NAME, ErrorCode, ListedShard, ShardName, ShardReader, ShardRef, ShardWriter,
    WalTailer, WriterConfig, list_shards,
};
use support::*;
use uuid::Uuid;

fn named(name: &str) -> WriterConfig {
    WriterConfig {
        shard: Some(ShardRef::parse(name).unwrap()),
        ..durable()
    }
}

#[tokio::test]
async fn a_name_reaches_the_same_shard_every_time_and_the_manifest_records_it() {
    for backend in Backend::every_layout() {
        let w = ShardWriter::open(backend.store.clone(), schema(), named("events"))
            .await
            .unwrap();
        let id = w.shard_id();
        assert_eq!(id, ShardName::parse("events").unwrap().id());
        assert_eq!(w.shard_name(), Some("events"));
        w.put(vec![batch([1, 2])]).await.unwrap();
        w.close().await.unwrap();

        // Another shard by another name, and the first again by name, from another handle.
        let other = ShardWriter::open(backend.second_handle(), schema(), named("audit"))
            .await
            .unwrap();
        assert_ne!(other.shard_id(), id);
        other.close().await.unwrap();
        let again = ShardWriter::open(backend.second_handle(), schema(), named("events"))
            .await
            .unwrap();
        assert_eq!((again.shard_id(), again.epoch()), (id, 2));
        assert_eq!(scanned_ids(&again).await, vec![1, 2]);
        again.close().await.unwrap();

        let reader = ShardReader::open(backend.store.clone(), ShardRef::parse("events").unwrap())
            .await
            .unwrap();
        assert_eq!(reader.shard_id(), id);
        assert_eq!(reader.shard_name(), Some("events"));
        assert_eq!(
            reader.manifest().await.unwrap().shard_name.as_deref(),
            Some("events")
        );
        let tailer = WalTailer::open(backend.store.clone(), ShardRef::parse("events").unwrap())
            .await
            .unwrap();
        assert!(tailer.next_position().await.unwrap() > 1);
    }
}

#[tokio::test]
async fn with_neither_name_nor_id_a_writer_reopens_the_default_shard() {
    let backend = Backend::local();
    for round in 1..=2 {
        let w = ShardWriter::open(backend.store.clone(), schema(), durable())
            .await
            .unwrap();
        assert_eq!(w.shard_name(), Some(DEFAULT_SHARD_NAME));
        assert_eq!(w.shard_id(), ShardRef::default().id());
        assert_eq!(w.epoch(), round);
        w.put(vec![batch([round as i32])]).await.unwrap();
        w.close().await.unwrap();
    }
    let reader = ShardReader::open(backend.store.clone(), ShardRef::default())
        .await
        .unwrap();
    assert_eq!(ids(&reader.scan().await.unwrap().batches), vec![1, 2]);
    assert_eq!(backend.store.list_shards().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_shard_opened_by_id_has_no_name_and_keeps_working() {
    let backend = Backend::memory();
    let id = Uuid::new_v4();
    let w = open(&backend.store, id, durable()).await;
    assert_eq!((w.shard_id(), w.shard_name()), (id, None));
    w.close().await.unwrap();
    let reader = ShardReader::open(backend.store.clone(), id).await.unwrap();
    assert_eq!(reader.shard_name(), None);
    // The id of a named shard reaches it too, and its name stays recorded.
    let named_id = ShardName::parse("events").unwrap().id();
    ShardWriter::open(backend.store.clone(), schema(), named("events"))
        .await
        .unwrap()
        .close()
        .await
        .unwrap();
    let by_id = open(&backend.store, named_id, durable()).await;
    assert_eq!(by_id.shard_name(), Some("events"));
    by_id.close().await.unwrap();
}

#[tokio::test]
async fn a_reader_of_a_name_nobody_wrote_says_which_name() {
    let backend = Backend::memory();
    let e = ShardReader::open(backend.store.clone(), ShardRef::parse("nope").unwrap())
        .await
        .unwrap_err();
    assert_eq!(e.code(), ErrorCode::InvalidArgument);
    assert!(e.to_string().contains("no shard `nope`"), "{e}");
}

// A first open killed before writing its manifest leaves a stub: `_mem_wal/<id>/` without a
// manifest. Listings must not offer it as a shard (a reader of it fails), but must show it. Such an
// open names no WAL entry (its claim comes first), only a file of its own (a staged write); a
// folder holding a WAL entry but no manifest lost its manifest (`tests/lost_manifest.rs`).
#[tokio::test]
async fn listings_give_names_and_ids_and_set_apart_folders_without_a_manifest() {
    for backend in Backend::every_layout() {
        let store = &backend.store;
        let by_id = Uuid::new_v4();
        for config in [named("events"), on(by_id, durable())] {
            ShardWriter::open(store.clone(), schema(), config)
                .await
                .unwrap()
                .close()
                .await
                .unwrap();
        }
        let stub = Uuid::new_v4();
        backend
            .plant_file(
                &store.shard_paths(stub).manifest_dir(),
                "version_1_staged",
                b"a first open's claim, cut off",
            )
            .await;
        let listing = list_shards(store).await.unwrap();
        let mut expected = vec![
            ListedShard {
                id: ShardName::parse("events").unwrap().id(),
                name: Some("events".into()),
            },
            ListedShard {
                id: by_id,
                name: None,
            },
        ];
        expected.sort_by_key(|s| s.id);
        assert_eq!(listing.shards, expected);
        assert_eq!(listing.incomplete, vec![stub]);
    }
}

// Other tools read the manifest's list, never a glob, which also matches a generation folder whose
// flush never reached the manifest (the demo's double count).
#[tokio::test]
async fn generation_files_are_the_manifests_list_at_paths_other_tools_open() {
    let backend = Backend::local();
    let w = ShardWriter::open(
        backend.store.clone(),
        schema(),
        named("events").with(|c| c.max_memtable_size = 1),
    )
    .await
    .unwrap();
    for i in 0..3 {
        w.put(vec![batch([i])]).await.unwrap();
        w.wait_for_flush_drain().await.unwrap();
    }
    w.close().await.unwrap();
    let paths = backend.store.shard_paths(w.shard_id());
    // An orphan: a generation written, its manifest commit never made.
    backend
        .plant(
            &paths.generation_file("deadbeef_gen_99"),
            Bytes::from_static(b"PAR1"),
        )
        .await;
    let reader = ShardReader::open(backend.store.clone(), w.shard_id())
        .await
        .unwrap();
    let files = reader.generation_files().await.unwrap();
    assert_eq!(
        reader.uncommitted_generations().await.unwrap(),
        vec!["deadbeef_gen_99".to_string()]
    );
    let manifest = reader.manifest().await.unwrap();
    assert_eq!(
        files.iter().map(|f| f.generation).collect::<Vec<_>>(),
        manifest
            .flushed_generations
            .iter()
            .map(|g| g.generation)
            .collect::<Vec<_>>()
    );
    assert!(files.len() >= 3, "{files:?}");
    assert_eq!(files.iter().filter_map(|f| f.rows).sum::<u64>(), 3);
    let root = backend.path().unwrap();
    for f in &files {
        assert!(!f.uri.contains("_gen_99"), "{f:?}");
        assert!(f.uri.starts_with(root.to_str().unwrap()), "{f:?}");
        let bytes = std::fs::read(&f.uri).unwrap();
        assert_eq!(&bytes[..4], b"PAR1", "{f:?}");
        assert!(f.uri.ends_with(&f.object), "{f:?}");
    }
}
