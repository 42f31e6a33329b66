//! The `WalTailer` on the segment-log WAL: positions across rotations and reopens, `TRUNCATED`
//! below the first segment, a stale writer's refused records never returned (while its
//! successor's claim is under way, and after), damage, and following a writer as it writes.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use memwal_core::wal::WalLayout;
use memwal_core::wal::segments::format::{HEADER_BYTES, SegmentHeader};
use memwal_core::{ErrorCode, WalTailer, WriterConfig};
use support::*;

/// Durable, segment layout, small segments so that tests rotate, and no background collection
/// (a test moves segments itself where it wants them collected).
fn segments() -> WriterConfig {
    durable().with(|c| {
        c.wal_layout = Some(WalLayout::Segments);
        c.wal_segment_bytes = 64 << 10;
        c.gc = false;
    })
}

/// Rows per put, enough that a few puts fill a 64 KiB segment.
const ROWS: usize = 3000;

/// The segments folder of `shard` in the local `backend`.
fn segments_dir(backend: &Backend, shard: &Shard) -> PathBuf {
    backend
        .path()
        .unwrap()
        .join(format!("_mem_wal/{}/segments", shard.id))
}

/// The segment files in `dir`, by sequence number, with their headers.
fn segment_files(dir: &Path) -> Vec<(PathBuf, SegmentHeader)> {
    let mut out: Vec<(PathBuf, SegmentHeader)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            name.ends_with(".seg") && !name.starts_with('.')
        })
        .map(|p| {
            let header = SegmentHeader::decode(&std::fs::read(&p).unwrap()).unwrap();
            (p, header)
        })
        .collect();
    out.sort_by_key(|(_, h)| h.seq);
    out
}

/// The ids of the entry at `position`, read by `t`; panics if there is none.
async fn ids_at(t: &WalTailer, position: u64) -> Vec<i32> {
    let e = t
        .read(position)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("no entry at {position}"));
    assert_eq!(e.position, position);
    ids(&e.batches)
}

// Positions run on across rotations and reopens: every one reads back with its own rows and
// the epoch of the writer that put it, the tip follows the writers, and nothing is read past
// it. The same tailer is used throughout.
#[tokio::test]
async fn positions_read_back_across_rotations_and_reopens() {
    let (backend, shard) = Backend::local().with_shard();
    let t = shard.tailer().await;
    assert_eq!(t.next_position().await.unwrap(), 1);
    assert!(t.read(1).await.unwrap().is_none());
    let a = shard.open(segments()).await;
    for i in 0..12 {
        a.put(vec![rows(i * 1000, ROWS)]).await.unwrap();
    }
    assert!(
        segment_files(&segments_dir(&backend, &shard)).len() >= 3,
        "the log rotated"
    );
    assert_eq!(t.first_position().await.unwrap(), 1);
    assert_eq!(t.next_position().await.unwrap(), 13);
    for p in 1..=12 {
        let e = t.read(p).await.unwrap().unwrap();
        assert_eq!((e.position, e.writer_epoch), (p, a.epoch()));
        assert_eq!(
            ids(&e.batches),
            (0..ROWS as i32)
                .map(|k| (p as i32 - 1) * 1000 + k)
                .collect::<Vec<_>>()
        );
    }
    assert!(t.read(13).await.unwrap().is_none());
    t.verify().await.unwrap();
    let first_epoch = a.epoch();
    drop(a);

    let b = shard.open(segments()).await;
    assert!(b.epoch() > first_epoch);
    assert_eq!(
        t.next_position().await.unwrap(),
        13,
        "a reopen adds nothing"
    );
    for i in 12..20 {
        b.put(vec![rows(i * 1000, ROWS)]).await.unwrap();
    }
    assert_eq!(t.next_position().await.unwrap(), 21);
    // Backwards, then forwards again: the tailer moves between segments either way.
    for p in (1..=20).rev().chain(1..=20) {
        let e = t.read(p).await.unwrap().unwrap();
        let epoch = if p <= 12 { first_epoch } else { b.epoch() };
        assert_eq!((e.position, e.writer_epoch), (p, epoch));
        assert_eq!(ids(&e.batches)[0], (p as i32 - 1) * 1000);
    }
    assert!(t.read(21).await.unwrap().is_none());
    // A new tailer, and a clean close (which flushes a generation) change nothing that was read.
    b.close().await.unwrap();
    let fresh = shard.tailer().await;
    assert_eq!(fresh.next_position().await.unwrap(), 21);
    assert_eq!(ids_at(&fresh, 20).await[0], 19_000);
    fresh.verify().await.unwrap();
}

// Positions below the first segment that is left were collected: reading one is TRUNCATED,
// naming where to resume (what `first_position` says), and everything from there reads.
#[tokio::test]
async fn positions_below_the_first_segment_are_truncated() {
    let (backend, shard) = Backend::local().with_shard();
    let a = shard.open(segments()).await;
    for i in 0..12 {
        a.put(vec![rows(i * 1000, ROWS)]).await.unwrap();
    }
    a.force_seal_active().await.unwrap();
    a.wait_for_flush_drain().await.unwrap();
    let low_water = shard.manifest().await.wal_low_water;
    assert_eq!(low_water, 12, "every entry is in a generation");
    // Collect as collection does: segments whose every record is at or below the mark become
    // spares (the last one never does).
    let dir = segments_dir(&backend, &shard);
    let files = segment_files(&dir);
    let second_start = files[1].1.first_position;
    assert!(second_start > 1 && second_start <= low_water);
    std::fs::rename(&files[0].0, dir.join(".spare-collected.seg")).unwrap();

    let t = shard.tailer().await;
    assert_eq!(t.first_position().await.unwrap(), low_water + 1);
    for p in 1..second_start {
        let e = t.read(p).await.unwrap_err();
        assert_eq!(e.code(), ErrorCode::Truncated, "{e}");
        assert_eq!(e.first_available(), Some(low_water + 1), "{e}");
    }
    // Still stored, though below the mark: readable, as on the object layout.
    assert_eq!(
        ids_at(&t, second_start).await[0],
        (second_start as i32 - 1) * 1000
    );
    assert_eq!(t.next_position().await.unwrap(), 13);
    t.verify().await.unwrap();
    a.put(vec![rows(50_000, 1)]).await.unwrap();
    assert_eq!(ids_at(&t, 13).await, vec![50_000]);
}

// A stale writer appends while its successor's claim is under way: its record is not
// returned while the claim decides, and once the claimant's segment starts at that position
// (it read the log before the record was written), never: the stale writer's put fails, and
// the position reads as the claimant's own entry once it writes one. Without the tailer's
// re-read of the fence file, it would return the stale record during the claim.
#[tokio::test]
async fn a_stale_writers_refused_record_is_never_returned() {
    let backend = Backend::local();
    let shard = Shard::new(&backend.store);
    let a = Arc::new(shard.open(segments()).await);
    a.put(vec![rows(0, 1)]).await.unwrap();
    let t = shard.tailer().await;
    assert_eq!(ids_at(&t, 1).await, vec![0]);
    let dir = segments_dir(&backend, &shard);
    // A claimant's fence write (epoch 2's slot: the file's length records the claim): from
    // now on the stale writer's commits wait for the claimant's segment.
    std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("fence"))
        .unwrap()
        .set_len(3 * 8)
        .unwrap();
    let put = spawn_put(&a, vec![rows(1, 1)]);
    // The record is in the segment, its put waiting.
    let last = segment_files(&dir).pop().unwrap();
    wait_until_async("the stale record is written", || async {
        segment_files(&dir).last().unwrap().1 == last.1 && record_count(&last.0, &last.1) == 2
    })
    .await;
    assert!(t.read(2).await.unwrap().is_none(), "the claim decides");
    assert_eq!(t.next_position().await.unwrap(), 2);
    assert_eq!(
        ids_at(&t, 1).await,
        vec![0],
        "read before the claim: it stands"
    );
    // A tailer that read nothing before the claim cannot tell which of the last segment's
    // records the claimant read: the claim decides them all.
    let fresh = shard.tailer().await;
    assert!(fresh.read(1).await.unwrap().is_none());
    assert!(fresh.read(2).await.unwrap().is_none());
    assert_eq!(fresh.next_position().await.unwrap(), 1);
    // The claimant's segment starts at 2: it read the log before the stale record.
    let claimant = SegmentHeader {
        seq: last.1.seq + 1,
        epoch: a.epoch() + 1,
        first_position: 2,
        salt: 0x5eed,
        writer_id: uuid::Uuid::new_v4(),
    };
    let mut bytes = claimant.encode().to_vec();
    bytes.resize(HEADER_BYTES as usize + 4096, 0);
    std::fs::write(dir.join(format!("{:020}.seg", claimant.seq)), bytes).unwrap();
    assert_peer_claimed(&put.await.unwrap().unwrap_err());
    for tailer in [&t, &fresh, &shard.tailer().await] {
        assert_eq!(ids_at(tailer, 1).await, vec![0]);
        assert!(
            tailer.read(2).await.unwrap().is_none(),
            "the stale record is refused"
        );
        assert_eq!(tailer.next_position().await.unwrap(), 2);
        tailer.verify().await.unwrap();
    }
    // The next writer starts where the claimant did; position 2 is its own entry.
    let b = shard
        .through(backend.second_handle())
        .open(segments())
        .await;
    b.put(vec![rows(2, 1)]).await.unwrap();
    for tailer in [&t, &shard.tailer().await] {
        let e = tailer.read(2).await.unwrap().unwrap();
        assert_eq!((ids(&e.batches), e.writer_epoch), (vec![2], b.epoch()));
        assert_eq!(tailer.next_position().await.unwrap(), 3);
    }
    b.close().await.unwrap();
    shard.assert_recovered([0, 2]).await;
}

/// Records in the segment at `path` (header `h`) that decode in order from its start.
fn record_count(path: &Path, h: &SegmentHeader) -> usize {
    use memwal_core::wal::segments::format::decode_record;
    let bytes = std::fs::read(path).unwrap();
    let mut offset = HEADER_BYTES;
    let mut n = 0;
    while let Some(r) = decode_record(&bytes, h.salt, offset) {
        n += 1;
        offset = r.next_offset;
    }
    n
}

// A stale writer that keeps writing after a claimant took over (here across rotations of its
// old segment): none of what it writes is ever returned, and the claimant's entries are.
#[tokio::test]
async fn a_stale_writer_writing_on_is_never_read_by_a_tailer() {
    let backend = Backend::local();
    let shard = Shard::new(&backend.store);
    let a = shard.open(segments()).await;
    a.put(vec![rows(0, 1)]).await.unwrap();
    let t = shard.tailer().await;
    assert_eq!(ids_at(&t, 1).await, vec![0]);
    let b = shard
        .through(backend.second_handle())
        .open(segments())
        .await;
    for i in 1..4 {
        assert_peer_claimed(&a.put(vec![rows(i * 1000, ROWS)]).await.unwrap_err());
        assert!(t.read(2).await.unwrap().is_none());
        assert_eq!(t.next_position().await.unwrap(), 2);
    }
    b.put(vec![rows(7, 1)]).await.unwrap();
    let e = t.read(2).await.unwrap().unwrap();
    assert_eq!((ids(&e.batches), e.writer_epoch), (vec![7], b.epoch()));
    assert!(t.read(3).await.unwrap().is_none());
    t.verify().await.unwrap();
}

// Damage in a segment is CORRUPT for a read of that position and for `verify`, naming the
// segment; the positions before it still read.
#[tokio::test]
async fn damage_in_a_segment_is_corrupt() {
    let (backend, shard) = Backend::local().with_shard();
    let a = shard.open(segments()).await;
    for i in 0..3 {
        a.put(vec![rows(i * 10, 5)]).await.unwrap();
    }
    drop(a);
    let (path, header) = segment_files(&segments_dir(&backend, &shard))
        .pop()
        .unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let first = memwal_core::wal::segments::format::decode_record(&bytes, header.salt, HEADER_BYTES)
        .unwrap()
        .next_offset as usize;
    // The second record's payload, with the third after it saying the second was durable.
    bytes[first + 100] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let t = shard.tailer().await;
    assert_eq!(ids_at(&t, 1).await, (0..5).collect::<Vec<_>>());
    let object = format!("segment {}", header.seq);
    assert_error(&t.read(2).await.unwrap_err(), ErrorCode::Corrupt, &object);
    assert_error(&t.verify().await.unwrap_err(), ErrorCode::Corrupt, &object);
}

// A tailer following a writer as it writes (puts of many sizes, across rotations and a
// generation flush) sees every entry once, in order, with its own rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tailer_follows_a_writer_as_it_writes() {
    let (backend, shard) = Backend::local().with_shard();
    let w = Arc::new(shard.open(segments()).await);
    let puts: i32 = 60;
    let size = |i: i32| 1 + (i as usize * 97) % ROWS;
    let writer = {
        let w = w.clone();
        tokio::spawn(async move {
            for i in 0..puts {
                w.put(vec![rows(i * 1000, size(i))]).await.unwrap();
                if i == puts / 2 {
                    w.force_seal_active().await.unwrap();
                }
            }
        })
    };
    let t = shard.tailer().await;
    let mut position = 1;
    within_hang_guard("following the writer", async {
        while position <= puts as u64 {
            match t.read(position).await.unwrap() {
                Some(e) => {
                    let i = position as i32 - 1;
                    assert_eq!(
                        ids(&e.batches),
                        (0..size(i) as i32)
                            .map(|k| i * 1000 + k)
                            .collect::<Vec<_>>()
                    );
                    position += 1;
                }
                None => tokio::time::sleep(Duration::from_millis(1)).await,
            }
        }
    })
    .await;
    writer.await.unwrap();
    assert!(t.read(position).await.unwrap().is_none());
    assert_eq!(t.next_position().await.unwrap(), puts as u64 + 1);
    assert!(segment_files(&segments_dir(&backend, &shard)).len() >= 3);
}
