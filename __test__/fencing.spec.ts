import { hostname } from 'node:os'
import { join } from 'node:path'

import test from 'ava'

import { FencedError, ShardWriter, ShardReader, type Location, type ShardHolder } from '../index'
import { runProcess } from './support/child-process'
import { ids, memoryLocation, rows, schema, tempDir } from './support/helpers'

const config = { maxWalFlushIntervalMs: null, maxMemtableSize: 64 << 20 }

async function regression(t: import('ava').ExecutionContext, location: Location) {
  const a = await ShardWriter.open(location, { schema, ...config })
  await a.put(rows([1]))
  const g = (await a.memtableStats()).generation
  await a.forceSealActive()
  await a.waitForFlushDrain()
  t.is((await a.memtableStats()).generation, g + 1)

  const b = await ShardWriter.open(location, { schema, shardId: a.shardId, ...config })
  t.true(b.epoch > a.epoch)

  // The first durable put of the new generation has local range 0..1 like the flushed one;
  // it must fail with its own append's fence, not be acknowledged by the old watermark.
  const e = await t.throwsAsync(a.put(rows([2])), { instanceOf: FencedError, code: 'FENCED' })
  t.is(e?.fenceReason, 'PeerClaimedEpoch')
  t.regex(e?.message ?? '', /^Writer fenced \(peer claimed epoch\)/)
  await b.close()
  const r = await ShardReader.open(location, { shardId: a.shardId })
  t.deepEqual(ids(await r.scan()), [1])
}

test('a stale writer’s first durable put after a rotation rejects with FENCED on a memory:// store', async (t) => {
  await regression(t, memoryLocation())
})

test('a stale writer’s first durable put after a rotation rejects with FENCED on a temp directory', async (t) => {
  await regression(t, tempDir(t))
})

test('a second writer replays the first writer’s durable rows and fences it', async (t) => {
  const dir = tempDir(t)
  const a = await ShardWriter.open(dir, { schema })
  await a.put(rows([1, 2]))
  await a.put(rows([3]))
  // No close: the second writer takes over a live shard.
  const b = await ShardWriter.open(dir, { schema, shardId: a.shardId })
  t.deepEqual(ids(await b.scan()), [1, 2, 3])
  t.is((await b.walStats()).fenceSentinelPosition, 3)
  // Open reports its two phases: the claim (after which `a` is fenced), then the replay of
  // the two entries `a` left and b's own sentinel.
  t.like(a.openStats(), { replayedEntries: 0, replayedRows: 0 })
  const opened = b.openStats()
  t.like(opened, { replayedEntries: 3, replayedRows: 3 })
  t.true(opened.claimMs > 0 && opened.replayMs > 0, JSON.stringify(opened))
  const e = await t.throwsAsync(a.put(rows([4])), { instanceOf: FencedError })
  t.is(e?.fenceReason, 'PeerClaimedEpoch')
  // The fence is latched: every later call fails fast with the same typed error.
  await t.throwsAsync(a.scan(), { instanceOf: FencedError })
  await t.throwsAsync(a.checkFenced(), { instanceOf: FencedError })
  await b.put(rows([5]))
  t.deepEqual(ids(await b.scan()), [1, 2, 3, 5])
  await b.close()
  await t.throwsAsync(a.close(), { instanceOf: FencedError })
})

test('checkFenced reports a successor only after it claims the shard', async (t) => {
  const loc = memoryLocation()
  const a = await ShardWriter.open(loc, { schema })
  await t.notThrowsAsync(a.checkFenced())
  const b = await ShardWriter.open(loc, { schema, shardId: a.shardId })
  const e = await t.throwsAsync(a.checkFenced(), { instanceOf: FencedError })
  t.is(e?.fenceReason, 'PeerClaimedEpoch')
  await t.notThrowsAsync(b.checkFenced())
  await b.close()
})

test('a stale non-durable writer told by checkFenced or forceSealActive rejects every later call with FENCED', async (t) => {
  for (const probe of ['checkFenced', 'forceSealActive'] as const) {
    const loc = memoryLocation()
    const a = await ShardWriter.open(loc, { schema, durableWrite: false, maxWalFlushIntervalMs: null })
    await a.put(rows([1]))
    const b = await ShardWriter.open(loc, { schema, shardId: a.shardId })
    const seen = await t.throwsAsync(probe === 'checkFenced' ? a.checkFenced() : a.forceSealActive(), {
      instanceOf: FencedError,
      code: 'FENCED',
    })
    t.is(seen?.fenceReason, 'PeerClaimedEpoch', probe)
    // Without the latch a non-durable put would resolve: rows that can never become durable.
    const e = await t.throwsAsync(a.put(rows([2])), { instanceOf: FencedError, code: 'FENCED' }, probe)
    t.is(e?.fenceReason, 'PeerClaimedEpoch')
    await t.throwsAsync(a.putNoWait(rows([3])), { instanceOf: FencedError }, probe)
    await t.throwsAsync(a.scan(), { instanceOf: FencedError }, probe)
    await a.abort()
    t.deepEqual(ids(await b.scan()), [])
    await b.close()
  }
})

/** `e`'s message names `h` as the fence message does. */
function namesHolder(t: import('ava').ExecutionContext, e: FencedError | undefined, h: ShardHolder): void {
  t.deepEqual(e?.holder, h)
  t.true(
    e?.message.includes(
      `owned by writer ${h.writerId} on host ${h.host} pid ${h.pid} (epoch ${h.epoch}, claimed at ${h.claimedAt.toISOString()})`,
    ),
    e?.message,
  )
}

test('a FencedError names the successor: its writerId, host, pid, epoch and claim time', async (t) => {
  const dir = tempDir(t)
  const before = Date.now()
  const a = await ShardWriter.open(dir, { schema })
  await a.put(rows([1]))
  const b = await ShardWriter.open(dir, { schema, shardId: a.shardId })
  t.not(b.writerId, a.writerId)
  const claimedAt = (await b.manifest())?.holder?.claimedAt
  t.true(claimedAt instanceof Date && claimedAt.getTime() >= before && claimedAt.getTime() <= Date.now())
  const successor: ShardHolder = { writerId: b.writerId, host: hostname(), pid: process.pid, epoch: b.epoch, claimedAt: claimedAt! }
  const e = await t.throwsAsync(a.put(rows([2])), { instanceOf: FencedError, code: 'FENCED' })
  t.is(e?.fenceReason, 'PeerClaimedEpoch')
  t.regex(e?.message ?? '', /^Writer fenced \(peer claimed epoch\): /)
  namesHolder(t, e, successor)
  // The latched error names it too.
  namesHolder(t, await t.throwsAsync(a.checkFenced(), { instanceOf: FencedError }), successor)
  await b.close()
})

test('a FencedError names a successor in another process by its pid', async (t) => {
  const dir = tempDir(t)
  const a = await ShardWriter.open(dir, { schema })
  await a.put(rows([1]))
  const child = await runProcess(process.execPath, ['--import', 'tsx', join(__dirname, 'support', 'holder-child.ts'), dir, a.shardId], {
    cwd: join(__dirname, '..'),
  })
  t.is(child.code, 0, child.stderr)
  const c = JSON.parse(child.stdout) as { writerId: string; epoch: number; pid: number }
  t.not(c.pid, process.pid)
  const e = await t.throwsAsync(a.put(rows([2])), { instanceOf: FencedError, code: 'FENCED' })
  t.is(e?.fenceReason, 'PeerClaimedEpoch')
  t.like(e?.holder, { writerId: c.writerId, host: hostname(), pid: c.pid, epoch: c.epoch })
  const r = await ShardReader.open(dir, { shardId: a.shardId })
  const recorded = (await r.manifest()).holder
  t.truthy(recorded)
  namesHolder(t, e, recorded!)
})
