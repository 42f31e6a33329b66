// The result types of the API. Those the binding returns as they are (results, statistics,
// the manifest) are declared once, in the binding (`crates/memwal-node/src/convert.rs`, whose
// doc comments napi-rs writes into `binding.d.ts`), and re-exported here; the two declared
// here hold JavaScript values the binding cannot produce (a promise, an Arrow Table).

import type { Table } from 'apache-arrow'

import type { WriteResult } from '../native.js'

export type {
  FlushedGeneration,
  GenerationFile,
  LatencySummary,
  MemTableStats,
  OpenStats,
  OperationStats,
  OperationsStats,
  StoreRequestStats,
  WalStats,
  WriteResult,
  WriteStats,
} from '../native.js'
export type { ShardHolder, ShardManifest } from './holder.js'

/**
 * What the WAL entry that made a put's rows durable cost ({@link PutOptions.cost}). Puts that
 * one entry acknowledged together see the same numbers.
 */
export interface WalEntryCost {
  /** The entry's WAL position. */
  position: number
  /**
   * Object-store requests its append made (1 when the first PUT succeeds; retries and
   * read-backs add to it); 0 when an earlier append (a timer, `flush()`) had already written
   * the put's rows and this acknowledgement cost nothing more.
   */
  requests: number
  /** Bytes those requests sent and received. */
  bytes: number
  /** Durable puts this entry acknowledged together (the group-commit factor it achieved). */
  puts: number
}

/** What {@link ShardWriter.put} resolves with when asked for its cost ({@link PutOptions.cost}). */
export interface CostedWriteResult extends WriteResult {
  /** The WAL entry's cost; `null` in non-durable mode and for a retry of a remembered `requestId`. */
  walEntry: WalEntryCost | null
}

/** What {@link ShardWriter.putNoWait} returns. */
export interface PutNoWaitResult {
  /** Where the rows went (they are in memory already). */
  result: WriteResult
  /** Resolves when the rows are durable; `null` in non-durable mode. */
  durable: Promise<void> | null
}

/** One WAL entry, as read by a {@link WalTailer}. */
export interface WalEntry {
  /** 1-based WAL position. */
  position: number
  /** Epoch of the writer that appended it. */
  writerEpoch: number
  /** A fence sentinel (written by a new writer; no rows). */
  isSentinel: boolean
  /** The entry's rows; `null` for a sentinel. */
  table: Table | null
}
