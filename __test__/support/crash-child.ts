// The crash loop's child (crash_loop.spec.ts): writes to two shards of one local directory, in
// the WAL layout the parent names, until the parent SIGKILLs it. Shard `d` has a durable writer
// (put loops and a putNoWait loop), shard `n` a non-durable one (put loops and a flush loop);
// both rotate MemTables often (small limits and a forceSealActive loop). Every invoke,
// acknowledgement and error is one JSON line, written with writeSync before the next step, so an
// acknowledgement that was logged survives the kill. Run as
// `node --import tsx __test__/support/crash-child.ts '<json config>'`.

import { openSync, writeSync } from 'node:fs'

import { MemWalError, ShardWriter } from '../../index'
import { crashSchema, prng, putBatches, type Event, type WriterKind } from './crash-history'
import { layoutOptions, type WalLayout } from './helpers'

interface Config {
  dir: string
  shards: Record<WriterKind, string>
  iter: number
  seed: number
  log: string
  layout: WalLayout
}

const cfg = JSON.parse(process.argv[2] ?? '') as Config
const fd = openSync(cfg.log, 'a')
const rand = prng(cfg.seed)
const between = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1))
let stopped = false

function log(ev: Event): void {
  writeSync(fd, `${JSON.stringify(ev)}\n`)
}

function failure(e: unknown): { c: string; m: string } {
  return e instanceof MemWalError ? { c: e.code, m: e.message } : { c: 'UNTYPED', m: String(e) }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

function nextPut(): { rows: number; batches: number; padLen: number } {
  const rows = between(1, 4)
  const batches = between(1, Math.min(rows, 3))
  const padLen = rand() < 0.1 ? between(500, 4000) : between(0, 60)
  return { rows, batches, padLen }
}

async function putLoop(w: ShardWriter, kind: WriterKind, loop: number): Promise<void> {
  for (let s = 0; !stopped; s++) {
    const { rows, batches, padLen } = nextPut()
    const data = putBatches(cfg.iter, loop, s, rows, batches, padLen)
    log({ e: 'i', w: kind, l: loop, s, r: rows, b: batches, p: padLen })
    try {
      await w.put(data)
      log({ e: kind === 'd' ? 'a' : 'm', w: kind, l: loop, s })
    } catch (e) {
      log({ e: 'x', w: kind, l: loop, s, ...failure(e) })
      return
    }
  }
}

/** putNoWait on the durable writer: in memory at once, durable when `durable` resolves. */
async function noWaitLoop(w: ShardWriter, loop: number): Promise<void> {
  for (let s = 0; !stopped; s++) {
    const { rows, batches, padLen } = nextPut()
    const data = putBatches(cfg.iter, loop, s, rows, batches, padLen)
    log({ e: 'i', w: 'd', l: loop, s, r: rows, b: batches, p: padLen })
    try {
      const { durable } = await w.putNoWait(data)
      log({ e: 'm', w: 'd', l: loop, s })
      durable?.then(
        () => log({ e: 'a', w: 'd', l: loop, s }),
        (e: unknown) => log({ e: 'x', w: 'd', l: loop, s, ...failure(e) }),
      )
      // Keep a few in flight, not an unbounded number.
      if (s % 4 === 3) await durable
    } catch (e) {
      log({ e: 'x', w: 'd', l: loop, s, ...failure(e) })
      return
    }
  }
}

/**
 * Until stopped, waits `minMs` to `maxMs` and runs `op` on writer `kind`, logging its invoke,
 * resolution and rejection as `events` with the run's number `f`; stops at the first rejection.
 */
async function periodicLoop(
  kind: WriterKind,
  events: { invoke: 'fi' | 'si'; resolved: 'fa' | 'sa'; rejected: 'fx' | 'sx' },
  [minMs, maxMs]: [number, number],
  op: () => Promise<void>,
): Promise<void> {
  for (let f = 0; !stopped; f++) {
    await sleep(between(minMs, maxMs))
    log({ e: events.invoke, w: kind, f })
    try {
      await op()
      log({ e: events.resolved, w: kind, f })
    } catch (e) {
      log({ e: events.rejected, w: kind, f, ...failure(e) })
      return
    }
  }
}

/** flush() every 2-30 ms. */
function flushLoop(w: ShardWriter, kind: WriterKind): Promise<void> {
  return periodicLoop(kind, { invoke: 'fi', resolved: 'fa', rejected: 'fx' }, [2, 30], () => w.flush())
}

/** forceSealActive() and then waitForFlushDrain() every 10-80 ms. */
function sealLoop(w: ShardWriter, kind: WriterKind): Promise<void> {
  return periodicLoop(kind, { invoke: 'si', resolved: 'sa', rejected: 'sx' }, [10, 80], async () => {
    await w.forceSealActive()
    await w.waitForFlushDrain()
  })
}

async function main(): Promise<void> {
  // The parent kills this process; if it does not within this time, stop on our own.
  setTimeout(() => {
    stopped = true
    process.exit(3)
  }, 120_000).unref()
  log({ e: 'open' })
  process.stdout.write('open\n')
  const d = await ShardWriter.open(cfg.dir, {
    schema: crashSchema,
    shardId: cfg.shards.d,
    ...layoutOptions(cfg.layout),
    maxMemtableBatches: between(4, 40),
    maxMemtableSize: between(4, 64) << 10,
    maxWalFlushIntervalMs: between(5, 100),
  })
  const n = await ShardWriter.open(cfg.dir, {
    schema: crashSchema,
    shardId: cfg.shards.n,
    ...layoutOptions(cfg.layout),
    durableWrite: false,
    maxMemtableBatches: between(4, 40),
    maxMemtableSize: between(4, 64) << 10,
    maxWalFlushIntervalMs: rand() < 0.2 ? null : between(5, 100),
    maxWalBufferSize: rand() < 0.3 ? 0 : between(1, 32) << 10,
  })
  log({ e: 'ready' })
  process.stdout.write('ready\n')
  const loops: Array<Promise<void>> = []
  // 15 concurrent put loops in all (about the 16 concurrent clients of the benchmark's
  // durable workloads), plus flushes and seals.
  for (let l = 0; l < 8; l++) loops.push(putLoop(d, 'd', l))
  loops.push(noWaitLoop(d, 8))
  loops.push(sealLoop(d, 'd'))
  for (let l = 0; l < 6; l++) loops.push(putLoop(n, 'n', 10 + l))
  loops.push(flushLoop(n, 'n'))
  loops.push(sealLoop(n, 'n'))
  await Promise.all(loops)
}

main().catch((e: unknown) => {
  process.stderr.write(`crash-child failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`)
  process.exit(2)
})
