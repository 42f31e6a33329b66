// Acknowledged puts survive kill -9: the crash loop. A child process writes to a durable and a
// non-durable shard until it is SIGKILLed at a random moment; the parent reopens both shards
// (a new ShardWriter replays the WAL), scans them and checks the child's logged history
// (support/crash-history.ts). A SIGKILL keeps the page cache, so this finds process-crash bugs
// (lost acknowledgements, torn puts, replay errors), not missing fsyncs: the Rust power-loss
// tests cover those.
//
// It runs on both WAL layouts: one object per entry, and the segment log (whose writers and
// replay differ most where a kill lands: a group commit's sync and fence re-check, a rotation,
// a claim's new segment). `npm test` runs 100 iterations on objects and 25 on segments (each
// iteration on segments costs more, and the Rust power-loss tests already stop its writers at
// every sync); `npm run test:long` (MEMWAL_LONG=1) runs 3,000 on each. MEMWAL_CRASH_ITERATIONS
// overrides all of them, MEMWAL_SEED fixes the seed of the parent's choices.

import { spawn } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { randomUUID } from 'node:crypto'

import test, { type ExecutionContext } from 'ava'

import { ShardReader, ShardWriter } from '../index'
import { checkHistory, crashRows, crashSchema, padOf, parseLog, prng } from './support/crash-history'
import type { CrashRow, WriterKind } from './support/crash-history'
import { layoutOptions, runCount, tempDir, type WalLayout } from './support/helpers'

const ITERATIONS: Record<WalLayout, number> = {
  objects: runCount('MEMWAL_CRASH_ITERATIONS', { ci: 100, long: 3000 }),
  segments: runCount('MEMWAL_CRASH_ITERATIONS', { ci: 25, long: 3000 }),
}
/** Iterations per pair of shards; a fresh pair keeps each reopen's scan small. */
const ROUND = 50
const CHILD = join(__dirname, 'support', 'crash-child.ts')
const KINDS: WriterKind[] = ['d', 'n']

interface Killed {
  /** How the child ended: 'killed' is the expected outcome. */
  outcome: 'killed' | 'exited'
  stderr: string
  /** Whether the kill came before both writers were open. */
  duringOpen: boolean
}

/** Runs one child and SIGKILLs it: during open with some probability, else 5-300 ms after. */
function runChild(config: object, rand: () => number): Promise<Killed> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD, JSON.stringify(config)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stderr = ''
    let killedAt: 'open' | 'run' | null = null
    let timer: NodeJS.Timeout | undefined
    const kill = (when: 'open' | 'run') => {
      if (killedAt !== null) return
      killedAt = when
      child.kill('SIGKILL')
    }
    const killOpen = rand() < 0.15
    const openDelay = rand() * 40
    const runDelay = 5 + rand() * 295
    let out = ''
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString()
      if (out.includes('open\n') && killOpen && timer === undefined) {
        timer = setTimeout(() => kill('open'), openDelay)
      }
      if (out.includes('ready\n') && !killOpen && timer === undefined) {
        timer = setTimeout(() => kill('run'), runDelay)
      }
    })
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString()
    })
    child.on('error', reject)
    child.on('exit', (_code, signal) => {
      clearTimeout(timer)
      resolve({
        outcome: signal === 'SIGKILL' && killedAt !== null ? 'killed' : 'exited',
        stderr,
        duringOpen: killedAt === 'open' && !out.includes('ready\n'),
      })
    })
  })
}

const keyOf = (r: CrashRow) => `${r.iter}/${r.loop}/${r.seq}/${r.row}`

/** The crash loop on shards of `layout`. */
async function crashLoop(t: ExecutionContext, layout: WalLayout): Promise<void> {
  const iterations = ITERATIONS[layout]
  const seed = Number(process.env.MEMWAL_SEED ?? Math.floor(Math.random() * 2 ** 31))
  t.log(`crash loop on ${layout}: ${iterations} iterations, seed ${seed} (rerun with MEMWAL_SEED=${seed})`)
  // Generous: ~1 s per iteration on 2 cores, with room for a loaded machine.
  t.timeout(Math.max(120_000, iterations * 6_000))
  const rand = prng(seed)
  const dir = tempDir(t)
  const log = join(dir, 'events.log')
  let shards: Record<WriterKind, string> = { d: '', n: '' }
  /** The rows each shard held after the previous iteration's check, as keys, in order. */
  const before: Record<WriterKind, string[]> = { d: [], n: [] }
  const totals = { durable: 0, present: 0, lost: 0, invoked: 0, killedDuringOpen: 0, closed: 0, childMs: 0 }
  const started = Date.now()

  for (let iter = 1; iter <= iterations; iter++) {
    if ((iter - 1) % ROUND === 0) {
      shards = { d: randomUUID(), n: randomUUID() }
      before.d = []
      before.n = []
    }
    writeFileSync(log, '')
    const childSeed = Math.floor(rand() * 2 ** 31)
    const spawned = Date.now()
    const ran = await runChild({ dir, shards, iter, seed: childSeed, log, layout }, rand)
    totals.childMs += Date.now() - spawned
    const context = `iteration ${iter} (seed ${seed}, child seed ${childSeed})`
    if (ran.outcome !== 'killed') {
      t.fail(`${context}: the child exited on its own before the kill:\n${ran.stderr}`)
      return
    }
    if (ran.duringOpen) totals.killedDuringOpen++
    const events = parseLog(readFileSync(log, 'utf8'))
    const errors = events.filter((e) => e.e === 'x' || e.e === 'fx' || e.e === 'sx')
    if (errors.length > 0) {
      t.fail(`${context}: the child saw errors with no fault injected: ${JSON.stringify(errors.slice(0, 5))}`)
      return
    }

    for (const kind of KINDS) {
      // What a new writer recovers (opening replays the WAL). Asking for the layout also
      // checks that the child's shard has it. It opens first: a kill during the child's claim
      // can leave that claim for the next one to settle (on segments, a fence file written and
      // no segment started), and a reader waits for that.
      const w = await ShardWriter.open(dir, {
        schema: crashSchema,
        shardId: shards[kind],
        maxWalFlushIntervalMs: null,
        ...layoutOptions(layout),
      })
      const recovered = crashRows(await w.scan())
      // ...and what a reader sees, without claiming anything.
      let readerRows: CrashRow[] | null = null
      try {
        const reader = await ShardReader.open(dir, { shardId: shards[kind] })
        readerRows = crashRows(await reader.scan())
      } catch (e) {
        // Only possible when the kill came before the shard's first manifest was written.
        if (before[kind].length > 0 || !ran.duringOpen) throw e
      }
      if (readerRows !== null) {
        t.deepEqual(
          readerRows.map(keyOf),
          recovered.map(keyOf),
          `${context}: ShardReader and a new writer disagree on shard ${kind}`,
        )
      }
      // Rows of earlier iterations: exactly what the previous check saw, in the same order.
      const prefix = recovered.slice(0, before[kind].length).map(keyOf)
      if (prefix.length !== before[kind].length || prefix.some((k, i) => k !== before[kind][i])) {
        t.fail(`${context}: shard ${kind} changed the rows of earlier iterations`)
        return
      }
      const { violations, summary } = checkHistory(iter, kind, events, recovered.slice(before[kind].length))
      if (violations.length > 0) {
        t.fail(`${context}, shard ${kind}: ${violations.length} violations:\n${violations.slice(0, 20).join('\n')}`)
        return
      }
      totals.durable += summary.durable
      totals.present += summary.present
      totals.lost += summary.lost
      totals.invoked += summary.invoked
      before[kind] = recovered.map(keyOf)
      // Leave the shard as a crash would (abort) or cleanly (close: a generation flush).
      if (rand() < 0.3) {
        await w.close()
        totals.closed++
      } else {
        await w.abort()
      }
    }
  }
  const seconds = ((Date.now() - started) / 1000).toFixed(1)
  t.log(
    `${iterations} kills on ${layout} in ${seconds} s (${(totals.childMs / 1000).toFixed(1)} s in children, ` +
      `${totals.killedDuringOpen} kills during open): ${totals.invoked} puts invoked, ` +
      `${totals.durable} acknowledged as durable, ${totals.present} recovered, ${totals.lost} lost (never durably acknowledged)`,
  )
  t.true(totals.durable > 0, 'some puts were acknowledged as durable before the kills')
  t.pass()
}

test('acknowledged puts survive kill -9 at random moments, whole, once, in order and without holes (objects layout)', async (t) => {
  await crashLoop(t, 'objects')
})

test('acknowledged puts survive kill -9 at random moments, whole, once, in order and without holes (segments layout)', async (t) => {
  await crashLoop(t, 'segments')
})

test('the history checker flags lost, torn, duplicated, phantom, reordered and holed histories', (t) => {
  const row = (loop: number, seq: number, r: number, padLen = 0): CrashRow => ({
    iter: 1,
    loop,
    seq,
    row: r,
    pad: padOf(1, loop, seq, r, padLen),
  })
  // Loop 0 puts 0/0 (2 rows, durable), then 0/1 (1 row, durable); loop 1 puts 1/0 (in flight).
  const durable = parseLog(
    [
      { e: 'i', w: 'd', l: 0, s: 0, r: 2, b: 1, p: 0 },
      { e: 'a', w: 'd', l: 0, s: 0 },
      { e: 'i', w: 'd', l: 1, s: 0, r: 1, b: 1, p: 0 },
      { e: 'i', w: 'd', l: 0, s: 1, r: 1, b: 1, p: 0 },
      { e: 'a', w: 'd', l: 0, s: 1 },
    ]
      .map((e) => JSON.stringify(e))
      .join('\n') + '\n{"e":"i","w"', // a torn last line is dropped
  )
  const ok = [row(0, 0, 0), row(0, 0, 1), row(1, 0, 0), row(0, 1, 0)]
  t.deepEqual(checkHistory(1, 'd', durable, ok).violations, [])
  t.deepEqual(
    checkHistory(1, 'd', durable, [row(0, 0, 0), row(0, 0, 1), row(0, 1, 0)]).violations,
    [],
    'an unacknowledged put may be lost',
  )
  const flagged = (rows: CrashRow[], re: RegExp) => {
    const v = checkHistory(1, 'd', durable, rows).violations
    t.true(
      v.some((m) => re.test(m)),
      `${re} in ${JSON.stringify(v)}`,
    )
  }
  flagged([row(0, 0, 0), row(0, 0, 1)], /durably acknowledged put 0\/1 .* is missing/)
  flagged([row(0, 0, 0), row(1, 0, 0), row(0, 1, 0)], /put 0\/0 is partial/)
  flagged([...ok, row(0, 1, 0)], /put 0\/1 appears twice/)
  flagged([...ok, row(7, 0, 0)], /phantom row 4/)
  flagged([row(0, 1, 0), row(0, 0, 0), row(0, 0, 1)], /order: put 0\/0 was inserted before put 0\/1 was invoked/)
  flagged([row(0, 0, 0), row(0, 0, 1, 3), row(0, 1, 0)], /wrong pad/)
  flagged([{ ...row(0, 0, 0), iter: 2 }, row(0, 0, 1), row(0, 1, 0)], /belongs to iteration 2/)
  // Non-durable: 10/0 and 10/1 in memory, a flush resolves, then 10/2 in memory.
  const nondurable = parseLog(
    [
      { e: 'i', w: 'n', l: 10, s: 0, r: 1, b: 1, p: 0 },
      { e: 'm', w: 'n', l: 10, s: 0 },
      { e: 'i', w: 'n', l: 10, s: 1, r: 1, b: 1, p: 0 },
      { e: 'm', w: 'n', l: 10, s: 1 },
      { e: 'fi', w: 'n', f: 0 },
      { e: 'fa', w: 'n', f: 0 },
      { e: 'i', w: 'n', l: 10, s: 2, r: 1, b: 1, p: 0 },
      { e: 'm', w: 'n', l: 10, s: 2 },
      { e: 'i', w: 'n', l: 10, s: 3, r: 1, b: 1, p: 0 },
    ]
      .map((e) => JSON.stringify(e))
      .join('\n'),
  )
  const n = (rows: CrashRow[]) => checkHistory(1, 'n', nondurable, rows).violations
  t.deepEqual(n([row(10, 0, 0), row(10, 1, 0)]), [], 'puts after the last flush may be lost')
  t.deepEqual(n([row(10, 0, 0), row(10, 1, 0), row(10, 2, 0), row(10, 3, 0)]), [])
  t.true(
    n([row(10, 0, 0)]).some((m) => /put 10\/1 .* is missing/.test(m)),
    'a flushed put is durable',
  )
  t.true(
    n([row(10, 0, 0), row(10, 1, 0), row(10, 3, 0)]).some((m) => /hole: put 10\/2/.test(m)),
    'a later put present means every earlier one is',
  )
})
