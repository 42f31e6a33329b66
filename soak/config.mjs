// What the soak writes and how its writers are configured: small MemTables, so that it
// rotates often and leaves many small generations for compaction, and quick garbage collection,
// so that a short run sees it work.

import { Field, Int64, Schema, TimestampMillisecond, Utf8 } from 'apache-arrow'

export const SHARD = 'soak'

export const schema = new Schema([
  new Field('id', new Int64(), false),
  new Field('ts', new TimestampMillisecond(), false),
  new Field('payload', new Utf8(), false),
])

export const WRITER_OPTIONS = {
  maxMemtableSize: 1024 * 1024,
  maxMemtableAgeMs: 10_000,
  gcIntervalMs: 1_000,
  gcGraceMs: 5_000,
  compactionMaxGenerations: 8,
  compactionTargetBytes: 16 * 1024 * 1024,
}
