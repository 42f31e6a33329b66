// Garbage collection and tailers that survive it, through the API a
// service uses: collectGarbage, writer.collectGarbage and the `gc*` options, TruncatedError,
// WalTailer.firstPosition and follow(). What is kept and why fencing holds is tested in the
// core (crates/memwal-core/tests/gc.rs); here, that the JavaScript surface says it right.

import { readdirSync } from 'node:fs'
import { join } from 'node:path'

import test from 'ava'

import {
  AbortError,
  InvalidArgumentError,
  ShardReader,
  ShardWriter,
  TruncatedError,
  type WalEntry,
  WalTailer,
  collectGarbage,
} from '../index'
import { ids, rows, schema, tempDir } from './support/helpers'

/** The WAL files of the one shard in `dir`. */
function walFiles(dir: string): string[] {
  const shard = readdirSync(join(dir, '_mem_wal'))[0] ?? ''
  return readdirSync(join(dir, '_mem_wal', shard, 'wal')).filter((n) => n.endsWith('.arrow'))
}

/** A shard at `dir` whose writer made `n` one-row durable puts and closed (flushing them). */
async function flushedShard(dir: string, n: number): Promise<void> {
  const w = await ShardWriter.open(dir, { schema, gc: false })
  for (let i = 0; i < n; i++) await w.put(rows([i]))
  await w.close()
}

test('collectGarbage removes WAL entries whose rows are flushed; every row stays readable', async (t) => {
  const dir = tempDir(t)
  await flushedShard(dir, 5)
  t.is(walFiles(dir).length, 5)

  const dry = await collectGarbage(dir, { dryRun: true })
  t.like(dry, { dryRun: true, lowWater: 5, walEntriesRemoved: 5, walEntriesKept: 0 })
  t.is(walFiles(dir).length, 5, 'a dry run removes nothing')

  const report = await collectGarbage(dir)
  t.like(report, { dryRun: false, lowWater: 5, walEntriesRemoved: 5, manifestVersionsRemoved: 0 })
  t.true(report.bytesRemoved > 0)
  t.deepEqual(walFiles(dir), [])
  const reader = await ShardReader.open(dir)
  t.deepEqual(ids(await reader.scan()), [0, 1, 2, 3, 4])
  t.is((await reader.manifest()).walLowWater, 5)

  // The next writer appends after the mark, and keeps every row.
  const w = await ShardWriter.open(dir, { schema, gc: false })
  await w.put(rows([5]))
  t.deepEqual(ids(await w.scan()), [0, 1, 2, 3, 4, 5])
  await w.close()
})

test('a writer collects on demand and in the background, and keeps fence sentinels', async (t) => {
  const dir = tempDir(t)
  await flushedShard(dir, 3)
  // Epoch 2 fences epoch 1 with a sentinel at 4 and writes nothing; epoch 3's sentinel is 5.
  await flushedShard(dir, 0)
  const w = await ShardWriter.open(dir, { schema, gc: false, gcKeepManifestVersions: 2 })
  const report = await w.collectGarbage()
  // The mark is 3: entries 1-2 go, entry 3 (just before sentinel 4) stays.
  t.like(report, { lowWater: 3, walEntriesRemoved: 2, walEntriesKept: 1 })
  t.true(report.manifestVersionsRemoved > 0)
  await w.close()

  const background = await ShardWriter.open(dir, { schema, gcIntervalMs: 10, maxMemtableBatches: 1 })
  await background.put(rows([10]))
  await background.put(rows([11]))
  // Each put fills a MemTable, whose flush raises the mark past its entry; the collector then
  // removes entries below the mark that no sentinel needs. Waits on the effect, not a clock.
  const written = walFiles(dir).length
  while (walFiles(dir).length >= written) {
    await new Promise((r) => setTimeout(r, 10))
  }
  t.true(((await background.manifest())?.walLowWater ?? 0) > 3)
  await background.close()
  t.deepEqual(ids(await (await ShardReader.open(dir)).scan()).sort((a, b) => a - b), [0, 1, 2, 10, 11])
})

test('a tailer reading a collected position gets a TruncatedError saying where to resume', async (t) => {
  const dir = tempDir(t)
  await flushedShard(dir, 4)
  await collectGarbage(dir)
  const tailer = await WalTailer.open(dir)
  const e = await t.throwsAsync(tailer.read(2), {
    instanceOf: TruncatedError,
    code: 'TRUNCATED',
    message: /WAL entry 2 of shard .* was removed by garbage collection.*first available position is 5/,
  })
  t.is(e?.firstAvailable, 5)
  t.is(await tailer.firstPosition(), 5)
  t.is(await tailer.nextPosition(), 5)
  await tailer.verify()
  // follow() from a collected position rejects the same way, naming where to go on.
  await t.throwsAsync(tailer.follow({ from: 1 }).next(), { instanceOf: TruncatedError })
})

test('follow() yields entries as they land and resumes from a saved position', async (t) => {
  const dir = tempDir(t)
  const w = await ShardWriter.open(dir, { schema, gc: false })
  await w.put(rows([1]))
  const tailer = await WalTailer.open(dir)
  const controller = new AbortController()
  const seen: WalEntry[] = []
  const following = (async () => {
    for await (const entry of tailer.follow({ pollIntervalMs: 5, signal: controller.signal })) {
      seen.push(entry)
      if (seen.length === 3) controller.abort()
    }
  })()
  // Entries 2 and 3 land after the loop started waiting.
  await w.put(rows([2]))
  await w.put(rows([3]))
  await t.throwsAsync(following, { instanceOf: AbortError })
  t.deepEqual(
    seen.map((e) => e.position),
    [1, 2, 3],
  )
  t.deepEqual(
    seen.map((e) => (e.table === null ? [] : ids(e.table))),
    [[1], [2], [3]],
  )

  // A restart resumes after the last entry it handled.
  const saved = (seen[1]?.position ?? 0) + 1
  const resumed: number[] = []
  for await (const entry of tailer.follow({ from: saved })) {
    resumed.push(...(entry.table === null ? [] : ids(entry.table)))
    break
  }
  t.deepEqual(resumed, [3])
  await w.close()
})

test('bad GC and follow options are InvalidArgumentErrors that name the option', async (t) => {
  const dir = tempDir(t)
  await flushedShard(dir, 1)
  await t.throwsAsync(collectGarbage(dir, { keepManifestVersions: 1 }), {
    instanceOf: InvalidArgumentError,
    message: /keepManifestVersions must be at least 2, got 1/,
  })
  await t.throwsAsync(collectGarbage(dir, { graceMs: -1 }), { instanceOf: InvalidArgumentError, message: /graceMs/ })
  await t.throwsAsync(collectGarbage(dir, { dryRun: 'yes' as unknown as boolean }), {
    instanceOf: InvalidArgumentError,
    message: /invalid option dryRun: expected a boolean, got string "yes"/,
  })
  await t.throwsAsync(collectGarbage(dir, { nope: 1 } as object), {
    instanceOf: InvalidArgumentError,
    message: /unknown option `nope`/,
  })
  await t.throwsAsync(collectGarbage(dir, { shard: 'missing' }), { instanceOf: InvalidArgumentError, message: /no shard `missing`/ })
  await t.throwsAsync(ShardWriter.open(dir, { schema, gcKeepManifestVersions: 1 }), {
    instanceOf: InvalidArgumentError,
    message: /gcKeepManifestVersions must be between 2/,
  })
  await t.throwsAsync(ShardWriter.open(dir, { schema, gcIntervalMs: 0 }), {
    instanceOf: InvalidArgumentError,
    message: /gcIntervalMs must be between 1/,
  })
  const tailer = await WalTailer.open(dir)
  await t.throwsAsync(tailer.follow({ pollIntervalMs: 0 }).next(), {
    instanceOf: InvalidArgumentError,
    message: /follow: pollIntervalMs must be an integer from 1 to 60000, got number 0/,
  })
  await t.throwsAsync(tailer.follow({ from: 0 }).next(), { instanceOf: InvalidArgumentError, message: /from must be/ })
})

test('compaction merges small generations; scans and the file list show every row once', async (t) => {
  const dir = tempDir(t)
  const w = await ShardWriter.open(dir, { schema, gc: false, maxMemtableBatches: 1, compactionMaxGenerations: 3 })
  for (let i = 0; i < 8; i++) await w.put(rows([i]))
  await w.close()
  const reader = await ShardReader.open(dir)
  const files = await reader.files()
  t.true(files.length <= 3, `${files.length} generation files`)
  t.is(
    files.reduce((n, f) => n + (f.rows ?? 0), 0),
    8,
  )
  t.deepEqual(ids(await reader.scan()), [0, 1, 2, 3, 4, 5, 6, 7])
  // The replaced files go with the next collection once the grace period has passed.
  t.true((await reader.uncommittedGenerations()).length > 0)
  const report = await collectGarbage(dir, { graceMs: 0 })
  t.true(report.generationDirsRemoved.length > 0)
  t.deepEqual(await reader.uncommittedGenerations(), [])
  t.deepEqual(ids(await reader.scan()), [0, 1, 2, 3, 4, 5, 6, 7])
  await t.throwsAsync(ShardWriter.open(dir, { schema, compactionMaxGenerations: 1 }), {
    instanceOf: InvalidArgumentError,
    message: /compactionMaxGenerations must be between 2/,
  })
})
