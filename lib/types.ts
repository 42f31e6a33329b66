// The result types of the API. Those the binding returns as they are (results, statistics,
// the manifest) are declared once, in the binding (`crates/memwal-node/src/convert.rs`, whose
// doc comments napi-rs writes into `binding.d.ts`), and re-exported here; the two declared
// here hold JavaScript values the binding cannot produce (a promise, an Arrow Table).

import type { Table } from 'apache-arrow'

import type { WriteResult } from '../native.js'

export type {
  FlushedGeneration,
  GenerationFile,
  MemTableStats,
  OpenStats,
  WalStats,
  WriteResult,
  WriteStats,
} from '../native.js'
export type { ShardHolder, ShardManifest } from './holder.js'

/** What {@link ShardWriter.putNoWait} returns. */
export interface PutNoWaitResult {
  /** Where the rows went (they are in memory already). */
  result: WriteResult
  /** Resolves when the rows are durable; `null` in non-durable mode. */
  durable: Promise<void> | null
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
