// Bad input to ShardWriter.open (a wrong location, options or schema, every option out of
// range, a schema differing only in nullability), and calls on a closed, aborted or WAL-only
// writer. Part of the bad-input matrix (its
// shared shard and intact check are in support/seeded-shard.ts).
//
// Cells already covered in errors.spec.ts are not repeated here: a reopen with an Int64
// schema, the first bad-config cases and put/flush/scan/forceSealActive/close after close().

import test from 'ava'
import { Schema, tableToIPC } from 'apache-arrow'

import { ClosedError, InvalidArgumentError, ObjectStore, SchemaMismatchError, ShardWriter } from '../index'
import { memoryLocation, nullableId, rows, schema } from './support/helpers'
import { assertClaimsNothing, assertIntact, seed } from './support/seeded-shard'

// ---------------------------------------------------------------------------------------------
// ShardWriter.open
// ---------------------------------------------------------------------------------------------

test('ShardWriter.open rejects a wrong location, options or schema type with INVALID_ARGUMENT and claims nothing', async (t) => {
  const store = ObjectStore.memory()
  await assertClaimsNothing(t, store, async (shardId) => {
    for (const bad of [null, undefined, 42, {}, [], new Uint8Array(1)]) {
      await t.throwsAsync(ShardWriter.open(bad as never, { schema, shardId }), {
        instanceOf: InvalidArgumentError,
        code: 'INVALID_ARGUMENT',
        message: /location must be a path, a URI .* or an ObjectStore/,
      })
    }
    for (const bad of [undefined, null, 'x', 42, [schema]]) {
      await t.throwsAsync(ShardWriter.open(store, bad as never), {
        instanceOf: InvalidArgumentError,
        message: /ShardWriter\.open needs an options object with a schema/,
      })
    }
    for (const bad of [undefined, 'id int', {}, schema.fields[0], rows([1]), tableToIPC(rows([1]), 'stream')]) {
      await t.throwsAsync(ShardWriter.open(store, { schema: bad as never, shardId }), {
        instanceOf: InvalidArgumentError,
        code: 'INVALID_ARGUMENT',
        message: /options\.schema must be an apache-arrow Schema/,
      })
    }
    await t.throwsAsync(ShardWriter.open(store, { schema: new Schema([]), shardId }), {
      instanceOf: InvalidArgumentError,
      message: /schema has no fields/,
    })
  })
})

test('ShardWriter.open rejects a Schema look-alike whose fields or types are not Arrow\'s with INVALID_ARGUMENT naming the field, and claims nothing', async (t) => {
  const store = ObjectStore.memory()
  const field = (type: unknown) => ({ name: 'x', nullable: true, type })
  const cases: [what: string, schema: unknown, message: RegExp][] = [
    ['a field that is a number', { fields: [42] }, /options\.schema field 0 is not an apache-arrow Schema: it is number 42, not a Field/],
    ['an unknown type id', { fields: [field({ typeId: 99 })] }, /options\.schema field 0 \(`x`\) is not an apache-arrow Schema: .*unknown type id 99/],
    ['a type that is a string', { fields: [field('Int32')] }, /options\.schema field 0 \(`x`\) is not an apache-arrow Schema: its type is string "Int32"/],
    ['metadata that is not a Map', { fields: [], metadata: { a: '1' } }, /options\.schema is not an apache-arrow Schema: its metadata is an object \(Object\), not a Map/],
    ['a list without its child', { fields: [field({ typeId: 12, children: [] })] }, /has 0 child fields/],
    ['a 12-bit integer', { fields: [field({ typeId: 2, bitWidth: 12, isSigned: true })] }, /field `x`: an integer cannot be 12 bits wide/],
    [
      'a dictionary keyed by strings',
      { fields: [field({ typeId: -1, indices: { typeId: 5 }, dictionary: { typeId: 5 }, isOrdered: false })] },
      /field `x`: a dictionary cannot be keyed by Utf8/,
    ],
    ['a time unit Arrow does not have', { fields: [field({ typeId: 10, unit: 9, timezone: null })] }, /field `x`: unknown time unit 9/],
  ]
  await assertClaimsNothing(t, store, async (shardId) => {
    for (const [what, bad, message] of cases) {
      await t.throwsAsync(ShardWriter.open(store, { schema: bad as never, shardId }), { instanceOf: InvalidArgumentError, code: 'INVALID_ARGUMENT', message }, what)
    }
  })
})

test('every option rejects NaN, a negative, Infinity, a fraction, a string or a giant value with INVALID_ARGUMENT naming it, and claims nothing', async (t) => {
  const store = ObjectStore.memory()
  await assertClaimsNothing(t, store, async (shardId) => {
    const numeric = [
      'maxWalBufferSize',
      'maxWalFlushIntervalMs',
      'maxWalPersistRetries',
      'walPersistRetryBaseDelayMs',
      'walSegmentBytes',
      'maxMemtableSize',
      'maxMemtableBatches',
      'maxMemtableAgeMs',
      'maxUnflushedMemtableBytes',
    ]
    for (const option of numeric) {
      for (const bad of [Number.NaN, -1, Number.POSITIVE_INFINITY, 1.5, '5', 2 ** 60, true]) {
        await t.throwsAsync(
          ShardWriter.open(store, { schema, shardId, [option]: bad } as never),
          { instanceOf: InvalidArgumentError, code: 'INVALID_ARGUMENT', message: new RegExp(`invalid option ${option}`) },
          `${option}: ${String(bad)}`,
        )
      }
    }
    const zeros: Array<[string, RegExp]> = [
      ['maxMemtableSize', /invalid config: maxMemtableSize must be at least 1 byte/],
      ['maxMemtableBatches', /invalid config: maxMemtableBatches must be between 1 and/],
      ['maxUnflushedMemtableBytes', /invalid config: maxUnflushedMemtableBytes must be at least 1 byte/],
      ['maxWalFlushIntervalMs', /invalid config: maxWalFlushIntervalMs must be between 1 and \d+ \(or null to disable the ticker\)/],
      ['maxMemtableAgeMs', /invalid config: maxMemtableAgeMs must be between 1 and \d+ \(7 days\), or null for size-only sealing/],
    ]
    for (const [option, message] of zeros) {
      await t.throwsAsync(ShardWriter.open(store, { schema, shardId, [option]: 0 } as never), {
        instanceOf: InvalidArgumentError,
        message,
      })
    }
    await t.throwsAsync(ShardWriter.open(store, { schema, shardId, maxWalPersistRetries: 2 ** 40 }), {
      instanceOf: InvalidArgumentError,
      message: /invalid option maxWalPersistRetries: must be between 0 and 64, got 1099511627776$/,
    })
    for (const bad of ['Segments', 'object', '', 42, null, true]) {
      await t.throwsAsync(ShardWriter.open(store, { schema, shardId, walLayout: bad } as never), {
        instanceOf: InvalidArgumentError,
        message: /^invalid option walLayout: must be 'segments' \(a local disk\) or 'objects'/,
      })
    }
    for (const option of ['durableWrite', 'enableMemtable', 'ignoreUnknownFields']) {
      for (const bad of ['yes', 1, null, Number.NaN]) {
        await t.throwsAsync(ShardWriter.open(store, { schema, shardId, [option]: bad } as never), {
          instanceOf: InvalidArgumentError,
          message: new RegExp(`invalid option ${option}: expected a boolean`),
        })
      }
    }
    for (const bad of [42, null, { id: shardId }]) {
      await t.throwsAsync(ShardWriter.open(store, { schema, shardId: bad } as never), {
        instanceOf: InvalidArgumentError,
        message: /options\.shardId expects a string/,
      })
    }
    for (const bad of ['', 'not-a-uuid', `${shardId}x`, 'x'.repeat(100_000)]) {
      await t.throwsAsync(ShardWriter.open(store, { schema, shardId: bad }), {
        instanceOf: InvalidArgumentError,
        message: /is not a UUID/,
      })
    }
    for (const unknown of ['shardID', 'durable', 'maxMemTableSize', '']) {
      await t.throwsAsync(ShardWriter.open(store, { schema, shardId, [unknown]: 1 } as never), {
        instanceOf: InvalidArgumentError,
        message: new RegExp(`unknown option \`${unknown}\`; known options: schema, shard, shardId`),
      })
    }
  })
})

test('an out-of-range option is rejected with a message that ends with the value given', async (t) => {
  const store = ObjectStore.memory()
  await assertClaimsNothing(t, store, async (shardId) => {
    const WEEK = 7 * 86_400_000
    const cases: Array<[string, number]> = [
      ['maxMemtableAgeMs', 0],
      ['maxMemtableAgeMs', WEEK + 1],
      ['maxMemtableAgeMs', -1],
      ['maxWalFlushIntervalMs', 0],
      ['maxMemtableSize', 0],
      ['maxMemtableBatches', 0],
      ['maxMemtableBatches', 2 ** 40],
      ['maxWalPersistRetries', 65],
      ['maxWalPersistRetries', 2 ** 40],
      ['walPersistRetryBaseDelayMs', 60_001],
      ['walSegmentBytes', 65_535],
      ['walSegmentBytes', 2 ** 30 + 1],
      ['maxUnflushedMemtableBytes', 0],
      ['requestIdRetentionMs', WEEK + 1],
      ['gcIntervalMs', 0],
      ['gcKeepManifestVersions', 1],
      ['gcGraceMs', WEEK + 1],
      ['compactionMaxGenerations', 1],
      ['compactionTargetBytes', 0],
      ['maxWalBufferSize', 1.5],
    ]
    for (const [option, value] of cases) {
      const e = await t.throwsAsync(ShardWriter.open(store, { schema, shardId, [option]: value } as never), {
        instanceOf: InvalidArgumentError,
      })
      t.true(e?.message.includes(option), `${option} = ${value}: names the option: ${e?.message}`)
      t.true(e?.message.endsWith(`, got ${value}`), `${option} = ${value}: ends with the value: ${e?.message}`)
    }
  })
})

test('reopening with a schema that differs only in nullability is SCHEMA_MISMATCH and claims nothing', async (t) => {
  const store = ObjectStore.memory()
  await assertClaimsNothing(t, store, async (shardId) => {
    await t.throwsAsync(ShardWriter.open(store, { schema: nullableId, shardId }), {
      instanceOf: SchemaMismatchError,
      code: 'SCHEMA_MISMATCH',
      message: /`id`/,
    })
  })
})

// ---------------------------------------------------------------------------------------------
// Closed writers and WAL-only writers
// ---------------------------------------------------------------------------------------------

test('every method of a closed or aborted writer rejects with CLOSED, and abort, close and disposal stay idempotent', async (t) => {
  for (const end of ['close', 'abort'] as const) {
    const store = ObjectStore.memory()
    const shardId = await seed(store)
    const w = await ShardWriter.open(store, { schema, shardId, maxWalFlushIntervalMs: null })
    await w[end]()
    const calls: Array<[string, () => Promise<unknown>]> = [
      ['put', () => w.put(rows([9]))],
      ['putNoWait', () => w.putNoWait(rows([9]))],
      ['flush', () => w.flush()],
      ['forceSealActive', () => w.forceSealActive()],
      ['waitForFlushDrain', () => w.waitForFlushDrain()],
      ['checkFenced', () => w.checkFenced()],
      ['memtableStats', () => w.memtableStats()],
      ['scan', () => w.scan()],
    ]
    for (const [name, call] of calls) {
      await t.throwsAsync(
        call(),
        { instanceOf: ClosedError, code: 'CLOSED', message: /is closed; open a new writer/ },
        `${name} after ${end}`,
      )
    }
    await t.notThrowsAsync(w.abort(), `abort after ${end}`)
    await t.notThrowsAsync(w.close(), `close after ${end}`)
    await t.notThrowsAsync(w[Symbol.asyncDispose](), `asyncDispose after ${end}`)
    await assertIntact(t, store, shardId)
  }
})

test('MemTable-only methods of a WAL-only writer are INVALID_ARGUMENT', async (t) => {
  const w = await ShardWriter.open(memoryLocation(), { schema, enableMemtable: false })
  const calls: Array<[string, () => Promise<unknown>]> = [
    ['putNoWait', () => w.putNoWait(rows([1]))],
    ['forceSealActive', () => w.forceSealActive()],
    ['waitForFlushDrain', () => w.waitForFlushDrain()],
    ['memtableStats', () => w.memtableStats()],
    ['scan', () => w.scan()],
  ]
  for (const [name, call] of calls) {
    await t.throwsAsync(
      call(),
      { instanceOf: InvalidArgumentError, code: 'INVALID_ARGUMENT', message: /WAL-only mode/ },
      name,
    )
  }
  await w.close()
})

test('put with bad options returns a rejected promise (it never throws) with INVALID_ARGUMENT, and writes nothing', async (t) => {
  const store = ObjectStore.memory()
  const shardId = await seed(store)
  const w = await ShardWriter.open(store, { schema, shardId })
  const bad: Array<[string, unknown]> = [
    ['unknown option', { timeoutMs: 5 }],
    ['requestId of the wrong type', { requestId: 7 }],
    ['options that are not an object', 'fast'],
  ]
  for (const [what, options] of bad) {
    let pending: Promise<unknown> | undefined
    t.notThrows(() => {
      pending = w.put(rows([9]), options as never)
    }, `${what}: put must not throw synchronously`)
    await t.throwsAsync(pending!, { instanceOf: InvalidArgumentError, code: 'INVALID_ARGUMENT' }, what)
  }
  t.is(w.stats().putCount, 0, 'no put was written')
  await w.close()
  await assertIntact(t, store, shardId)
})
