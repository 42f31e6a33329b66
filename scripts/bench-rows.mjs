// What a put of plain-object rows costs the JavaScript thread, against the same put of an
// apache-arrow Table built with tableFromArrays, and against a prebuilt Table (the put path's
// own overhead). Every put is non-durable and awaited, one at a time, and timed as a whole:
// building the input, the call, the insert. Not a test: speeds are machine-dependent.
//
//   npm run build && node scripts/bench-rows.mjs [--puts N] [--rounds R]
//
// Prints µs/put and puts/s per variant (median of the rounds, which interleave the variants).

import { parseArgs } from 'node:util'

import {
  Field,
  FixedSizeList,
  Float32,
  Int32,
  Schema,
  TimestampMillisecond,
  Utf8,
  tableFromArrays,
} from 'apache-arrow'

import { ShardWriter } from '../dist/index.mjs'

const { values: args } = parseArgs({
  options: { puts: { type: 'string', default: '20000' }, rounds: { type: 'string', default: '5' } },
})
const PUTS = Number(args.puts)
const ROUNDS = Number(args.rounds)
const PAYLOAD = 'x'.repeat(64)

/** The schema tableFromArrays infers for `{ id: Int32Array, ts: Float64Array, user: string[], payload: string[] }`. */
const inferred = tableFromArrays({
  id: Int32Array.of(0),
  ts: Float64Array.of(0),
  user: ['u'],
  payload: [PAYLOAD],
}).schema
const typed = new Schema([
  new Field('id', new Int32(), false),
  new Field('ts', new TimestampMillisecond(), false),
  new Field('user', new Utf8(), false),
  new Field('payload', new Utf8(), false),
])
const embedding = new Schema([
  new Field('id', new Int32(), false),
  new Field('embedding', new FixedSizeList(768, new Field('item', new Float32(), false)), false),
])

const vector = new Float32Array(768).map((_, i) => Math.sin(i))
const prebuilt = tableFromArrays({ id: Int32Array.of(1), ts: Float64Array.of(1), user: ['u1'], payload: [PAYLOAD] })

/** Each variant: its shard schema and the data of put number `i`. */
const variants = {
  'prebuilt Table (put overhead)': [inferred, () => prebuilt],
  'tableFromArrays, 1 row': [
    inferred,
    (i) =>
      tableFromArrays({
        id: Int32Array.of(i),
        ts: Float64Array.of(Date.now()),
        user: [`u${i % 100}`],
        payload: [PAYLOAD],
      }),
  ],
  'plain object, 1 row (same schema)': [
    inferred,
    (i) => [{ id: i, ts: Date.now(), user: `u${i % 100}`, payload: PAYLOAD }],
  ],
  'plain object, 1 row (Int32, Timestamp(ms), Utf8, Utf8)': [
    typed,
    (i) => [{ id: i, ts: Date.now(), user: `u${i % 100}`, payload: PAYLOAD }],
  ],
  'plain object, 1 row with a 768-float Float32Array': [embedding, (i) => [{ id: i, embedding: vector }]],
  'plain objects, 100 rows per put (µs per put)': [
    typed,
    (i) => Array.from({ length: 100 }, (_, j) => ({ id: i, ts: 1_700_000_000_000 + j, user: `u${j}`, payload: PAYLOAD })),
  ],
}

async function round(schema, make) {
  const w = await ShardWriter.open(`memory://bench-rows-${Math.random()}`, { schema, durableWrite: false })
  try {
    for (let i = 0; i < 2000; i++) await w.put(make(i)) // warm-up
    const start = process.hrtime.bigint()
    for (let i = 0; i < PUTS; i++) await w.put(make(i))
    return Number(process.hrtime.bigint() - start) / 1000 / PUTS
  } finally {
    await w.abort()
  }
}

const results = Object.fromEntries(Object.keys(variants).map((k) => [k, []]))
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, [schema, make]] of Object.entries(variants)) results[name].push(await round(schema, make))
}
const median = (xs) => xs.toSorted((a, b) => a - b)[Math.floor(xs.length / 2)]
console.log(`${PUTS} non-durable puts per round, ${ROUNDS} rounds, median (Node ${process.version})`)
console.log('variant | µs/put | puts/s')
console.log('--- | ---: | ---:')
for (const [name, xs] of Object.entries(results)) {
  const us = median(xs)
  console.log(`${name} | ${us.toFixed(2)} | ${Math.round(1e6 / us).toLocaleString('en-US')}`)
}
