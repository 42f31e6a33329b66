// One writer of the soak (see ./soak.mjs): opens the shard, which fences the previous writer,
// reports how its open went, then makes durable one-row puts from several clients until it is
// fenced or told to stop. Every acknowledged id goes to its ack file before it exits, so the
// parent can check each one is read back exactly once.
//
// Usage: node soak/child.mjs <dir> <writer index> <ack file> <clients>

import { appendFileSync } from 'node:fs'

import { FencedError, ShardWriter } from '../dist/index.js'
import { SHARD, WRITER_OPTIONS, schema } from './config.mjs'

const [dir, indexText, ackFile, clientsText] = process.argv.slice(2)
const index = Number(indexText)
const clients = Number(clientsText)

const started = performance.now()
const writer = await ShardWriter.open(dir, { schema, shard: SHARD, ...WRITER_OPTIONS })
const open = writer.openStats()
process.stdout.write(
  `${JSON.stringify({ opened: index, openMs: performance.now() - started, replayedEntries: open.replayedEntries, replayedRows: open.replayedRows })}\n`,
)

// What compaction rewrites, for the parent's summary (write amplification).
let compactions = 0
let compactedRows = 0
writer.on('compaction', (e) => {
  compactions++
  compactedRows += e.rows
})

let acked = []
const flushAcks = () => {
  if (acked.length > 0) appendFileSync(ackFile, `${acked.join('\n')}\n`)
  acked = []
}
const flusher = setInterval(flushAcks, 200)

let stopping = false
process.on('SIGTERM', () => (stopping = true))

const payload = 'x'.repeat(100)
let fenced = false
async function client(c) {
  for (let seq = 0; !stopping && !fenced; seq++) {
    // Unique across writers and clients: writer index, client, sequence.
    const id = index * 1e9 + c * 1e7 + seq
    try {
      await writer.put([{ id, ts: new Date(), payload }])
      acked.push(id)
    } catch (e) {
      if (e instanceof FencedError) {
        fenced = true
        return
      }
      throw e
    }
  }
}
await Promise.all(Array.from({ length: clients }, (_, c) => client(c)))
clearInterval(flusher)
flushAcks()
if (fenced) {
  await writer.abort()
} else {
  // Told to stop: the last writer flushes everything into generations.
  await writer.close()
}
process.stdout.write(`${JSON.stringify({ exited: index, fenced, compactions, compactedRows })}\n`)
