// The raw floor of a segment-log WAL: what a WAL that appends into an already allocated file
// pays on this disk per group commit, one `fdatasync`, with no encoding, no MemTable and no
// fencing. From JavaScript (a store adapter, run by the closed-loop driver like every store)
// and from Rust (`crates/memwal-core/examples/segment_floor.rs`, without JavaScript).
//
// The segment is zero-filled and fsynced before the cell, so that a commit's `fdatasync` writes
// data blocks only: appending to a file's end, or into fallocated (unwritten) extents, changes
// its size or its extent tree, and the sync then writes the inode too. When a round would run
// past the segment's end, writing starts again at its beginning, as a recycled segment is
// reused: its blocks stay allocated and written, so nothing else changes.

import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'

import { ROW_BYTES } from './data.mjs'
import { runExample } from './rust-example.mjs'

/** A record's header: position, epoch, length and checksum, as a segment record carries them. */
export const RECORD_HEADER_BYTES = 32

/** The bytes of one put's record: the header and the put's rows (100 B each). */
export const recordBytes = (rows) => RECORD_HEADER_BYTES + rows * ROW_BYTES

/**
 * Creates `file` holding `bytes` zeros, synced with its folder, and returns a descriptor open
 * for reading and writing. Writes, not `fallocate`: the blocks must be written to be
 * overwritten later without a metadata change.
 */
export function preallocate(file, bytes) {
  const fd = fs.openSync(file, 'w+')
  const zeros = Buffer.alloc(Math.min(bytes, 1 << 20))
  for (let off = 0; off < bytes; off += zeros.length) {
    fs.writeSync(fd, zeros, 0, Math.min(zeros.length, bytes - off), off)
  }
  fs.fsyncSync(fd)
  const dirFd = fs.openSync(path.dirname(file), 'r')
  try {
    fs.fsyncSync(dirFd)
  } finally {
    fs.closeSync(dirFd)
  }
  return fd
}

/**
 * The segment floor in JavaScript. One writer loop: it takes every queued record, writes them
 * at the next offset with one `pwrite`, then `fdatasync`s, then resolves their puts; records
 * that arrive meanwhile queue for the next round (at most one sync in flight, no timer). The
 * `pwrite` is synchronous, since it only copies into the page cache; the `fdatasync` runs on
 * libuv's thread pool, so a round costs one thread hop, as a put handed to a native writer
 * thread does. Counters: rounds (`walFlushCount`, one sync each) and acknowledged puts.
 */
export function segmentFloorStore({ segmentBytes }) {
  return {
    durability: `records pwritten at the next offset of a preallocated, zero-filled, fsynced ${segmentBytes >> 20} MiB file, then fdatasync; concurrent puts group-committed (one sync in flight)`,
    async open(dir, { rows, clients }) {
      fs.mkdirSync(dir, { recursive: true })
      const fd = preallocate(path.join(dir, 'segment'), segmentBytes)
      const size = recordBytes(rows)
      // Each client's record, its header stamped per put: records are built, not replayed.
      const records = Array.from({ length: clients }, () => crypto.randomBytes(size))
      let queue = []
      let busy = false
      let offset = 0
      let rounds = 0
      let puts = 0
      const datasync = () => new Promise((resolve, reject) => fs.fdatasync(fd, (e) => (e ? reject(e) : resolve())))
      const pump = async () => {
        busy = true
        while (queue.length > 0) {
          const batch = queue
          queue = []
          try {
            const body = batch.length === 1 ? batch[0].record : Buffer.concat(batch.map((b) => b.record))
            if (offset + body.length > segmentBytes) offset = 0
            fs.writeSync(fd, body, 0, body.length, offset)
            offset += body.length
            await datasync()
            rounds++
            puts += batch.length
            for (const b of batch) b.resolve()
          } catch (e) {
            for (const b of batch) b.reject(e)
          }
        }
        busy = false
      }
      let position = 0
      return {
        put: (c) =>
          new Promise((resolve, reject) => {
            const record = records[c]
            record.writeBigUInt64LE(BigInt(++position), 0)
            record.writeUInt32LE(size, 16)
            queue.push({ record: Buffer.from(record), resolve, reject })
            if (!busy) pump()
          }),
        counters: () => ({ walFlushCount: rounds, putCount: puts }),
        close: async () => fs.closeSync(fd),
      }
    },
  }
}

/**
 * Runs one cell of the Rust segment floor (a child process): `clients` tasks, one committer
 * thread; returns its JSON result (puts, rounds = syncs, latencies).
 */
export function runRustSegmentFloor(bin, { dir, rows, clients, warmupMs, measureMs, segmentBytes }) {
  fs.mkdirSync(dir, { recursive: true })
  return runExample(bin, [
    '--dir',
    dir,
    '--record-bytes',
    String(recordBytes(rows)),
    '--segment-bytes',
    String(segmentBytes),
    '--clients',
    String(clients),
    '--warmup-ms',
    String(warmupMs),
    '--duration-ms',
    String(measureMs),
  ])
}
