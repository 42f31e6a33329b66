// Bad input to object stores and their fault hooks: ObjectStore factories given a wrong type,
// an empty or unsupported location, a regular file, a path that does not exist, a name too long
// for the file system or holding a NUL byte, and store.faults given bad counts and flags.
// Part of the bad-input matrix (its
// shared shard and intact check are in support/seeded-shard.ts).
//
// Cells already covered in errors.spec.ts are not repeated here: a location under a regular
// file, failWalPuts(-1) and failWalPuts(NaN).

import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { randomUUID } from 'node:crypto'

import test from 'ava'

import { InvalidArgumentError, IoError, ObjectStore, ShardReader, ShardWriter, WalTailer } from '../index'
import { rows, schema, tempDir } from './support/helpers'
import { SEEDED, assertIntact, seed } from './support/seeded-shard'

test('ObjectStore factories reject a wrong type or an empty location with INVALID_ARGUMENT', (t) => {
  for (const bad of [42, undefined, null, {}, ['a'], Symbol.iterator]) {
    t.throws(() => ObjectStore.local(bad as never), {
      instanceOf: InvalidArgumentError,
      code: 'INVALID_ARGUMENT',
      message: /ObjectStore\.local\(dir\) expects a string/,
    })
    t.throws(() => ObjectStore.fromUri(bad as never), {
      instanceOf: InvalidArgumentError,
      code: 'INVALID_ARGUMENT',
      message: /ObjectStore\.fromUri\(uri\) expects a string/,
    })
  }
  t.throws(() => ObjectStore.local(''), { instanceOf: InvalidArgumentError, message: /path is empty/ })
  t.throws(() => ObjectStore.fromUri(''), { instanceOf: InvalidArgumentError, message: /location is empty/ })
  t.throws(() => ObjectStore.fromUri('ftp://host/x'), {
    instanceOf: InvalidArgumentError,
    message: /unsupported location scheme `ftp:\/\/`/,
  })
  t.throws(() => ObjectStore.fromUri('file://'), { instanceOf: InvalidArgumentError, message: /must be absolute/ })
  // memory() takes no input: extra arguments are ignored, and each store is still private.
  const memory = ObjectStore.memory as (...args: unknown[]) => ObjectStore
  t.is(memory(42, 'x').location, 'memory://')
})

test('ObjectStore.local of a regular file is INVALID_ARGUMENT, and a store under one fails with IO', async (t) => {
  const dir = tempDir(t)
  const file = join(dir, 'a-file')
  writeFileSync(file, 'x')
  t.throws(() => ObjectStore.local(file), {
    instanceOf: InvalidArgumentError,
    code: 'INVALID_ARGUMENT',
    message: /exists but is not a directory/,
  })
  await t.throwsAsync(ObjectStore.local(join(file, 'x')).listShards(), {
    instanceOf: IoError,
    code: 'IO',
    message: /Not a directory/,
  })
  t.is(readFileSync(file, 'utf8'), 'x')
})

test('a store at a path that does not exist lists no shards, its readers find none, and nothing is created', async (t) => {
  const missing = join(tempDir(t), 'no', 'such', 'dir')
  t.deepEqual(await ObjectStore.local(missing).listShards(), [])
  await t.throwsAsync(ShardReader.open(missing, { shardId: randomUUID() }), {
    instanceOf: InvalidArgumentError,
    code: 'INVALID_ARGUMENT',
    message: /no shard/,
  })
  const tailer = await WalTailer.open(missing, { shardId: randomUUID() })
  t.is(await tailer.nextPosition(), 1)
  t.is(await tailer.read(1), null)
  t.false(existsSync(missing), 'readers never create the directory')
  // A writer creates it on its first write (documented).
  const shardId = await seed(missing)
  await assertIntact(t, missing, shardId)
})

test('a location name too long for the file system is IO, one with a NUL byte INVALID_ARGUMENT, and neither writes anything', async (t) => {
  const dir = tempDir(t)
  await t.throwsAsync(ShardWriter.open(join(dir, 'a'.repeat(300)), { schema }), {
    instanceOf: IoError,
    code: 'IO',
    message: /File name too long/,
  })
  await t.throwsAsync(ShardWriter.open(join(dir, 'a\0b'), { schema }), {
    instanceOf: InvalidArgumentError,
    code: 'INVALID_ARGUMENT',
    message: /NUL/,
  })
  t.deepEqual(readdirSync(dir), [])
  // A huge memory:// name is only a name.
  const huge = `memory://${'x'.repeat(1 << 20)}`
  const shardId = await seed(huge)
  await assertIntact(t, huge, shardId)
})

test('store.faults rejects a wrong type, NaN, a negative, a fraction or a giant count with INVALID_ARGUMENT and stays off', async (t) => {
  const store = ObjectStore.memory()
  const shardId = await seed(store)
  for (const bad of ['3', undefined, null, {}, true]) {
    t.throws(() => store.faults.failWalPuts(bad as never), {
      instanceOf: InvalidArgumentError,
      code: 'INVALID_ARGUMENT',
      message: /failWalPuts\(n\) expects a number/,
    })
  }
  for (const bad of [1.5, -Infinity, 2 ** 53, 1e300]) {
    t.throws(() => store.faults.failWalPuts(bad), {
      instanceOf: InvalidArgumentError,
      message: /n must be a non-negative integer or Infinity/,
    })
  }
  for (const bad of ['yes', 1, undefined, null]) {
    t.throws(() => store.faults.setLostAck(bad as never), {
      instanceOf: InvalidArgumentError,
      code: 'INVALID_ARGUMENT',
      message: /setLostAck\(on\) expects a boolean/,
    })
  }
  // No fault was switched on: a durable put succeeds at its first attempt.
  const attempts = store.faults.walPutAttempts()
  const w = await ShardWriter.open(store, { schema, shardId, maxWalFlushIntervalMs: null, maxWalPersistRetries: 0 })
  await w.put(rows([6]))
  t.is(store.faults.walPutAttempts(), attempts + 2, 'the fence sentinel and the put, each at the first attempt')
  await w.abort()
  await assertIntact(t, store, shardId, [...SEEDED, 6])
})
