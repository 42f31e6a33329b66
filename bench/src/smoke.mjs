// Smoke guards check what a run did (puts completed, no errors, rows replayed, group commit,
// nothing lost or hung), never how fast: CI shares a two-core machine with whatever else runs,
// and a benchmark is never a timed test. Speeds are printed beside the guards as readings; the
// full run judges them as ratios within one run (the targets, targets.mjs).

import { best } from './lookup.mjs'
import { BURST, MEMWAL_OBJECTS, layoutName } from './plan.mjs'
import { fmtBytes, fmtNum, fmtUs } from './format.mjs'

/**
 * The guards and readings of a smoke run, as `{ guards, readings, guard }`: `guard(text, ok,
 * detail)` adds one more (the report adds its own after these). `run` holds what they look at:
 * the cells (`results`, looked up with `find`), W6's recoveries, W7's repetitions and summary,
 * and the machine `floor`; the cells are named as the run planned them (plan.mjs).
 */
export function smokeChecks(run) {
  const { results, find, w6, w7, w7Summary, floor } = run
  const layouts = run.layouts ?? [null]
  const guards = []
  function guard(text, ok, detail = '') {
    guards.push({ guard: text, ok: Boolean(ok), detail })
  }
  const readings = []
  function reading(text, detail) {
    readings.push({ reading: text, detail })
  }
  for (const r of results) {
    if (!r.store.startsWith('memwal')) {
      // Peers and floors can be slower than a smoke window: only their errors count.
      guard(
        `${r.workload} ${r.store} rows=${r.rows} C=${r.clients}: no errors`,
        r.errors === 0,
        `${r.ops} ops, ${r.errors} errors${r.firstError ? `: ${r.firstError}` : ''}`,
      )
      if (r.tolerated) reading(`${r.workload} ${r.store} rows=${r.rows} C=${r.clients}: refused puts (tolerated)`, `${r.tolerated}: ${r.firstTolerated}`)
    } else {
      guard(
        `${r.workload} ${r.store} rows=${r.rows} C=${r.clients}${r.label ? ` ${r.label}` : ''}: completed puts, no errors`,
        r.ops > 0 && r.errors === 0,
        `${r.ops} ops, ${r.errors} errors${r.firstError ? `: ${r.firstError}` : ''}`,
      )
    }
  }
  const seg1 = find('W1', 'segment-floor-js', 1, 1)
  const seg64 = find('W2', 'segment-floor-js', 1, 64)
  const syncs = (r) => (r?.syncs?.perPut != null ? `, ${r.syncs.perPut.toFixed(3)} syncs/put` : '')
  for (const l of layouts) {
    const name = layoutName('memwal', l)
    const w1 = find('W1', name, 1, 1)
    if (w1) {
      reading(
        `W1 ${name} p50 (publish floor p50; segment floor p50)`,
        `${fmtUs(w1.latencyUs.p50)}${syncs(w1)} (${fmtUs(floor.publishNewFile100B.p50)}; ${seg1 ? fmtUs(seg1.latencyUs.p50) : '-'})`,
      )
    }
    const c1 = find('W2', name, 1, 1)
    const c64 = find('W2', name, 1, 64)
    if (c1 && c64) {
      reading(`W2 ${name} 1-row durable puts/s, C=64 vs C=1`, `${fmtNum(c64.putsPerSec)}${syncs(c64)} vs ${fmtNum(c1.putsPerSec)}`)
      guard(
        `W2 ${name} C=64 group-commits (> 2 puts per WAL entry)`,
        c64.putsPerWalEntry > 2,
        `${c64.putsPerWalEntry?.toFixed(1)}`,
      )
    }
    const objects = find('W2', layoutName(MEMWAL_OBJECTS, l), 1, 64)
    if (objects && seg64) {
      reading(
        `W2 ${layoutName(MEMWAL_OBJECTS, l)} C=64 vs the segment floor`,
        `${fmtNum(objects.putsPerSec)}${syncs(objects)} vs ${fmtNum(seg64.putsPerSec)}/s`,
      )
    }
  }
  for (const store of ['segment-floor-js', 'segment-floor-rust']) {
    const lone = find('W1', store, 1, 1)
    const c64 = find('W2', store, 1, 64)
    if (lone && c64) {
      reading(`${store}: W1 p50; W2 C=64 puts/s`, `${fmtUs(lone.latencyUs.p50)}; ${fmtNum(c64.putsPerSec)} (${c64.putsPerWalEntry?.toFixed(1)} puts per sync)`)
      guard(`${store} C=64 group-commits (> 2 puts per sync)`, c64.putsPerWalEntry > 2, `${c64.putsPerWalEntry?.toFixed(1)}`)
    }
  }
  // The counter checked against a known answer: the JavaScript segment floor syncs exactly once
  // per round, and counts its rounds itself.
  const checked = [seg1, seg64].filter((r) => r?.syncs?.source === 'perf' && r.walEntries)
  for (const r of checked) {
    const counted = r.syncs.calls.fdatasync ?? 0
    guard(
      `sync counting: ${r.workload} segment-floor-js C=${r.clients} fdatasync calls counted ≈ its rounds`,
      Math.abs(counted - r.walEntries) <= 5 + 0.1 * r.walEntries,
      `${counted} counted, ${r.walEntries} rounds`,
    )
  }
  if (run.syncCounting && !run.syncCounting.available) reading('sync calls per put', `not counted: ${run.syncCounting.reason}`)
  if (run.syncCounting?.cells) {
    reading(
      'sync counting',
      `${run.syncCounting.cells} cells, which waited ${run.syncCounting.startSeconds.toFixed(1)} s in all for perf to start`,
    )
  }
  const failedCounts = results.filter((r) => r.syncs?.unavailable)
  if (failedCounts.length) reading('sync counting failed in', `${failedCounts.length} cells: ${failedCounts[0].syncs.unavailable}`)
  const nd = best(
    [1, 8].map((c) => find('W3', 'memwal', 10000, c, false, BURST)),
    (r) => r.mbPerSec,
  )
  if (nd) reading('W3 memwal non-durable burst', `${nd.mbPerSec.toFixed(0)} MB/s`)
  const w4 = find('W4', 'memwal', 1, 1, false)
  if (w4) reading('W4 memwal non-durable p50', fmtUs(w4.latencyUs.p50))
  for (const l of layouts) {
    const name = layoutName(MEMWAL_OBJECTS, l)
    const w8 = find('W8', name, 1, 64)
    if (w8) {
      guard(`W8 ${name} C=64 group-commits (> 2 puts per WAL entry)`, w8.putsPerWalEntry > 2, `${w8.putsPerWalEntry?.toFixed(1)}`)
      guard(`W8 ${name}: the JS thread was measured (event-loop utilisation over the window)`, w8.jsThreadUsPerPut > 0, `${w8.jsThreadUsPerPut}`)
    }
  }
  const w8b = find('W8', 'memwal objects', 1, 1, false)
  if (w8b) reading('W8 memwal objects non-durable C=1', `${fmtNum(w8b.rowsPerSec)} rows/s, JS thread ${w8b.jsThreadUsPerPut?.toFixed(2)} µs/put`)
  const rot = results.find((r) => r.workload === 'W5' && r.label?.startsWith('rotating'))
  if (rot) {
    guard('W5 rotations happened (≥ 1 generation flushed)', rot.generationsFlushed >= 1, `${rot.generationsFlushed}`)
    guard('W5 RSS growth < 1 GiB', rot.rssPeak - rot.rssStart < 2 ** 30, fmtBytes(rot.rssPeak - rot.rssStart))
  }
  for (const r of w6) {
    // Every row is in a generation or replayed; with rotations, only the unflushed tail replays.
    guard(`W6 ${r.kind}: every row replayed or flushed`, r.rowsReplayed + r.rowsFlushed === r.rowsWritten, `${r.rowsReplayed} + ${r.rowsFlushed}/${r.rowsWritten}`)
    if (r.kind.startsWith('large')) reading(`W6 ${r.kind}: replay`, `${r.replayMBps.toFixed(0)} MB/s`)
  }
  if (w7Summary) {
    const all = w7Summary.all
    guard(
      'W7 old writer: no put invoked after the claim resolves; every acknowledged put recovered; nothing hangs',
      all.okAfterClaimInvoked === 0 && all.okMissingAfterReopen === 0 && all.hung === 0 && all.nonFencedErrors === 0,
      JSON.stringify(all),
    )
    reading('W7 claim p50', fmtUs(w7Summary.claimMs.p50 * 1000))
    const reps = [...w7.process, ...w7.inProcess]
    guard(
      'W7 claim ≤ open',
      reps.every((r) => r.claimMs > 0 && r.claimMs <= r.openMs),
      JSON.stringify(reps.map((r) => [r.claimMs, r.openMs])),
    )
  }
  return { guards, readings, guard }
}

/**
 * Prints the readings and the guards' tally through `say`, then each failed guard. Returns
 * whether any failed.
 */
export function saySmokeChecks({ guards, readings }, say) {
  const failed = guards.filter((g) => !g.ok)
  say()
  say('smoke readings (not judged; the full run judges speed as ratios):')
  for (const r of readings) say(`  ${r.reading}: ${r.detail}`)
  say(`smoke: ${guards.length - failed.length} guards passed, ${failed.length} failed`)
  for (const g of failed) say(`  FAILED ${g.guard}: ${g.detail}`)
  return failed.length > 0
}
