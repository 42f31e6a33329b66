// A writer process of the S3 failover test (`s3.spec.ts`): owns the ShardWriters the parent
// tells it to open, on one S3 location, and does what the parent asks. Commands come as JSON
// lines on stdin, each with an `id`; every reply and event is one JSON line on stdout.
// Run as `node --import tsx __test__/support/s3-child.ts '<json {location, storage}>'`.

import { createInterface } from 'node:readline'

import { MemWalError, ShardWriter, type StorageOptions } from '../../index'
import { rows, schema } from './helpers'

interface Config {
  location: string
  storage: StorageOptions
}

type Command =
  | { id: number; cmd: 'open'; name: string; shardId?: string }
  | { id: number; cmd: 'put'; name: string; ids: number[] }
  | { id: number; cmd: 'stream'; name: string; start: number; count: number }
  | { id: number; cmd: 'close'; name: string }

const cfg = JSON.parse(process.argv[2] ?? '') as Config
const writers = new Map<string, ShardWriter>()

function send(msg: object): void {
  process.stdout.write(`${JSON.stringify(msg)}\n`)
}

function failure(e: unknown): { code: string; fenceReason?: string; message: string } {
  if (e instanceof MemWalError) {
    const fenceReason = (e as { fenceReason?: string }).fenceReason
    return { code: e.code, ...(fenceReason === undefined ? {} : { fenceReason }), message: e.message }
  }
  return { code: 'UNTYPED', message: String(e) }
}

function writer(name: string): ShardWriter {
  const w = writers.get(name)
  if (w === undefined) throw new Error(`no writer ${name}`)
  return w
}

/** Sequential durable puts of one id each; stops at the first error. */
async function stream(c: Extract<Command, { cmd: 'stream' }>): Promise<void> {
  const w = writer(c.name)
  const acked: number[] = []
  for (let id = c.start; id < c.start + c.count; id++) {
    try {
      await w.put(rows([id]))
    } catch (e) {
      send({ event: 'streamEnd', name: c.name, acked, error: failure(e) })
      return
    }
    acked.push(id)
    send({ event: 'acked', name: c.name, id })
  }
  send({ event: 'streamEnd', name: c.name, acked, error: null })
}

async function run(c: Command): Promise<object> {
  switch (c.cmd) {
    case 'open': {
      const w = await ShardWriter.open(cfg.location, {
        schema,
        storage: cfg.storage,
        // A shard per writer name, unless told to take over one by id.
        ...(c.shardId === undefined ? { shard: c.name } : { shardId: c.shardId }),
      })
      writers.set(c.name, w)
      return { shardId: w.shardId, epoch: w.epoch }
    }
    case 'put': {
      // Concurrent durable puts: they share WAL entries (group commit).
      await Promise.all(c.ids.map((id) => writer(c.name).put(rows([id]))))
      return {}
    }
    case 'stream':
      void stream(c)
      return {}
    case 'close':
      await writer(c.name).close()
      return {}
  }
}

const lines = createInterface({ input: process.stdin })
lines.on('line', (line) => {
  const c = JSON.parse(line) as Command
  run(c).then(
    (r) => send({ id: c.id, ok: true, ...r }),
    (e) => send({ id: c.id, ok: false, error: failure(e) }),
  )
})
// The parent closing stdin ends the process (its writers are dropped like a crash).
lines.on('close', () => process.exit(0))
