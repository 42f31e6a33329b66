// A store on disk that turns hostile: read-only directories (a writer cannot open, or its WAL
// stops accepting writes), and corrupt manifests (or a deleted manifest folder) at every entry
// point that needs one.
// Part of the bad-input matrix (its
// shared shard and intact check are in support/seeded-shard.ts).
//
// Cells already covered in errors.spec.ts are not repeated here: a corrupt manifest at
// ShardWriter.open and ShardReader.open.

import { execFileSync } from 'node:child_process'
import { chmodSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import test, { type ExecutionContext } from 'ava'

import { CorruptError, FencedError, IoError, MemWalError, ObjectStore, ShardReader, ShardWriter, WalTailer, collectGarbage } from '../index'
import { ids, rows, schema, tempDir } from './support/helpers'
import { SEEDED, assertClaimsNothing, assertIntact, seed } from './support/seeded-shard'

// ---------------------------------------------------------------------------------------------
// Read-only directories
// ---------------------------------------------------------------------------------------------

type ReadOnlyMode = 'chmod' | 'immutable' | 'not-a-directory'

/**
 * Makes `dirs` refuse new entries until the returned function (also run at teardown) undoes
 * it. As a regular user, `chmod a-w`. Tests run as root in CI, where mode bits do not deny
 * writes, so there the directories get the ext4 immutable attribute (`chattr +i`: nothing is
 * created or removed in them, reads still work). Where chattr is not available, the first
 * directory is moved away and replaced by a regular file, so writes (and reads) under it fail
 * with ENOTDIR: a write error, though not a read-only directory.
 */
function makeReadOnly(t: ExecutionContext, dirs: string[]): { mode: ReadOnlyMode; restore: () => void } {
  let mode: ReadOnlyMode = 'chmod'
  if (process.getuid?.() === 0) {
    try {
      execFileSync('chattr', ['+i', ...dirs], { stdio: 'ignore' })
      mode = 'immutable'
    } catch {
      // Undo whatever part of it took effect (if chattr exists at all) before falling back.
      try {
        execFileSync('chattr', ['-f', '-i', ...dirs], { stdio: 'ignore' })
      } catch {
        // nothing was set
      }
      mode = 'not-a-directory'
    }
  }
  const top = dirs[0]!
  if (mode === 'chmod') for (const d of dirs) chmodSync(d, 0o555)
  if (mode === 'not-a-directory') {
    renameSync(top, `${top}.moved`)
    writeFileSync(top, '')
  }
  let done = false
  const restore = () => {
    if (done) return
    done = true
    if (mode === 'chmod') for (const d of dirs) chmodSync(d, 0o755)
    if (mode === 'immutable') execFileSync('chattr', ['-i', ...dirs], { stdio: 'ignore' })
    if (mode === 'not-a-directory') {
      rmSync(top)
      renameSync(`${top}.moved`, top)
    }
  }
  t.teardown(restore)
  return { mode, restore }
}

const WRITE_DENIED = /Permission denied|Operation not permitted|Not a directory/

/** Every directory of a local store holding one shard (`_mem_wal` first: see makeReadOnly). */
function storeDirs(dir: string, shardId: string): string[] {
  const shard = join(dir, '_mem_wal', shardId)
  return [join(dir, '_mem_wal'), shard, join(shard, 'manifest'), join(shard, 'wal'), dir]
}

test('in a read-only directory a writer cannot open (IO) and claims nothing, while readers still read', async (t) => {
  const dir = tempDir(t)
  await assertClaimsNothing(t, dir, async (shardId, epoch) => {
    const { mode, restore } = makeReadOnly(t, storeDirs(dir, shardId))
    t.log(`read-only by ${mode}`)
    await t.throwsAsync(ShardWriter.open(dir, { schema, shardId }), {
      instanceOf: IoError,
      code: 'IO',
      message: WRITE_DENIED,
    })
    await t.throwsAsync(ShardWriter.open(dir, { schema }), { instanceOf: IoError, code: 'IO', message: WRITE_DENIED })
    if (mode !== 'not-a-directory') {
      // Readers never write, so a read-only directory is no obstacle.
      t.deepEqual(await ObjectStore.local(dir).listShards(), [{ id: shardId, name: 'default' }])
      const r = await ShardReader.open(dir, { shardId })
      t.deepEqual(ids(await r.scan()), SEEDED)
      t.is((await r.manifest()).writerEpoch, epoch)
      const tailer = await WalTailer.open(dir, { shardId })
      t.is(await tailer.nextPosition(), 4)
      t.deepEqual(ids((await tailer.read(3))!.table!), [4, 5])
    }
    restore()
  })
})

test('a WAL directory that turns read-only fails durable puts and flushes with FENCED PersistenceFailure, and a reopen finds the shard intact', async (t) => {
  for (const durableWrite of [true, false]) {
    const dir = tempDir(t)
    const shardId = await seed(dir)
    const w = await ShardWriter.open(dir, {
      schema,
      shardId,
      durableWrite,
      maxWalFlushIntervalMs: null,
      maxWalPersistRetries: 1,
      walPersistRetryBaseDelayMs: 1,
    })
    const { mode, restore } = makeReadOnly(t, [join(dir, '_mem_wal', shardId, 'wal')])
    const write = durableWrite ? w.put(rows([6])) : w.put(rows([6])).then(() => w.flush())
    const e = await t.throwsAsync(
      write,
      { instanceOf: FencedError, code: 'FENCED', message: /WAL persistence failed/ },
      mode,
    )
    t.is(e?.fenceReason, 'PersistenceFailure')
    t.regex(e?.message ?? '', WRITE_DENIED)
    await t.throwsAsync(w.put(rows([7])), { instanceOf: FencedError }, 'the writer is poisoned')
    await w.abort()
    restore()
    await assertIntact(t, dir, shardId)
  }
})

// ---------------------------------------------------------------------------------------------
// Corrupt manifests
// ---------------------------------------------------------------------------------------------

test('a corrupt manifest is CORRUPT naming the object at every entry point that needs it, a tailer still finds the tip, and restoring it restores the shard', async (t) => {
  const dir = tempDir(t)
  const shardId = await seed(dir)
  const manifestDir = join(dir, '_mem_wal', shardId, 'manifest')
  const saved = new Map(readdirSync(manifestDir).map((f) => [f, readFileSync(join(manifestDir, f))]))
  const reader = await ShardReader.open(dir, { shardId })
  const tailer = await WalTailer.open(dir, { shardId })
  const w = await ShardWriter.open(dir, { schema, shardId, maxWalFlushIntervalMs: null })
  // The writer's claim added a version: keep it too.
  for (const f of readdirSync(manifestDir)) if (!saved.has(f)) saved.set(f, readFileSync(join(manifestDir, f)))
  const tip = await tailer.nextPosition()
  const corrupt: Array<[string, Buffer]> = [
    ['garbage', Buffer.from('not a protobuf at all, definitely corrupt')],
    ['an empty file', Buffer.alloc(0)],
    ['a truncated manifest', saved.get([...saved.keys()].find((f) => f.endsWith('.binpb'))!)!.subarray(0, 5)],
  ]
  for (const [what, bytes] of corrupt) {
    for (const f of saved.keys()) if (f.endsWith('.binpb')) writeFileSync(join(manifestDir, f), bytes)
    const calls: Array<[string, () => Promise<unknown>]> = [
      ['ShardWriter.open', () => ShardWriter.open(dir, { schema, shardId })],
      ['ShardReader.open', () => ShardReader.open(dir, { shardId })],
      ['reader.manifest', () => reader.manifest()],
      ['reader.scan', () => reader.scan()],
      ['writer.manifest', () => w.manifest()],
      ['writer.checkFenced', () => w.checkFenced()],
      ['writer.forceSealActive', () => w.forceSealActive()],
    ]
    for (const [name, call] of calls) {
      const e = await t.throwsAsync(
        call(),
        { instanceOf: CorruptError, code: 'CORRUPT', message: /Corrupt object .*manifest\/[01]{64}\.binpb/ },
        `${name} with ${what}`,
      )
      t.true(e instanceof MemWalError)
    }
    // A tailer does not need the manifest: the hint is only where its search for the tip
    // starts, so it still finds the tip and reads entries by position.
    t.is(await (await WalTailer.open(dir, { shardId })).nextPosition(), tip, `WalTailer.open + nextPosition with ${what}`)
    t.is(await tailer.nextPosition(), tip, `tailer.nextPosition with ${what}`)
    t.deepEqual(ids((await tailer.read(3))!.table!), [4, 5])
  }
  await w.abort()
  // A damaged version hint is only a hint.
  writeFileSync(join(manifestDir, 'version_hint.json'), '{"version": "garbage')
  for (const [f, bytes] of saved) if (f.endsWith('.binpb')) writeFileSync(join(manifestDir, f), bytes)
  t.deepEqual(
    readdirSync(manifestDir)
      .filter((f) => f.endsWith('.binpb'))
      .sort(),
    [...saved.keys()].filter((f) => f.endsWith('.binpb')).sort(),
    'no manifest version was written while the manifest was corrupt',
  )
  await assertIntact(t, dir, shardId)
})

test('a shard whose manifest folder was deleted is CORRUPT naming the folder at open, read and collection, writes nothing, and restoring the folder restores the shard', async (t) => {
  const dir = tempDir(t)
  const shardId = await seed(dir)
  const shardDir = join(dir, '_mem_wal', shardId)
  const manifestDir = join(shardDir, 'manifest')
  const saved = new Map(readdirSync(manifestDir).map((f) => [f, readFileSync(join(manifestDir, f))]))
  rmSync(manifestDir, { recursive: true })
  const listing = (): string[] => readdirSync(shardDir, { recursive: true }).map(String).sort()
  const before = listing()
  const calls: Array<[string, () => Promise<unknown>]> = [
    ['ShardWriter.open', () => ShardWriter.open(dir, { schema, shardId })],
    ['ShardReader.open', () => ShardReader.open(dir, { shardId })],
    ['collectGarbage', () => collectGarbage(dir, { shardId })],
  ]
  for (const [name, call] of calls) {
    await t.throwsAsync(
      call(),
      { instanceOf: CorruptError, code: 'CORRUPT', message: /Corrupt object .*manifest: .*Restore the folder from a backup/ },
      name,
    )
  }
  t.deepEqual(listing(), before, 'nothing was written while the manifest folder was missing')
  // A shard (whose name only its manifest knows), not a folder a first open left empty.
  t.deepEqual(await ObjectStore.local(dir).listShards(), [{ id: shardId, name: null }])
  t.deepEqual(await ObjectStore.local(dir).listIncompleteShards(), [])
  mkdirSync(manifestDir)
  for (const [f, bytes] of saved) writeFileSync(join(manifestDir, f), bytes)
  await assertIntact(t, dir, shardId)
})
