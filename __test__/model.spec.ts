// memwal against a model of its guarantees, across crashes, faults and peer claims. fast-check
// generates sequences of commands on two shards of one in-memory store, `d` (durable writer)
// and `n` (non-durable writer), runs them against memwal and against a small model (the puts
// each shard holds, in order, with what is known of their durability), and shrinks a failure
// to a minimal sequence.
//
// The model: a put acknowledged as durable (a durable put or putNoWait's `durable` resolved;
// a non-durable put followed by a resolved flush() or seal + drain) is recovered exactly once,
// in order, by every later writer; other puts are recovered whole or not at all, and only as a
// prefix (nothing after a lost put survives); a put rejected by a fenced or poisoned writer, or
// made on a stale writer, never appears. A WAL fault (`failWalPuts(Infinity)`) makes the next
// WAL append fail: the put or flush that needed it rejects with FencedError
// PersistenceFailure and the writer is poisoned (every later call rejects the same way) until
// the shard is reopened. After a peer claims the shard, the old writer rejects with FencedError
// PeerClaimedEpoch at its first call that notices (a durable put, a flush, checkFenced,
// forceSealActive), and every call after that.
//
// It runs on both WAL layouts. On objects the store is in memory, with WAL faults; the segment
// log needs a local directory, and its appends bypass the store's fault injection (the Rust
// power-loss and stall tests fail its syncs and race its claims), so there it runs every command
// but the faults.
//
// `npm test` makes 100 runs on objects and 20 on segments (each of those syncs a real disk)
// with a fixed seed; `npm run test:long` (MEMWAL_LONG=1) runs 10,000 on each with a random seed.
// MEMWAL_SEED and MEMWAL_MODEL_RUNS override these. The seed is printed; fast-check's failure
// report also gives the `path` to replay the exact case.

import { strict as assert } from 'node:assert'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import test, { type ExecutionContext } from 'ava'
import fc from 'fast-check'
import { RecordBatch } from 'apache-arrow'

import {
  FencedError,
  IoError,
  ObjectStore,
  ShardReader,
  ShardWriter,
  type FenceReason,
  type ShardWriterOptions,
} from '../index'
import { LONG, ids, layoutOptions, rows, runCount, schema, type WalLayout } from './support/helpers'

const RUNS: Record<WalLayout, number> = {
  objects: runCount('MEMWAL_MODEL_RUNS', { ci: 100, long: 10_000 }),
  segments: runCount('MEMWAL_MODEL_RUNS', { ci: 20, long: 10_000 }),
}
const CI_SEED = 20_251_202
const SEED = Number(process.env.MEMWAL_SEED ?? (LONG ? Math.floor(Math.random() * 2 ** 31) : CI_SEED))

type Kind = 'd' | 'n'
type Status = 'durable' | 'pending' | 'failed'

interface PutModel {
  ids: number[]
  status: Status
}

interface ShardModel {
  puts: PutModel[]
  /** The writer's latched terminal error, if any. */
  poisoned: FenceReason | null
}

interface Model {
  shards: Record<Kind, ShardModel>
  faults: boolean
  nextId: number
  /** Ids that must never appear: rejected before insert, or written by a stale writer. */
  never: Set<number>
}

interface Real {
  store: ObjectStore
  layout: WalLayout
  writers: Record<Kind, ShardWriter>
}

/** Shard `kind` as the model sees it (`s`) and its real writer (`w`). */
function shardOf(m: Model, r: Real, kind: Kind): { s: ShardModel; w: ShardWriter } {
  return { s: m.shards[kind], w: r.writers[kind] }
}

// No ticker and no size trigger: non-durable rows reach the WAL only through flush(), a seal or
// close(), so the model knows when. `d` rotates every 3 batches on its own.
const OPTIONS: Record<Kind, Omit<ShardWriterOptions, 'schema'>> = {
  d: { maxWalFlushIntervalMs: null, maxWalPersistRetries: 0, walPersistRetryBaseDelayMs: 1, maxMemtableBatches: 3 },
  n: {
    durableWrite: false,
    maxWalFlushIntervalMs: null,
    maxWalBufferSize: 0,
    maxWalPersistRetries: 0,
    walPersistRetryBaseDelayMs: 1,
  },
}

function open(r: Real, kind: Kind, shardId: string): Promise<ShardWriter> {
  return ShardWriter.open(r.store, { schema, shardId, ...OPTIONS[kind], ...layoutOptions(r.layout) })
}

/** Ids for a new put, split over `batches` record batches. */
function newPut(m: Model, n: number, batches: number): { ids: number[]; data: RecordBatch[] } {
  const all = Array.from({ length: n }, (_, i) => m.nextId + i)
  m.nextId += n
  const data: RecordBatch[] = []
  const per = Math.ceil(n / batches)
  for (let i = 0; i < n; i += per) data.push(...rows(all.slice(i, i + per)).batches)
  return { ids: all, data }
}

/** Awaits a rejection with a FencedError of the given reason. */
async function rejectsFenced(p: Promise<unknown>, reason: FenceReason, what: string): Promise<void> {
  await assert.rejects(
    p,
    (e: unknown) => {
      assert.ok(e instanceof FencedError, `${what}: expected a FencedError, got ${String(e)}`)
      assert.equal(e.code, 'FENCED')
      assert.equal(e.fenceReason, reason, `${what}: ${e.message}`)
      return true
    },
    `${what} must reject with FencedError ${reason}`,
  )
}

const allIds = (puts: PutModel[]) => puts.flatMap((p) => p.ids)

/**
 * Checks the rows a new writer recovered against the model: durable puts exactly once, other
 * puts whole or absent, as a prefix, in order; nothing else. Returns the puts recovered.
 */
function checkRecovered(m: Model, kind: Kind, got: number[]): PutModel[] {
  const puts = m.shards[kind].puts
  const recovered: PutModel[] = []
  let i = 0
  let lost = null as PutModel | null
  for (const p of puts) {
    const here = got.slice(i, i + p.ids.length)
    if (here.length === p.ids.length && here.every((id, k) => id === p.ids[k])) {
      assert.equal(lost, null, `shard ${kind}: put [${p.ids}] was recovered after put [${lost?.ids}] was lost (a hole)`)
      recovered.push({ ids: p.ids, status: 'durable' })
      i += p.ids.length
    } else {
      assert.notEqual(p.status, 'durable', `shard ${kind}: durable put [${p.ids}] is missing; recovered [${got}]`)
      lost ??= p
    }
  }
  assert.equal(i, got.length, `shard ${kind}: recovered [${got}], expected a prefix-closed subset of [${allIds(puts)}]`)
  for (const id of got) assert.ok(!m.never.has(id), `shard ${kind}: row ${id} must never appear`)
  return recovered
}

/** Reads the shard with a ShardReader, then opens a new writer; both must agree and match the model. */
async function reopenAndCheck(m: Model, r: Real, kind: Kind, shardId: string): Promise<ShardWriter> {
  const reader = await ShardReader.open(r.store, { shardId })
  const fromReader = ids(await reader.scan())
  const w = await open(r, kind, shardId)
  const got = ids(await w.scan())
  assert.deepEqual(fromReader, got, `shard ${kind}: ShardReader and a new writer disagree`)
  m.shards[kind] = { puts: checkRecovered(m, kind, got), poisoned: null }
  return w
}

/** A put or putNoWait with `n` rows in `batches` batches. */
class PutCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly kind: Kind,
    readonly noWait: boolean,
    readonly n: number,
    readonly batches: number,
  ) {}
  check = () => true
  async run(m: Model, r: Real): Promise<void> {
    const { s, w } = shardOf(m, r, this.kind)
    const put = newPut(m, this.n, this.batches)
    if (s.poisoned !== null) {
      m.never = new Set([...m.never, ...put.ids])
      await rejectsFenced(this.noWait ? w.putNoWait(put.data) : w.put(put.data), s.poisoned, 'a put on a fenced writer')
      return
    }
    if (this.kind === 'n') {
      if (this.noWait) {
        const res = await w.putNoWait(put.data)
        assert.equal(res.durable, null, 'putNoWait has no durable promise in non-durable mode')
      } else {
        await w.put(put.data)
      }
      s.puts.push({ ids: put.ids, status: 'pending' })
      return
    }
    let durable: Promise<unknown>
    if (this.noWait) {
      // The rows are in memory when putNoWait resolves, whatever happens to the WAL append.
      const res = await w.putNoWait(put.data)
      assert.ok(res.durable instanceof Promise, 'putNoWait has a durable promise in durable mode')
      durable = res.durable
    } else {
      durable = w.put(put.data)
    }
    if (!m.faults) {
      await durable
      s.puts.push({ ids: put.ids, status: 'durable' })
      return
    }
    await rejectsFenced(durable, 'PersistenceFailure', 'a durable put with WAL faults')
    s.puts.push({ ids: put.ids, status: 'failed' })
    s.poisoned = 'PersistenceFailure'
  }
  toString = () => `${this.kind}.${this.noWait ? 'putNoWait' : 'put'}(${this.n} rows in ${this.batches} batches)`
}

/**
 * Several puts at once (group commit on `d`). They may be inserted in any order, but each
 * whole; a scan afterwards tells the model the order.
 */
class ConcurrentPutsCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly kind: Kind,
    readonly sizes: number[],
  ) {}
  check = () => true
  async run(m: Model, r: Real): Promise<void> {
    const { s, w } = shardOf(m, r, this.kind)
    const puts = this.sizes.map((n) => newPut(m, n, 1))
    const settled = await Promise.allSettled(puts.map((p) => w.put(p.data)))
    if (s.poisoned !== null || (m.faults && this.kind === 'd')) {
      const reason = s.poisoned ?? 'PersistenceFailure'
      for (const [i, res] of settled.entries()) {
        await rejectsFenced(
          res.status === 'rejected' ? Promise.reject(res.reason) : Promise.resolve(res.value),
          reason,
          `concurrent put ${i}`,
        )
      }
      if (s.poisoned !== null) m.never = new Set([...m.never, ...puts.flatMap((p) => p.ids)])
      else for (const p of puts) s.puts.push({ ids: p.ids, status: 'failed' })
      s.poisoned = reason
      return
    }
    for (const res of settled) {
      if (res.status === 'rejected') throw res.reason
    }
    const got = ids(await w.scan())
    const known = allIds(s.puts)
    assert.deepEqual(got.slice(0, known.length), known, `${this}: the rows before the puts changed`)
    let rest = got.slice(known.length)
    const left = new Map(puts.map((p) => [p.ids[0]!, p.ids]))
    while (rest.length > 0) {
      const p = left.get(rest[0]!)
      assert.ok(p !== undefined, `${this}: unexpected rows [${rest}]`)
      assert.deepEqual(rest.slice(0, p.length), p, `${this}: a put is not whole`)
      left.delete(p[0]!)
      s.puts.push({ ids: p, status: this.kind === 'd' ? 'durable' : 'pending' })
      rest = rest.slice(p.length)
    }
    assert.equal(left.size, 0, `${this}: puts missing from the scan`)
  }
  toString = () => `${this.kind}.concurrentPuts([${this.sizes}])`
}

/** flush(), or forceSealActive() + waitForFlushDrain(): pending rows become durable. */
class SyncCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly kind: Kind,
    readonly seal: boolean,
  ) {}
  check = () => true
  async run(m: Model, r: Real): Promise<void> {
    const { s, w } = shardOf(m, r, this.kind)
    if (s.poisoned !== null) {
      await rejectsFenced(this.seal ? w.forceSealActive() : w.flush(), s.poisoned, `${this} on a fenced writer`)
      if (this.seal) await rejectsFenced(w.waitForFlushDrain(), s.poisoned, 'a drain on a fenced writer')
      return
    }
    const pending = s.puts.some((p) => p.status === 'pending')
    if (m.faults && pending) {
      if (this.seal) {
        await w.forceSealActive()
        await rejectsFenced(w.waitForFlushDrain(), 'PersistenceFailure', 'a drain with WAL faults')
      } else {
        await rejectsFenced(w.flush(), 'PersistenceFailure', 'a flush with WAL faults')
      }
      s.poisoned = 'PersistenceFailure'
      return
    }
    // Nothing to append (or no faults): it resolves.
    if (this.seal) {
      await w.forceSealActive()
      await w.waitForFlushDrain()
    } else {
      await w.flush()
    }
    for (const p of s.puts) p.status = 'durable'
  }
  toString = () => `${this.kind}.${this.seal ? 'forceSealActive+waitForFlushDrain' : 'flush'}()`
}

/** scan(): durable mode shows the durable rows, non-durable mode every inserted row. */
class ScanCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly kind: Kind) {}
  check = () => true
  async run(m: Model, r: Real): Promise<void> {
    const { s, w } = shardOf(m, r, this.kind)
    if (s.poisoned !== null) {
      await rejectsFenced(w.scan(), s.poisoned, 'a scan on a fenced writer')
      return
    }
    assert.deepEqual(ids(await w.scan()), allIds(s.puts), `${this.kind}.scan()`)
  }
  toString = () => `${this.kind}.scan()`
}

/** abort() (a crash: nothing more is flushed), then a new writer replays the shard. */
class CrashReopenCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly kind: Kind) {}
  check = (m: Readonly<Model>) => !m.faults
  async run(m: Model, r: Real): Promise<void> {
    const old = r.writers[this.kind]
    await old.abort()
    r.writers[this.kind] = await reopenAndCheck(m, r, this.kind, old.shardId)
  }
  toString = () => `${this.kind}.abort()+reopen`
}

/** close() (everything becomes durable), then a new writer replays the shard. */
class CloseReopenCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly kind: Kind) {}
  check = (m: Readonly<Model>) => !m.faults
  async run(m: Model, r: Real): Promise<void> {
    const s = m.shards[this.kind]
    const old = r.writers[this.kind]
    if (s.poisoned !== null) {
      await rejectsFenced(old.close(), s.poisoned, 'close of a fenced writer')
    } else {
      await old.close()
      for (const p of s.puts) p.status = 'durable'
    }
    r.writers[this.kind] = await reopenAndCheck(m, r, this.kind, old.shardId)
  }
  toString = () => `${this.kind}.close()+reopen`
}

/** With WAL faults on, a new writer cannot write its fence sentinel: open rejects with IO. */
class ReopenWhileFaultyCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly kind: Kind) {}
  check = (m: Readonly<Model>) => m.faults
  async run(m: Model, r: Real): Promise<void> {
    const old = r.writers[this.kind]
    await old.abort()
    await assert.rejects(
      open(r, this.kind, old.shardId),
      (e: unknown) => {
        assert.ok(e instanceof IoError, `open with WAL faults: expected an IoError, got ${String(e)}`)
        assert.match(e.message, /fence sentinel/)
        return true
      },
      'open with WAL faults must reject with IoError',
    )
    r.store.faults.recover()
    m.faults = false
    r.writers[this.kind] = await reopenAndCheck(m, r, this.kind, old.shardId)
  }
  toString = () => `${this.kind}.abort()+open(rejects)+recover+reopen`
}

/**
 * A second writer claims the shard while the first is still open; the first must find out
 * at `probe` and reject everything from then on; nothing it writes afterwards appears.
 */
class PeerClaimCommand implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly kind: Kind,
    readonly probe: 'put' | 'checkFenced' | 'forceSealActive',
  ) {}
  check = (m: Readonly<Model>) => !m.faults
  async run(m: Model, r: Real): Promise<void> {
    const s = m.shards[this.kind]
    const old = r.writers[this.kind]
    const latched = s.poisoned
    const next = await reopenAndCheck(m, r, this.kind, old.shardId)
    r.writers[this.kind] = next
    const after = ids(await next.scan())
    // The stale writer: its first call that notices reports the peer (or its own earlier
    // failure, which stays latched), and so does every call after it.
    const reason: FenceReason = latched ?? 'PeerClaimedEpoch'
    const stale = newPut(m, 1, 1)
    m.never = new Set([...m.never, ...stale.ids])
    if (this.probe === 'put') {
      if (this.kind === 'n' && latched === null) {
        await old.put(stale.data) // in memory only; its flush must fail
        await rejectsFenced(old.flush(), reason, 'the stale writer’s flush')
      } else {
        await rejectsFenced(old.put(stale.data), reason, 'the stale writer’s durable put')
      }
    } else if (this.probe === 'checkFenced') {
      await rejectsFenced(old.checkFenced(), 'PeerClaimedEpoch', 'checkFenced on the stale writer')
    } else {
      await rejectsFenced(old.forceSealActive(), reason, 'forceSealActive on the stale writer')
    }
    const more = newPut(m, 1, 1)
    m.never = new Set([...m.never, ...more.ids])
    await rejectsFenced(old.put(more.data), reason, 'a put on the stale writer after it was fenced')
    await rejectsFenced(old.putNoWait(more.data), reason, 'a putNoWait on the stale writer after it was fenced')
    await rejectsFenced(old.flush(), reason, 'a flush on the stale writer after it was fenced')
    await rejectsFenced(old.scan(), reason, 'a scan on the stale writer after it was fenced')
    await old.abort()
    assert.deepEqual(ids(await next.scan()), after, 'the stale writer changed nothing')
  }
  toString = () => `${this.kind}.peerClaim(stale writer probed by ${this.probe})`
}

class FaultsCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly on: boolean) {}
  check = (m: Readonly<Model>) => m.faults !== this.on
  async run(m: Model, r: Real): Promise<void> {
    if (this.on) r.store.faults.failWalPuts(Infinity)
    else r.store.faults.recover()
    m.faults = this.on
  }
  toString = () => (this.on ? 'faults.failWalPuts(Infinity)' : 'faults.recover()')
}

const kind = fc.constantFrom<Kind>('d', 'n')
const put = fc
  .record({ kind, noWait: fc.boolean(), n: fc.integer({ min: 1, max: 4 }), batches: fc.integer({ min: 1, max: 3 }) })
  .map(({ kind, noWait, n, batches }) => new PutCommand(kind, noWait, n, Math.min(n, batches)))
const sync = fc.tuple(kind, fc.boolean()).map(([k, seal]) => new SyncCommand(k, seal))
const scan = kind.map((k) => new ScanCommand(k))
const concurrent = fc
  .tuple(kind, fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 2, maxLength: 12 }))
  .map(([k, sizes]) => new ConcurrentPutsCommand(k, sizes))
/**
 * The commands of a run on `layout`: WAL faults only where the store can inject them. Puts are
 * the most frequent command (listed several times), then flushes, seals and scans. The objects
 * layout's list is in its original order, so that the fixed seed replays the cases it always has.
 */
function commandsFor(layout: WalLayout): Array<fc.Arbitrary<fc.AsyncCommand<Model, Real>>> {
  const faults = layout === 'objects'
  return [
    put,
    put,
    put,
    put,
    concurrent,
    concurrent,
    sync,
    sync,
    scan,
    scan,
    kind.map((k) => new CrashReopenCommand(k)),
    kind.map((k) => new CloseReopenCommand(k)),
    ...(faults ? [kind.map((k) => new ReopenWhileFaultyCommand(k))] : []),
    fc
      .tuple(kind, fc.constantFrom('put' as const, 'checkFenced' as const, 'forceSealActive' as const))
      .map(([k, p]) => new PeerClaimCommand(k, p)),
    ...(faults ? [fc.boolean().map((on) => new FaultsCommand(on))] : []),
  ]
}

/** A fresh store for one run on `layout`, and how to dispose of it. */
function storeFor(layout: WalLayout): { store: ObjectStore; dispose: () => void } {
  if (layout === 'objects') return { store: ObjectStore.memory(), dispose: () => undefined }
  const dir = mkdtempSync(join(tmpdir(), 'memwal-model-'))
  return { store: ObjectStore.local(dir), dispose: () => rmSync(dir, { recursive: true, force: true }) }
}

/** The model-based test on shards of `layout`. */
async function modelTest(t: ExecutionContext, layout: WalLayout): Promise<void> {
  const runs = RUNS[layout]
  t.log(`model-based test on ${layout}: ${runs} runs, seed ${SEED} (rerun with MEMWAL_SEED=${SEED})`)
  t.timeout(Math.max(120_000, runs * 500))
  const started = Date.now()
  let executed = 0
  const counts = new Map<string, number>()
  await fc.assert(
    fc.asyncProperty(fc.commands(commandsFor(layout), { maxCommands: 60, size: 'max' }), async (cmds) => {
      const { store, dispose } = storeFor(layout)
      const writers = {
        d: await ShardWriter.open(store, { schema, shard: 'durable', ...OPTIONS.d, ...layoutOptions(layout) }),
        n: await ShardWriter.open(store, { schema, shard: 'non-durable', ...OPTIONS.n, ...layoutOptions(layout) }),
      }
      const real: Real = { store, layout, writers }
      const model: Model = {
        shards: { d: { puts: [], poisoned: null }, n: { puts: [], poisoned: null } },
        faults: false,
        nextId: 0,
        never: new Set(),
      }
      try {
        await fc.asyncModelRun(() => ({ model, real }), cmds)
        executed++
        for (const c of cmds) {
          const name = String(c).replace(/\(.*$/, '')
          counts.set(name, (counts.get(name) ?? 0) + 1)
        }
      } finally {
        store.faults.recover()
        await Promise.all([real.writers.d.abort(), real.writers.n.abort()])
        dispose()
      }
    }),
    { seed: SEED, numRuns: runs, includeErrorInReport: true },
  )
  t.log(`${executed} runs passed in ${((Date.now() - started) / 1000).toFixed(1)} s`)
  t.log(`commands generated: ${[...counts].map(([k, v]) => `${k} ${v}`).join(', ')}`)
  t.pass()
}

test('memwal follows the model of acknowledged, pending and fenced puts across crashes, faults and peer claims (objects layout)', async (t) => {
  await modelTest(t, 'objects')
})

test('memwal follows the model of acknowledged, pending and fenced puts across crashes and peer claims (segments layout)', async (t) => {
  await modelTest(t, 'segments')
})
