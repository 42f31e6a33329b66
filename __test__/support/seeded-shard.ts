// The shard the bad-input specs (bad_input_*.spec.ts) start from, and their check that it is
// intact. Those specs put every public entry point against a wrong type, empty input, huge
// input, the wrong schema, bad config values, a closed writer, a missing path, a read-only
// directory and a corrupt manifest. Each bad call must fail with a typed MemWalError (class,
// code and a message that says what was wrong), and the shard must be intact afterwards: a
// reader and a new writer see exactly the rows they saw before.

import type { ExecutionContext } from 'ava'

import { ShardReader, ShardWriter, type Location } from '../../index'
import { ids, rows, schema } from './helpers'

/** The rows of a {@link seed}ed shard. */
export const SEEDED = [1, 2, 3, 4, 5]

/** A shard holding rows 1..3 in a flushed generation and 4..5 only in the WAL. */
export async function seed(location: Location): Promise<string> {
  const w = await ShardWriter.open(location, { schema, maxWalFlushIntervalMs: null })
  await w.put(rows([1, 2]))
  await w.put(rows([3]))
  await w.forceSealActive()
  await w.waitForFlushDrain()
  await w.put(rows([4, 5]))
  await w.abort()
  return w.shardId
}

/** The shard's current epoch, read without claiming anything. */
export async function epochOf(location: Location, shardId: string): Promise<number> {
  return (await (await ShardReader.open(location, { shardId })).manifest()).writerEpoch
}

/** A reader and then a new writer both see exactly `expected`. */
export async function assertIntact(
  t: ExecutionContext,
  location: Location,
  shardId: string,
  expected = SEEDED,
): Promise<void> {
  const r = await ShardReader.open(location, { shardId })
  t.deepEqual(ids(await r.scan()), expected, 'a reader sees the rows from before the bad call')
  const w = await ShardWriter.open(location, { schema, shardId, maxWalFlushIntervalMs: null })
  t.deepEqual(ids(await w.scan()), expected, 'a new writer recovers the rows from before the bad call')
  await w.abort()
}

/**
 * Seeds a shard at `location`, makes `badCalls` against it (given its id and epoch), then checks
 * that they claimed no epoch and left the shard intact.
 */
export async function assertClaimsNothing(
  t: ExecutionContext,
  location: Location,
  badCalls: (shardId: string, epoch: number) => Promise<void>,
): Promise<void> {
  const shardId = await seed(location)
  const epoch = await epochOf(location, shardId)
  await badCalls(shardId, epoch)
  t.is(await epochOf(location, shardId), epoch, 'no epoch was claimed')
  await assertIntact(t, location, shardId)
}
