// One adapter per store. `open(dir, { durable, rows, clients, options })` returns a session:
//   put(client, seq) -> Promise | undefined   one put of `rows` rows by closed-loop client `client`
//   counters() -> object | null                 cumulative counters (memwal: writer.stats())
//   close() -> Promise
// Durable means: the put settles only once its rows survive a power loss (as far as the store
// promises it); see `durability` for what each store does (`nondurable`: what it does without).
// An adapter carries no name of its own: run.mjs's STORES names each one, once.

import fs from 'node:fs'
import fsp from 'node:fs/promises'
import { createRequire } from 'node:module'
import path from 'node:path'

import { RowSet } from './data.mjs'

const require = createRequire(import.meta.url)

/** The writer option selecting WAL layout `layout`, or none for the writer's default. */
export const walLayout = (layout) => (layout ? { walLayout: layout } : {})

/**
 * memwal: ShardWriter.put of prebuilt apache-arrow Tables. `layout` is the `walLayout` option
 * (null: the writer's default).
 */
export function memwalStore(mods, pools, layout = null) {
  const { ShardWriter } = mods.memwal
  return {
    durability:
      layout === 'segments'
        ? 'durable put: records appended into a preallocated segment, one fdatasync per group commit'
        : 'durable put: WAL entry created with O_TMPFILE + fdatasync + linkat + dir fsync',
    nondurable: 'durableWrite: false (resolves after the in-memory insert)',
    memwal: true,
    async open(dir, { durable, rows, options = {} }) {
      const pool = pools(rows)
      const w = await ShardWriter.open(dir, { schema: pools.schema, durableWrite: durable, ...walLayout(layout), ...options })
      let i = 0
      return {
        writer: w,
        put: (c) => w.put(pool[(i++ + c * 97) % pool.length]),
        counters: () => w.stats(),
        close: () => w.close(),
      }
    },
  }
}

/**
 * memwal taking plain-object rows built per put, `{ key, value, ts }` from the key/value peers'
 * row sets (W2's plain-object path: what a service writes without building Arrow itself).
 * `layout` as for {@link memwalStore}.
 */
export function memwalObjectsStore(mods, schema, layout = null) {
  const { ShardWriter } = mods.memwal
  return {
    durability: 'as memwal; rows given as plain objects, converted in Rust against the schema',
    nondurable: 'durableWrite: false',
    memwal: true,
    async open(dir, { durable, rows, clients, options = {} }) {
      const w = await ShardWriter.open(dir, { schema, durableWrite: durable, ...walLayout(layout), ...options })
      const write = (rs) => {
        const objects = new Array(rs.rows)
        for (let r = 0; r < rs.rows; r++) objects[r] = { key: rs.keys[r], value: rs.values72[r], ts: rs.ts + r }
        return w.put(objects)
      }
      return { ...rowSetSession(clientRowSets(rows, clients), write, () => w.close()), writer: w, counters: () => w.stats() }
    },
  }
}

/**
 * The raw floor in JavaScript: every put publishes a new file (open O_EXCL, write, fdatasync,
 * close, rename, fsync the directory) holding the put's Arrow IPC bytes. Concurrent puts are
 * group-committed the way a WAL does it: while one publish runs, new puts queue, and the next
 * publish carries all of them in one file.
 */
export function jsFloorStore(payloadFor) {
  return {
    durability: 'fs: write, fdatasync, rename, directory fsync (group commit)',
    async open(dir, { rows }) {
      fs.mkdirSync(dir, { recursive: true })
      const payload = payloadFor(rows)
      const dirHandle = await fsp.open(dir, 'r')
      let queue = []
      let busy = false
      let pos = 0
      let objects = 0
      let puts = 0
      const publish = async (body) => {
        const name = String(++pos).padStart(12, '0')
        const tmp = path.join(dir, `.tmp-${name}`)
        const fh = await fsp.open(tmp, 'wx')
        try {
          await fh.write(body)
          await fh.datasync()
        } finally {
          await fh.close()
        }
        await fsp.rename(tmp, path.join(dir, `${name}.arrow`))
        await dirHandle.sync()
        objects++
      }
      const pump = async () => {
        busy = true
        while (queue.length > 0) {
          const batch = queue
          queue = []
          const body = batch.length === 1 ? batch[0].payload : Buffer.concat(batch.map((b) => b.payload))
          try {
            await publish(body)
            puts += batch.length
            for (const b of batch) b.resolve()
          } catch (e) {
            for (const b of batch) b.reject(e)
          }
        }
        busy = false
      }
      return {
        put: () =>
          new Promise((resolve, reject) => {
            queue.push({ payload, resolve, reject })
            if (!busy) pump()
          }),
        counters: () => ({ walFlushCount: objects, durableRequests: puts }),
        close: () => dirHandle.close(),
      }
    },
  }
}

/** One `RowSet` per closed-loop client, so concurrent clients never share key buffers. */
function clientRowSets(rows, clients) {
  return Array.from({ length: clients }, (_, c) => new RowSet(rows, c))
}

/**
 * The session of a key/value peer: a put stamps client `c`'s row set (`sets[c]`) with its
 * sequence number, then `write(rs, c)` stores those rows; peers keep no counters.
 */
function rowSetSession(sets, write, close) {
  return {
    put: (c, seq) => {
      const rs = sets[c]
      rs.stamp(seq)
      return write(rs, c)
    },
    counters: () => null,
    close,
  }
}

/** better-sqlite3: WAL mode; synchronous=FULL (durable) or NORMAL; one transaction per put. */
export function sqliteStore() {
  const Database = require('better-sqlite3')
  return {
    durability: 'journal_mode=WAL, synchronous=FULL, one transaction per put (synchronous API)',
    nondurable: 'synchronous=NORMAL (WAL not synced per commit)',
    async open(dir, { durable, rows, clients }) {
      fs.mkdirSync(dir, { recursive: true })
      const db = new Database(path.join(dir, 'bench.sqlite'))
      db.pragma('journal_mode = WAL')
      db.pragma(`synchronous = ${durable ? 'FULL' : 'NORMAL'}`)
      db.exec('CREATE TABLE t (key BLOB NOT NULL, value BLOB NOT NULL, ts INTEGER NOT NULL)')
      const ins = db.prepare('INSERT INTO t (key, value, ts) VALUES (?, ?, ?)')
      const many = db.transaction((rs) => {
        for (let r = 0; r < rs.rows; r++) ins.run(rs.keys[r], rs.values72[r], rs.ts + r)
      })
      const write = (rs) => {
        if (rows === 1) ins.run(rs.keys[0], rs.values72[0], rs.ts)
        else many(rs)
      }
      return rowSetSession(clientRowSets(rows, clients), write, async () => db.close())
    },
  }
}

/** lmdb-js: puts of one event turn share a transaction; durable = await put, then db.flushed. */
export function lmdbStore() {
  const { open } = require('lmdb')
  return {
    durability: 'await put (committed) then await db.flushed (synced); overlappingSync default',
    nondurable: 'await put only (committed, not flushed)',
    async open(dir, { durable, rows, clients }) {
      const db = open({ path: dir, keyEncoding: 'binary', encoding: 'binary', compression: false })
      const write = async (rs) => {
        let p
        for (let r = 0; r < rows; r++) p = db.put(rs.keys[r], rs.values[r])
        await p
        if (durable) await db.flushed
      }
      return rowSetSession(clientRowSets(rows, clients), write, () => db.close())
    },
  }
}

/** classic-level (LevelDB): put (1 row) or batch (more) with { sync: true }. */
export function levelStore() {
  const { ClassicLevel } = require('classic-level')
  return {
    durability: 'put / batch with { sync: true }',
    nondurable: '{ sync: false }',
    async open(dir, { durable, rows, clients }) {
      const db = new ClassicLevel(dir, { keyEncoding: 'buffer', valueEncoding: 'buffer' })
      await db.open()
      const sets = clientRowSets(rows, clients)
      const ops = sets.map((rs) => rs.keys.map((key, r) => ({ type: 'put', key, value: rs.values[r] })))
      const opts = { sync: durable }
      const write = (rs, c) => (rows === 1 ? db.put(rs.keys[0], rs.values[0], opts) : db.batch(ops[c], opts))
      return rowSetSession(sets, write, () => db.close())
    },
  }
}

/**
 * A Lance commit that lost its optimistic-concurrency race 20 times: LanceDB's documented answer
 * to many concurrent appends to one table, so the cell counts it apart instead of failing.
 */
export const isLanceCommitConflict = (e) => /Commit conflict/.test(String(e?.message ?? e))

/** @lancedb/lancedb: table.add of prebuilt apache-arrow 18 Tables (one Lance commit each). */
export function lancedbStore(mods, pools18) {
  const lancedb = require(mods.lancedbEntry)
  return {
    durability: 'table.add (a Lance commit; its local object store does not fsync)',
    tolerated: isLanceCommitConflict,
    async open(dir, { rows }) {
      const pool = pools18(rows)
      const conn = await lancedb.connect(dir)
      const table = await conn.createEmptyTable('t', pools18.schema)
      let i = 0
      return {
        put: (c) => table.add(pool[(i++ + c * 97) % pool.length]),
        counters: () => null,
        close: async () => {
          table.close()
          conn.close()
        },
      }
    },
  }
}
