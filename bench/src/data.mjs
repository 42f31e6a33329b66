// The benchmark's records: 100-byte rows {key: 20 B binary, value: 72 B binary, ts: int64},
// as apache-arrow Tables (memwal: its own apache-arrow 21; LanceDB: apache-arrow 18.1, the
// version its peer range allows), as Arrow IPC bytes (the raw floors), and as key/value
// buffers (better-sqlite3, lmdb, classic-level).

import crypto from 'node:crypto'
import { createRequire } from 'node:module'
import fs from 'node:fs'

const require = createRequire(import.meta.url)

export const KEY_BYTES = 20
export const VALUE_BYTES = 72
export const TS_BYTES = 8
/** One record's bytes (100), for MB/s figures. */
export const ROW_BYTES = KEY_BYTES + VALUE_BYTES + TS_BYTES

/** The modules as memwal and LanceDB load them (each with the apache-arrow it resolves). */
export function loadModules() {
  const memwalEntry = fs.realpathSync(require.resolve('memwal'))
  const memwal = require(memwalEntry)
  const arrow21 = createRequire(memwalEntry)('apache-arrow')
  const lancedbEntry = fs.realpathSync(require.resolve('@lancedb/lancedb'))
  const arrow18 = createRequire(lancedbEntry)('apache-arrow')
  return { memwal, memwalEntry, arrow21, arrow18, lancedbEntry }
}

const random = crypto.randomBytes(1 << 20)

/** Fills `key` (20 B) with: 8 B prefix, 4 B stream, 4 B sequence, 4 B row. */
function writeKey(buf, off, prefix, stream, seq, row) {
  buf.set(prefix, off)
  buf.writeUInt32BE(stream >>> 0, off + 8)
  buf.writeUInt32BE(seq >>> 0, off + 12)
  buf.writeUInt32BE(row >>> 0, off + 16)
}

/** Schema and table builder for one apache-arrow module. */
export function arrowKit(arrow) {
  const fields = [
    new arrow.Field('key', new arrow.Binary(), false),
    new arrow.Field('value', new arrow.Binary(), false),
    new arrow.Field('ts', new arrow.Int64(), false),
  ]
  const schema = new arrow.Schema(fields)
  const prefix = crypto.randomBytes(8)
  /** A Table of `rows` distinct rows; `id` makes keys (and ts) unique per table. */
  function table(rows, id) {
    const keys = Buffer.allocUnsafe(rows * KEY_BYTES)
    const values = Buffer.allocUnsafe(rows * VALUE_BYTES)
    const ts = new BigInt64Array(rows)
    const base = BigInt(Date.now()) * 1000n
    for (let r = 0; r < rows; r++) {
      writeKey(keys, r * KEY_BYTES, prefix, 0, id, r)
      const src = (id * 7919 + r * 131) % (random.length - VALUE_BYTES)
      random.copy(values, r * VALUE_BYTES, src, src + VALUE_BYTES)
      ts[r] = base + BigInt(id) * 100000n + BigInt(r)
    }
    const offsets = (w) => {
      const o = new Int32Array(rows + 1)
      for (let i = 0; i <= rows; i++) o[i] = i * w
      return o
    }
    const bytes = (b) => new Uint8Array(b.buffer, b.byteOffset, b.byteLength)
    const children = [
      arrow.makeData({
        type: fields[0].type,
        length: rows,
        nullCount: 0,
        valueOffsets: offsets(KEY_BYTES),
        data: bytes(keys),
      }),
      arrow.makeData({
        type: fields[1].type,
        length: rows,
        nullCount: 0,
        valueOffsets: offsets(VALUE_BYTES),
        data: bytes(values),
      }),
      arrow.makeData({ type: fields[2].type, length: rows, nullCount: 0, data: ts }),
    ]
    const data = arrow.makeData({ type: new arrow.Struct(fields), length: rows, nullCount: 0, children })
    return new arrow.Table([new arrow.RecordBatch(schema, data)])
  }
  return { arrow, schema, table }
}

/** How many distinct prebuilt puts to cycle through, by rows per put. */
export function poolSize(rows) {
  if (rows <= 1) return 4096
  if (rows <= 100) return 512
  if (rows <= 1000) return 64
  return 8
}

/** A pool of prebuilt Tables (built once per distinct put, before timing), cached by rows. */
export function tablePools(kit) {
  const cache = new Map()
  return (rows) => {
    let pool = cache.get(rows)
    if (!pool) {
      pool = Array.from({ length: poolSize(rows) }, (_, i) => kit.table(rows, i))
      cache.set(rows, pool)
    }
    return pool
  }
}

/**
 * Key/value rows of one closed-loop client of a key-value peer: `rows` keys (20 B) and values
 * (72 B value + 8 B big-endian ts = 80 B), preallocated. `stamp(seq)` rewrites the keys in place
 * so every put writes new keys; a client only stamps after its previous put settled.
 */
export class RowSet {
  constructor(rows, stream) {
    this.rows = rows
    this.stream = stream
    this.prefix = crypto.randomBytes(8)
    this.keySlab = Buffer.allocUnsafe(rows * KEY_BYTES)
    this.valueSlab = Buffer.allocUnsafe(rows * (VALUE_BYTES + TS_BYTES))
    this.keys = []
    this.values = []
    this.values72 = []
    for (let r = 0; r < rows; r++) {
      const src = (stream * 7919 + r * 131) % (random.length - VALUE_BYTES)
      random.copy(this.valueSlab, r * 80, src, src + VALUE_BYTES)
      this.valueSlab.writeBigInt64BE(BigInt(Date.now()) * 1000n + BigInt(r), r * 80 + VALUE_BYTES)
      this.keys.push(this.keySlab.subarray(r * KEY_BYTES, (r + 1) * KEY_BYTES))
      this.values.push(this.valueSlab.subarray(r * 80, (r + 1) * 80))
      this.values72.push(this.valueSlab.subarray(r * 80, r * 80 + VALUE_BYTES))
    }
    this.ts = Date.now() * 1000
  }
  stamp(seq) {
    for (let r = 0; r < this.rows; r++) writeKey(this.keySlab, r * KEY_BYTES, this.prefix, this.stream, seq, r)
  }
}
