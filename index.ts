/**
 * memwal: a durable, write-ahead-logged MemTable of Apache Arrow record batches.
 *
 * A {@link ShardWriter} owns one shard. In durable mode `await writer.put(batches)` resolves
 * only once those exact rows are in a WAL entry on the object store, so a crash loses nothing
 * it acknowledged. Rows are readable at once (`scan()`); full MemTables become immutable
 * Parquet generation files; a new writer of the same shard fences the old one, whose calls
 * then reject with a {@link FencedError}.
 *
 * This file is the public API: all of `lib/errors.ts`, whose every export is public, and a
 * curated list of exports from the rest of `lib/`. The semantics live in the Rust core; the
 * TypeScript layer over its binding checks arguments and options, encodes Arrow data at the
 * edge (column buffers, or IPC), settles the durable puts the binding acknowledges in batches,
 * and turns native errors into typed {@link MemWalError}s. Files: `errors.ts` (the typed
 * errors), `native-call.ts` (native calls, and their errors made typed), `arguments.ts`
 * (describing and checking arguments), `redact.ts` (credentials masked in messages),
 * `store.ts` (object stores, storage options), `encoding.ts` (put inputs; with
 * `arrow-schema.ts` and `arrow-columns.ts`, which read any apache-arrow copy's Schema and
 * batches by their structure), `options.ts`,
 * `types.ts` (results and statistics, declared once in the binding), `metrics.ts` (statistics
 * in the Prometheus text format), `deadline.ts` (a call's
 * `signal` and `timeoutMs`), `writer.ts`, `reader.ts`
 * (reader and tailer), `events.ts` (writer events), `logger.ts` (the core's logs to the application's logger), `gc.ts` (garbage collection on demand), `durable.ts` (the durable-acknowledgement registry) and `yield.ts`.
 *
 * @packageDocumentation
 */

export * from './lib/errors.js'
export {
  type Location,
  ObjectStore,
  type ShardInfo,
  type StallOptions,
  type StorageOptions,
  type StoreActor,
  type StoreCall,
  StoreFaults,
  type StoreObject,
  type StoreOp,
  StoreStall,
  dropMemoryStore,
} from './lib/store.js'
export type { ArrowDataType, ArrowField, ArrowSchema } from './lib/arrow-schema.js'
export type { ArrowRecordBatch, ArrowTable, PutData } from './lib/encoding.js'
export { DEFAULT_SHARD_NAME } from './lib/options.js'
export type { CloseOptions, FlushOptions, GcOptions, PutOptions, ShardOptions, ShardWriterOptions } from './lib/options.js'
export type {
  CostedWriteResult,
  FlushedGeneration,
  GenerationFile,
  LatencySummary,
  MemTableStats,
  OpenStats,
  OperationStats,
  OperationsStats,
  PutNoWaitResult,
  ShardHolder,
  ShardManifest,
  StoreRequestStats,
  WalEntry,
  WalEntryCost,
  WalStats,
  WriteResult,
  WriteStats,
} from './lib/types.js'
export { ShardWriter } from './lib/writer.js'
export { formatMetrics, type MetricsSource } from './lib/metrics.js'
export type {
  BackpressureEvent,
  CompactionEvent,
  GenerationFlushedEvent,
  RetryEvent,
  ShardWriterEvents,
  WalAppendEvent,
} from './lib/events.js'
export { ShardReader, WalTailer, type FollowOptions } from './lib/reader.js'
export { collectGarbage, type GcReport } from './lib/gc.js'
export { type LogLevel, type LogRecord, type Logger, type SetLoggerOptions, setLogger } from './lib/logger.js'
