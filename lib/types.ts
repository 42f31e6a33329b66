// The result types of the API, and the conversions of the binding's results to them.

import type { Table } from 'apache-arrow'

/** Where a put's rows went. */
export interface WriteResult {
  /** The MemTable generation that accepted the rows; `null` in WAL-only mode. */
  generation: number | null
  /**
   * Batch positions `[start, end)`, local to `generation` (the first put after a rotation is
   * `0..1` again); writer-lifetime in WAL-only mode.
   */
  batchPositions: {
    /** First batch position of the put (inclusive). */
    start: number
    /** One past the put's last batch position (exclusive). */
    end: number
  }
}

/** What {@link ShardWriter.putNoWait} returns. */
export interface PutNoWaitResult {
  /** Where the rows went (they are in memory already). */
  result: WriteResult
  /** Resolves when the rows are durable; `null` in non-durable mode. */
  durable: Promise<void> | null
}

/** Statistics of the active MemTable and the frozen ones awaiting their generation flush. */
export interface MemTableStats {
  /** Generation of the active MemTable (the one its flush will produce). */
  generation: number
  /** Rows in the active MemTable. */
  rowCount: number
  /** Record batches in the active MemTable. */
  batchCount: number
  /** Estimated in-memory bytes of the active MemTable; it freezes at `maxMemtableSize`. */
  estimatedSize: number
  /** Batches of the active MemTable not yet in the WAL. */
  pendingWalBatchCount: number
  /** Rows of the active MemTable not yet in the WAL. */
  pendingWalRowCount: number
  /** Estimated bytes of the active MemTable not yet in the WAL. */
  pendingWalEstimatedBytes: number
  /** Frozen MemTables waiting for their generation flush (still visible to `scan()`). */
  frozenMemtableCount: number
  /** Estimated bytes of those frozen MemTables; counts towards `maxUnflushedMemtableBytes`. */
  frozenEstimatedBytes: number
}

/** The writer's view of its WAL. */
export interface WalStats {
  /** Where the next WAL entry goes. */
  nextWalEntryPosition: number
  /** Where this writer's fence sentinel went (epoch ≥ 2). */
  fenceSentinelPosition: number | null
  /** WAL entries this writer appended. */
  entriesAppended: number
  /** Their encoded bytes. */
  bytesAppended: number
}

/**
 * Where {@link ShardWriter.open} spent its time. The claim ends once the previous writer is
 * fenced (its next append fails); replay then rebuilds the MemTables from the WAL tail the
 * previous writer left, so it grows with that tail.
 */
export interface OpenStats {
  /** Milliseconds spent claiming the shard: the epoch CAS, finding the WAL tip, the fence sentinel. */
  claimMs: number
  /** Milliseconds spent replaying the WAL tail into MemTables (0 in WAL-only mode). */
  replayMs: number
  /** WAL entries replayed, fence sentinels included. */
  replayedEntries: number
  /** Rows replayed. */
  replayedRows: number
}

/** Write counters. `putsPerWalEntry` is the group-commit factor of durable puts. */
export interface WriteStats {
  /** Successful `put` and `putNoWait` calls. */
  putCount: number
  /** Rows those calls inserted. */
  putRows: number
  /** Milliseconds spent in the in-memory part of puts (validation, backpressure, insert). */
  putTimeMs: number
  /** WAL entries appended (not counting the fence sentinel). */
  walFlushCount: number
  /** Encoded bytes of those WAL entries. */
  walFlushBytes: number
  /** Record batches in those WAL entries. */
  walFlushBatches: number
  /** Milliseconds spent appending them (object-store puts, fsync included). */
  walFlushTimeMs: number
  /** Durable-put completions reported (successes and failures). */
  durableRequests: number
  /** Mean durable puts per WAL entry: the group-commit factor (grows with concurrency). */
  putsPerWalEntry: number
  /** MemTable generations flushed as Parquet files. */
  memtableFlushCount: number
  /** Rows in those generations. */
  memtableFlushRows: number
  /** Milliseconds spent flushing generations. */
  memtableFlushTimeMs: number
  /** Puts that waited for backpressure (see `maxUnflushedMemtableBytes`). */
  backpressureEvents: number
  /** Total milliseconds puts waited for backpressure. */
  backpressureWaitMs: number
}

/** One flushed generation (an immutable Parquet file). */
export interface FlushedGeneration {
  /** Generation number (1 for the first MemTable of a shard). */
  generation: number
  /** Directory relative to the shard directory; the data is `<path>/data.parquet`. */
  path: string
  /** Rows in the generation; `null` if the manifest does not record it. */
  rows: number | null
  /**
   * Estimated in-memory bytes of its rows (not the Parquet file size, which is compressed);
   * `null` if the manifest does not record it.
   */
  bytes: number | null
}

/** A shard manifest version. */
export interface ShardManifest {
  /** The shard id (a UUID); `null` if the manifest does not record one. */
  shardId: string | null
  /** Manifest version: 1 for the first, +1 for every commit. */
  version: number
  /** The fencing token: the epoch of the latest writer to claim the shard. */
  writerEpoch: number
  /** WAL entries at or below this position are in flushed generations. */
  replayAfterWalEntryPosition: number
  /** A hint of the WAL tip when the manifest was written; not authoritative. */
  walEntryPositionLastSeen: number
  /** The generation number the next flushed MemTable gets. */
  currentGeneration: number
  /** Flushed generations, oldest first. */
  flushedGenerations: FlushedGeneration[]
  /** Id of the writer handle that wrote this version. */
  writerId: string
}

/** A put's result as the API returns it (`null`, not a missing key, in WAL-only mode). */
export function writeResult(r: { generation?: number | null; batchPositions: { start: number; end: number } }): WriteResult {
  return { generation: r.generation ?? null, batchPositions: { start: r.batchPositions.start, end: r.batchPositions.end } }
}

/** A manifest as the API returns it (`null`, not a missing key, for what it does not record). */
export function manifestOf(m: {
  shardId?: string | null
  version: number
  writerEpoch: number
  replayAfterWalEntryPosition: number
  walEntryPositionLastSeen: number
  currentGeneration: number
  flushedGenerations: Array<{ generation: number; path: string; rows?: number | null; bytes?: number | null }>
  writerId: string
}): ShardManifest {
  return {
    ...m,
    shardId: m.shardId ?? null,
    flushedGenerations: m.flushedGenerations.map((g) => ({ ...g, rows: g.rows ?? null, bytes: g.bytes ?? null })),
  }
}

/** One WAL entry, as read by a {@link WalTailer}. */
export interface WalEntry {
  /** 1-based position. */
  position: number
  /** Epoch of the writer that appended it. */
  writerEpoch: number
  /** A fence sentinel (written by a new writer; no rows). */
  isSentinel: boolean
  /** The entry's rows; `null` for a sentinel. */
  table: Table | null
}
