// W8, "events as users write them": 1-row puts of an event object, each timed for its whole
// cost, the input built inside the timed call the way an application builds it per request.
// memwal takes the plain object (`put([event])`, converted in Rust against the shard's schema)
// and, separately, a Table built per event with apache-arrow's `tableFromArrays` (the shape
// the README showed before plain objects); the peers take the same event the way their own
// docs show it. W8e puts 768-wide Float32Array embeddings.
//
// Every cell also reports the JavaScript thread's busy time per put (event-loop utilisation
// over the measured window divided by the puts): what a put costs the service's one thread.

import crypto from 'node:crypto'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { performance } from 'node:perf_hooks'

import { closedLoopOf } from './closed-loop.mjs'
import { layoutName } from './plan.mjs'
import { isLanceCommitConflict, walLayout } from './stores.mjs'

const require = createRequire(import.meta.url)

/** The embedding width of W8e. */
export const EMBEDDING_DIM = 768

const USERS = Array.from({ length: 1024 }, (_, i) => `user-${String(i).padStart(5, '0')}`)
const PAYLOADS = Array.from({ length: 256 }, () => crypto.randomBytes(35).toString('hex'))

/** The event of put `seq` by client `c`: about 100 B (8 B id, 8 B ts, ~10 B user, 70 B payload). */
export function makeEvent(c, seq) {
  return {
    id: c * 1e9 + seq,
    ts: new Date(),
    user: USERS[(c * 31 + seq) % USERS.length],
    payload: PAYLOADS[seq % PAYLOADS.length],
  }
}

/** Bytes of one event as the MB/s figures count it. */
export const EVENT_BYTES = 100

/** Precomputed embeddings (a model's output exists before the put; the put is what is timed). */
const EMBEDDINGS = Array.from({ length: 64 }, (_, i) => {
  const v = new Float32Array(EMBEDDING_DIM)
  for (let j = 0; j < EMBEDDING_DIM; j++) v[j] = Math.sin(i * 7 + j)
  return v
})

/** The embedding row of put `seq` by client `c`. */
export function makeEmbeddingRow(c, seq) {
  return { id: c * 1e9 + seq, embedding: EMBEDDINGS[(c + seq) % EMBEDDINGS.length] }
}

/** The shard schemas, from memwal's own apache-arrow. */
function schemas(arrow) {
  const { Field, Schema, Int64, TimestampMillisecond, Utf8, FixedSizeList, Float32 } = arrow
  return {
    events: new Schema([
      new Field('id', new Int64(), false),
      new Field('ts', new TimestampMillisecond(), false),
      new Field('user', new Utf8(), false),
      new Field('payload', new Utf8(), false),
    ]),
    embeddings: new Schema([
      new Field('id', new Int64(), false),
      new Field('embedding', new FixedSizeList(EMBEDDING_DIM, new Field('item', new Float32(), false)), false),
    ]),
  }
}

/** The Table a user builds per event with `tableFromArrays` (column types as it infers them). */
function eventTable(arrow, e) {
  return arrow.tableFromArrays({ id: [e.id], ts: [e.ts], user: [e.user], payload: [e.payload] })
}

/**
 * The W8 adapters: `open(dir, { durable, kind })` returns `{ put(c, seq), counters(), close(),
 * writer? }`, with `kind` 'events' or 'embeddings'. `mods` are the loaded modules (`memwal`,
 * `arrow21` (memwal's apache-arrow), `arrow18` (LanceDB's), `lancedbEntry`); memwal's
 * plain-object events are also offered on each WAL layout of `layouts` (null: the default).
 */
export function eventStores(mods, layouts = [null]) {
  const { ShardWriter } = mods.memwal
  const arrow = mods.arrow21
  const s = schemas(arrow)
  const lanceSchemas = schemas(mods.arrow18)
  const memwal = (input, layout = null) => ({
    async open(dir, { durable, kind }) {
      let schema = s[kind]
      if (input === 'tableFromArrays') schema = eventTable(arrow, makeEvent(0, 0)).schema
      const w = await ShardWriter.open(dir, { schema, durableWrite: durable, ...walLayout(layout) })
      const row = kind === 'events' ? makeEvent : makeEmbeddingRow
      return {
        writer: w,
        put:
          input === 'objects'
            ? (c, seq) => w.put([row(c, seq)])
            : (c, seq) => w.put(eventTable(arrow, makeEvent(c, seq))),
        counters: () => w.stats(),
        close: () => w.close(),
      }
    },
  })
  const layoutStores = Object.fromEntries(
    layouts.filter((l) => l !== null).map((l) => [layoutName('memwal objects', l), memwal('objects', l)]),
  )
  return {
    'memwal objects': memwal('objects'),
    ...layoutStores,
    'memwal tableFromArrays': memwal('tableFromArrays'),
    'better-sqlite3': {
      async open(dir, { durable, kind }) {
        const Database = require('better-sqlite3')
        fs.mkdirSync(dir, { recursive: true })
        const db = new Database(path.join(dir, 'events.sqlite'))
        db.pragma('journal_mode = WAL')
        db.pragma(`synchronous = ${durable ? 'FULL' : 'NORMAL'}`)
        let put
        if (kind === 'events') {
          db.exec('CREATE TABLE e (id INTEGER NOT NULL, ts INTEGER NOT NULL, user TEXT NOT NULL, payload TEXT NOT NULL)')
          const ins = db.prepare('INSERT INTO e (id, ts, user, payload) VALUES (@id, @ts, @user, @payload)')
          put = (c, seq) => {
            const e = makeEvent(c, seq)
            ins.run({ id: e.id, ts: e.ts.getTime(), user: e.user, payload: e.payload })
          }
        } else {
          db.exec('CREATE TABLE v (id INTEGER NOT NULL, embedding BLOB NOT NULL)')
          const ins = db.prepare('INSERT INTO v (id, embedding) VALUES (?, ?)')
          put = (c, seq) => {
            const r = makeEmbeddingRow(c, seq)
            ins.run(r.id, Buffer.from(r.embedding.buffer, r.embedding.byteOffset, r.embedding.byteLength))
          }
        }
        return { put, counters: () => null, close: async () => db.close() }
      },
    },
    lmdb: {
      async open(dir, { durable, kind }) {
        const { open } = require('lmdb')
        const db = open({ path: dir })
        const row = kind === 'events' ? makeEvent : makeEmbeddingRow
        return {
          put: async (c, seq) => {
            const r = row(c, seq)
            await db.put(r.id, r)
            if (durable) await db.flushed
          },
          counters: () => null,
          close: () => db.close(),
        }
      },
    },
    'classic-level': {
      async open(dir, { durable, kind }) {
        if (kind !== 'events') return null
        const { ClassicLevel } = require('classic-level')
        const db = new ClassicLevel(dir, { valueEncoding: 'json' })
        await db.open()
        const opts = { sync: durable }
        return {
          put: (c, seq) => {
            const e = makeEvent(c, seq)
            return db.put(String(e.id), e, opts)
          },
          counters: () => null,
          close: () => db.close(),
        }
      },
    },
    lancedb: {
      async open(dir, { durable, kind }) {
        if (!durable) return null
        const lancedb = require(mods.lancedbEntry)
        const conn = await lancedb.connect(dir)
        const row = kind === 'events' ? makeEvent : makeEmbeddingRow
        // LanceDB infers no type for a Date, so its table gets the schema, in its own apache-arrow.
        const table = await conn.createEmptyTable('t', lanceSchemas[kind])
        return {
          put: (c, seq) => table.add([row(c, seq)]),
          counters: () => null,
          close: async () => {
            table.close()
            conn.close()
          },
        }
      },
    },
  }
}

/**
 * One W8 cell: `clients` closed-loop clients of store `name`, each put building its input.
 * Returns the cell's record, or null if the store does not take this kind or mode. `edges`, if
 * given (or a promise of it, awaited once the store is open), has its `start()` and `stop()`
 * called at the measured window's edges.
 */
export async function eventCell(stores, name, { dir, kind, durable, clients, warmupMs, measureMs, edges: edgesReady = null }) {
  const [s, edges] = await Promise.all([stores[name].open(dir, { durable, kind }), edgesReady])
  if (s === null) return null
  let elu0 = null
  let elu = null
  const res = await closedLoopOf(s, {
    clients,
    warmupMs,
    measureMs,
    hooks: {
      start: () => {
        edges?.start()
        elu0 = performance.eventLoopUtilization()
        return s.counters()
      },
      end: () => {
        elu = performance.eventLoopUtilization(elu0)
        const snap = s.counters()
        edges?.stop()
        return snap
      },
    },
    tolerated: name === 'lancedb' ? isLanceCommitConflict : undefined,
  })
  const putsPerSec = res.ops / res.seconds
  const rowBytes = kind === 'events' ? EVENT_BYTES : EMBEDDING_DIM * 4
  const entries =
    res.startSnap && res.endSnap ? res.endSnap.walFlushCount - res.startSnap.walFlushCount : null
  return {
    workload: kind === 'events' ? 'W8' : 'W8e',
    store: name,
    kind,
    rows: 1,
    clients,
    durable,
    label: null,
    ops: res.ops,
    measuredSeconds: res.seconds,
    putsPerSec,
    rowsPerSec: putsPerSec,
    mbPerSec: (putsPerSec * rowBytes) / 1e6,
    latencyUs: res.latencyUs,
    // The JavaScript thread's busy time per put: event-loop utilisation over the window.
    jsThreadUsPerPut: elu && res.ops ? (elu.active * 1000) / res.ops : null,
    eventLoopUtilization: elu?.utilization ?? null,
    walEntries: entries,
    putsPerWalEntry: entries ? (res.endSnap.putCount - res.startSnap.putCount) / entries : null,
    errors: res.errors,
    firstError: res.firstError ?? null,
    tolerated: res.tolerated ?? 0,
    firstTolerated: res.firstTolerated ?? null,
  }
}
