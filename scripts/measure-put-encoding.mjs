// The JavaScript-thread cost of one non-durable 1-row put of an apache-arrow Table, for three
// ways of building the Table: vectorFromArray (nullable Utf8 and Binary fields), tableFromArrays
// (its strings become a dictionary), and makeData over prebuilt buffers (the benchmark's shape).
// A measurement for comparing two builds of memwal on one machine, not a test: it asserts
// nothing. Run it after a release build (`npm run build`):
//
//   node scripts/measure-put-encoding.mjs [puts per round, default 4000] [rounds, default 15]
//
// Each round opens a fresh non-durable writer on a memory:// store (no WAL appends: no ticker,
// no size trigger) and times `await writer.put(table)` back to back over a pool of prebuilt
// Tables: wall time and the process's CPU time per put (steadier on a busy machine). It also
// times the JavaScript encoding alone (`encode` of dist/lib/encoding.js, what a put does before the
// native call). Each figure is the median of the rounds, in microseconds.
import { createRequire } from 'node:module'
import { randomUUID } from 'node:crypto'

const require = createRequire(import.meta.url)
const memwal = require('../dist/index.js')
const { encode } = require('../dist/lib/encoding.js')
const arrow = require('apache-arrow')

const PUTS = Number(process.argv[2] ?? 4000)
const ROUNDS = Number(process.argv[3] ?? 15)

/** Tables of one shape, built before timing, and the Schema a writer is opened with. */
function shapes() {
  const { Binary, Field, Int32, Int64, Schema, Struct, RecordBatch, Table, Utf8 } = arrow
  const nullable = new Schema([
    new Field('id', new Int32(), true),
    new Field('name', new Utf8(), true),
    new Field('payload', new Binary(), true),
  ])
  const fromVectors = (i) =>
    new Table({
      id: arrow.vectorFromArray([i], new Int32()),
      name: arrow.vectorFromArray([i % 3 === 0 ? null : `name ${i}`], new Utf8()),
      payload: arrow.vectorFromArray([Uint8Array.of(i & 255, 1, 2)], new Binary()),
    })
  const fromArrays = (i) =>
    arrow.tableFromArrays({ id: Int32Array.of(i), name: [`name ${i}`], value: Float64Array.of(i / 3) })
  const kvFields = [
    new Field('key', new Binary(), false),
    new Field('value', new Binary(), false),
    new Field('ts', new Int64(), false),
  ]
  const kv = new Schema(kvFields)
  const fromData = (i) => {
    const bytes = (n) => Uint8Array.from({ length: n }, (_, j) => (i + j) & 255)
    const children = [
      arrow.makeData({ type: kvFields[0].type, length: 1, nullCount: 0, valueOffsets: Int32Array.of(0, 20), data: bytes(20) }),
      arrow.makeData({ type: kvFields[1].type, length: 1, nullCount: 0, valueOffsets: Int32Array.of(0, 72), data: bytes(72) }),
      arrow.makeData({ type: kvFields[2].type, length: 1, nullCount: 0, data: BigInt64Array.of(BigInt(i)) }),
    ]
    const data = arrow.makeData({ type: new Struct(kvFields), length: 1, nullCount: 0, children })
    return new Table([new RecordBatch(kv, data)])
  }
  const pool = (build) => Array.from({ length: 1024 }, (_, i) => build(i))
  const arrays = pool(fromArrays)
  return [
    { name: 'vectorFromArray (nullable Int32, Utf8, Binary)', schema: nullable, tables: pool(fromVectors) },
    // tableFromArrays infers the schema (a dictionary for strings); the shard takes the first one's.
    { name: 'tableFromArrays (Int32, dictionary Utf8, Float64)', schema: arrays[0].schema, tables: arrays },
    { name: 'makeData (Binary 20 B, Binary 72 B, Int64)', schema: kv, tables: pool(fromData) },
  ]
}

async function round(shape) {
  const w = await memwal.ShardWriter.open(`memory://${randomUUID()}`, {
    schema: shape.schema,
    durableWrite: false,
    maxWalFlushIntervalMs: null,
    maxWalBufferSize: 0,
    maxMemtableBatches: PUTS + 1,
  })
  const { tables } = shape
  const cpu0 = process.cpuUsage()
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < PUTS; i++) await w.put(tables[i % tables.length])
  const wall = Number(process.hrtime.bigint() - t0) / 1000 / PUTS
  const cpu = process.cpuUsage(cpu0)
  await w.abort()
  const t1 = process.hrtime.bigint()
  for (let i = 0; i < PUTS; i++) encode(tables[i % tables.length])
  const encoding = Number(process.hrtime.bigint() - t1) / 1000 / PUTS
  return { wall, cpu: (cpu.user + cpu.system) / PUTS, encoding }
}

const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)].toFixed(2)
for (const shape of shapes()) {
  await round(shape) // warm-up
  const rounds = []
  for (let r = 0; r < ROUNDS; r++) rounds.push(await round(shape))
  const m = (k) => median(rounds.map((r) => r[k]))
  console.log(`${shape.name}: put ${m('wall')} µs wall, ${m('cpu')} µs CPU; encode alone ${m('encoding')} µs`)
}
