// Bad input to ShardReader.open, WalTailer.open and WalTailer.read, and the check that readers
// never write. Part of the bad-input matrix (its
// shared shard and intact check are in support/seeded-shard.ts).
//
// Cells already covered in errors.spec.ts are not repeated here: a missing shard for readers.

import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { randomUUID } from 'node:crypto'

import test from 'ava'

import { InvalidArgumentError, ObjectStore, ShardReader, WalTailer } from '../index'
import { ids, tempDir } from './support/helpers'
import { assertIntact, seed } from './support/seeded-shard'

test('ShardReader.open and WalTailer.open reject a wrong location, options or shard id with INVALID_ARGUMENT', async (t) => {
  const store = ObjectStore.memory()
  const shardId = await seed(store)
  for (const open of [ShardReader.open, WalTailer.open] as const) {
    for (const bad of [null, 42, {}, []]) {
      await t.throwsAsync(open(bad as never, { shardId }), {
        instanceOf: InvalidArgumentError,
        code: 'INVALID_ARGUMENT',
        message: /location must be a path/,
      })
    }
    for (const bad of [null, shardId, 42, []]) {
      await t.throwsAsync(open(store, bad as never), {
        instanceOf: InvalidArgumentError,
        message: /expected an options object \(or none\)/,
      })
    }
    // No options, or none naming a shard: the shard named `default`, which seed() wrote.
    for (const none of [undefined, {}]) t.truthy(await open(store, none))
    for (const bad of [{ shardId: 42 }]) {
      await t.throwsAsync(open(store, bad as never), {
        instanceOf: InvalidArgumentError,
        message: /options\.shardId expects a string/,
      })
    }
    for (const bad of ['', 'not-a-uuid', 'x'.repeat(100_000)]) {
      await t.throwsAsync(open(store, { shardId: bad }), { instanceOf: InvalidArgumentError, message: /is not a UUID/ })
    }
    for (const unknown of ['limit', 'shardID']) {
      await t.throwsAsync(open(store, { shardId, [unknown]: shardId } as never), {
        instanceOf: InvalidArgumentError,
        message: new RegExp(`unknown option \`${unknown}\`; known options: shard, shardId`),
      })
    }
  }
  await assertIntact(t, store, shardId)
})

test('WalTailer.read rejects a wrong type, zero, a negative, a fraction, NaN and a position past 2^53 with INVALID_ARGUMENT', async (t) => {
  const store = ObjectStore.memory()
  const shardId = await seed(store)
  const tailer = await WalTailer.open(store, { shardId })
  for (const bad of ['1', undefined, null, 1n, {}]) {
    await t.throwsAsync(tailer.read(bad as never), {
      instanceOf: InvalidArgumentError,
      code: 'INVALID_ARGUMENT',
      message: /read\(position\) expects a number/,
    })
  }
  for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, 2 ** 53, 1e300]) {
    await t.throwsAsync(
      tailer.read(bad),
      {
        instanceOf: InvalidArgumentError,
        code: 'INVALID_ARGUMENT',
        message: /position must be an integer from 1 to 9007199254740991/,
      },
      String(bad),
    )
  }
  t.is(await tailer.read(Number.MAX_SAFE_INTEGER), null, 'the largest exact position simply holds no entry')
  t.deepEqual(ids((await tailer.read(3))!.table!), [4, 5])
  await assertIntact(t, store, shardId)
})

test('readers never write: a reader and a tailer leave every file of the store as it was', async (t) => {
  const dir = tempDir(t)
  const shardId = await seed(dir)
  const snapshot = () => {
    const out: string[] = []
    const walk = (d: string) => {
      for (const f of readdirSync(d, { withFileTypes: true })) {
        const p = join(d, f.name)
        if (f.isDirectory()) walk(p)
        else out.push(`${p} ${statSync(p).size} ${statSync(p).mtimeMs}`)
      }
    }
    walk(dir)
    return out.sort()
  }
  const before = snapshot()
  const r = await ShardReader.open(dir, { shardId })
  await r.scan()
  await r.manifest()
  const tailer = await WalTailer.open(dir, { shardId })
  for (let p = 1; p <= (await tailer.nextPosition()); p++) await tailer.read(p)
  await ObjectStore.local(dir).listShards()
  await t.throwsAsync(ShardReader.open(dir, { shardId: randomUUID() }), { instanceOf: InvalidArgumentError })
  t.deepEqual(snapshot(), before)
})
