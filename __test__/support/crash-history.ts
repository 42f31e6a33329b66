// The crash loop's shared parts: the rows a put writes, the child's event log, and the
// history checker (every acknowledged put present, all-or-nothing, no duplicates, no phantom
// rows, real-time order, recovered rows a prefix of what was inserted).
//
// The child (crash-child.ts) writes one JSON line per event with a synchronous write, so
// every acknowledgement it logged survives SIGKILL; the parent (crash_loop.spec.ts) parses the
// log, reopens the shards and checks what they hold against it.

import {
  Field,
  Int32,
  RecordBatch,
  Schema,
  Utf8,
  makeVector,
  vectorFromArray,
  type Table,
  type Vector,
} from 'apache-arrow'

import { tableOf } from './helpers'

/** Each row names its put (iteration, loop, sequence number) and its index in that put. */
export const crashSchema = new Schema([
  new Field('iter', new Int32(), false),
  new Field('loop', new Int32(), false),
  new Field('seq', new Int32(), false),
  new Field('row', new Int32(), false),
  new Field('pad', new Utf8(), true),
])

/** The pad of a row: derived from its identity, so a wrong or mixed-up row is detected. */
export function padOf(iter: number, loop: number, seq: number, row: number, padLen: number): string {
  const key = `${iter}/${loop}/${seq}/${row}:`
  return key + 'x'.repeat(padLen)
}

/** The put: `rows` rows split over `batches` record batches. */
export function putBatches(
  iter: number,
  loop: number,
  seq: number,
  rows: number,
  batches: number,
  padLen: number,
): RecordBatch[] {
  const out: RecordBatch[] = []
  let row = 0
  for (let b = 0; b < batches; b++) {
    const n = b === batches - 1 ? rows - row : Math.max(1, Math.floor(rows / batches))
    const idx = Array.from({ length: n }, (_, i) => row + i)
    const col = (f: (r: number) => number) => makeVector(Int32Array.from(idx.map(f)))
    const pad = vectorFromArray(
      idx.map((r) => padOf(iter, loop, seq, r, padLen)),
      new Utf8(),
    ) as Vector<Utf8>
    const t = tableOf(crashSchema, [col(() => iter), col(() => loop), col(() => seq), col((r) => r), pad])
    out.push(...t.batches)
    row += n
  }
  return out
}

/** A small seeded PRNG (mulberry32): the same seed gives the same choices. */
export function prng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** The two shards of the crash loop. */
export type WriterKind = 'd' | 'n'

/**
 * One line of the child's log.
 * - `i` invoke of put `l`/`s` on writer `w` (`r` rows in `b` batches, pad length `p`)
 * - `m` the rows of a put are in memory (non-durable `put` resolved, or `putNoWait` resolved)
 * - `a` a durable put (or a putNoWait's `durable` promise) resolved
 * - `x` a put (or its durable promise) rejected
 * - `fi`/`fa`/`fx` invoke, resolution, rejection of `flush()` number `f` on the non-durable writer
 * - `si`/`sa`/`sx` invoke, resolution, rejection of `forceSealActive()` + `waitForFlushDrain()`
 */
export type Event =
  | { e: 'i'; w: WriterKind; l: number; s: number; r: number; b: number; p: number }
  | { e: 'm' | 'a'; w: WriterKind; l: number; s: number }
  | { e: 'x'; w: WriterKind; l: number; s: number; c: string; m: string }
  | { e: 'fi' | 'fa' | 'si' | 'sa'; w: WriterKind; f: number }
  | { e: 'fx' | 'sx'; w: WriterKind; f: number; c: string; m: string }
  | { e: 'open' | 'ready'; w?: WriterKind }

/** Parses the log; a torn last line (the kill hit a write) is dropped, any other bad line throws. */
export function parseLog(text: string): Event[] {
  const lines = text.split('\n')
  const events: Event[] = []
  lines.forEach((line, i) => {
    if (line === '') return
    try {
      events.push(JSON.parse(line) as Event)
    } catch (e) {
      if (i < lines.length - 1) throw new Error(`log line ${i + 1} is not JSON: ${line}`, { cause: e })
    }
  })
  return events
}

/** What the checker learns about one put from the log. */
interface PutRecord {
  key: string
  loop: number
  seq: number
  rows: number
  padLen: number
  invoke: number
  /** First line showing the rows inserted (in memory or durable). */
  inserted: number | null
  /** The put is acknowledged as durable. */
  durable: boolean
  error: string | null
}

/** One recovered row. */
export interface CrashRow {
  iter: number
  loop: number
  seq: number
  row: number
  pad: string
}

/** The rows of a scan of a crash-loop shard, in order. */
export function crashRows(t: Table): CrashRow[] {
  const col = (name: string) => t.getChild(name)!.toArray() as ArrayLike<unknown>
  const iter = col('iter')
  const loop = col('loop')
  const seq = col('seq')
  const row = col('row')
  const pad = t.getChild('pad')!
  const out: CrashRow[] = []
  for (let i = 0; i < t.numRows; i++) {
    out.push({
      iter: Number(iter[i]),
      loop: Number(loop[i]),
      seq: Number(seq[i]),
      row: Number(row[i]),
      pad: String(pad.get(i)),
    })
  }
  return out
}

/** Summary of one shard's check. */
export interface CheckSummary {
  invoked: number
  durable: number
  present: number
  lost: number
}

/**
 * Checks the rows one shard recovered after the kill of iteration `iter` against the log.
 * `rows` are the rows of this iteration only, in scan order. Returns the violations found
 * (empty when the history is correct) and a summary.
 */
export function checkHistory(
  iter: number,
  w: WriterKind,
  events: Event[],
  rows: CrashRow[],
): { violations: string[]; summary: CheckSummary } {
  const violations: string[] = []
  const puts = new Map<string, PutRecord>()
  const keyOf = (l: number, s: number) => `${l}/${s}`
  // Non-durable puts are acknowledged as durable by a flush (or a seal + drain) invoked after
  // their insert and resolved: remember which invokes resolved.
  const syncInvokes = new Map<string, number>()
  const resolvedSyncs: number[] = []
  events.forEach((ev, line) => {
    if (!('w' in ev) || ev.w !== w) return
    switch (ev.e) {
      case 'i': {
        const key = keyOf(ev.l, ev.s)
        if (puts.has(key)) violations.push(`put ${key} was invoked twice in the log`)
        puts.set(key, {
          key,
          loop: ev.l,
          seq: ev.s,
          rows: ev.r,
          padLen: ev.p,
          invoke: line,
          inserted: null,
          durable: false,
          error: null,
        })
        break
      }
      case 'm':
      case 'a': {
        const p = puts.get(keyOf(ev.l, ev.s))
        if (p === undefined) {
          violations.push(`an acknowledgement of put ${keyOf(ev.l, ev.s)} precedes its invoke`)
          break
        }
        p.inserted ??= line
        if (ev.e === 'a' && w === 'd') p.durable = true
        break
      }
      case 'x': {
        const p = puts.get(keyOf(ev.l, ev.s))
        if (p !== undefined) p.error = `${ev.c}: ${ev.m}`
        break
      }
      case 'fi':
      case 'si':
        syncInvokes.set(`${ev.e[0]}${ev.f}`, line)
        break
      case 'fa':
      case 'sa': {
        const invoked = syncInvokes.get(`${ev.e[0]}${ev.f}`)
        if (invoked !== undefined) resolvedSyncs.push(invoked)
        break
      }
      default:
        break
    }
  })
  if (w === 'n') {
    // The latest resolved flush/seal covers every put inserted before it was invoked.
    const cover = resolvedSyncs.length === 0 ? -1 : Math.max(...resolvedSyncs)
    for (const p of puts.values()) {
      if (p.inserted !== null && p.inserted < cover) p.durable = true
    }
  }

  // Group the recovered rows by put, in scan order, checking identity, pads and contiguity.
  const order: PutRecord[] = []
  let current: { p: PutRecord; next: number } | null = null
  const seen = new Set<string>()
  rows.forEach((r, i) => {
    const key = keyOf(r.loop, r.seq)
    const p = puts.get(key)
    if (r.iter !== iter) {
      violations.push(`row ${i} belongs to iteration ${r.iter}, not ${iter}`)
      return
    }
    if (p === undefined) {
      violations.push(`phantom row ${i}: put ${key} row ${r.row} was never invoked`)
      return
    }
    if (r.pad !== padOf(iter, r.loop, r.seq, r.row, p.padLen)) {
      violations.push(`row ${i} (put ${key} row ${r.row}) has the wrong pad ${JSON.stringify(r.pad.slice(0, 40))}`)
    }
    if (current !== null && current.p === p) {
      if (current.next === p.rows) violations.push(`put ${key} appears twice`)
      else if (r.row !== current.next)
        violations.push(`put ${key}: row ${r.row} where row ${current.next} was expected`)
      current.next = r.row + 1
      return
    }
    if (current !== null && current.next !== current.p.rows) {
      violations.push(`put ${current.p.key} is partial: ${current.next} of ${current.p.rows} rows, then put ${key}`)
    }
    if (seen.has(key)) {
      violations.push(`put ${key} appears twice (or not contiguously)`)
    }
    seen.add(key)
    order.push(p)
    if (r.row !== 0) violations.push(`put ${key} starts at row ${r.row}`)
    current = { p, next: r.row + 1 }
  })
  const last = current as { p: PutRecord; next: number } | null
  if (last !== null && last.next !== last.p.rows) {
    violations.push(`put ${last.p.key} is partial: ${last.next} of ${last.p.rows} rows at the end`)
  }

  // Every durably acknowledged put is present.
  let durable = 0
  for (const p of puts.values()) {
    if (!p.durable) continue
    durable++
    if (!seen.has(p.key)) violations.push(`durably acknowledged put ${p.key} (log line ${p.invoke + 1}) is missing`)
  }

  // Real-time order: a put inserted before another was invoked precedes it.
  let minInsertedAfter = Number.POSITIVE_INFINITY
  let minKey = ''
  for (let i = order.length - 1; i >= 0; i--) {
    const p = order[i]!
    if (minInsertedAfter < p.invoke) {
      violations.push(`order: put ${minKey} was inserted before put ${p.key} was invoked but comes after it`)
    }
    if (p.inserted !== null && p.inserted < minInsertedAfter) {
      minInsertedAfter = p.inserted
      minKey = p.key
    }
  }

  // No holes: every put inserted before the last-invoked present put was invoked is present.
  const maxInvoke = order.reduce((m, p) => Math.max(m, p.invoke), -1)
  for (const p of puts.values()) {
    if (p.inserted !== null && p.inserted < maxInvoke && !seen.has(p.key)) {
      violations.push(`hole: put ${p.key} is missing but a put invoked after its insert is present`)
    }
  }

  return {
    violations,
    summary: { invoked: puts.size, durable, present: seen.size, lost: puts.size - seen.size },
  }
}
