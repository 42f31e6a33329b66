// The report's result tables, as `npm run bench` prints them: W0-W5 one table per workload,
// W6's recoveries, and W7's fencing repetitions (summed up first: the targets and the saved
// results use the same summary).

import { fmtBytes, fmtNum, fmtUs, textTable } from './format.mjs'

const TITLES = {
  W0: 'W0 raw floor: publish one WAL-entry object (Arrow IPC bytes of the put), 1 client',
  W1: 'W1 idle durable latency: 1 client, sequential durable puts',
  W2: 'W2 group commit scaling: durable puts, C closed-loop clients (segment floors: WAL entries = syncs)',
  W3: 'W3 ingest: 10,000-row batches (durable; memwal also non-durable)',
  W4: 'W4 small-batch call overhead: 1-row non-durable puts',
  W5: 'W5 rotation and flush under load: 1-row durable puts, 64 clients',
  W8: 'W8 events as users write them: 1-row puts of a ~100 B event, the input built inside each timed put',
  W8e: 'W8e embeddings: 1-row durable puts of { id, 768-wide Float32Array }, 64 clients (MB/s of vector data)',
}

/** Prints the cells of W0-W5 and W8 through `say`, one table per workload that ran. */
export function sayWorkloadTables(results, say) {
  for (const w of ['W0', 'W1', 'W2', 'W3', 'W4', 'W5', 'W8', 'W8e']) {
    const rs = results.filter((r) => r.workload === w)
    if (rs.length === 0) continue
    // Sync calls per put, where they were counted (durable 1-row cells).
    const syncs = rs.some((r) => r.syncs)
    say()
    say(TITLES[w])
    say(
      textTable(
        [
          'store',
          'rows/put',
          'C',
          'mode',
          'puts/s',
          'rows/s',
          'MB/s',
          'p50',
          'p99',
          'p99.9',
          'max',
          'WAL entries/s',
          'puts/entry',
          ...(syncs ? ['syncs/put'] : []),
          'notes',
        ],
        rs.map((r) => [
          r.store,
          r.rows,
          r.clients,
          r.label ?? (r.durable ? 'durable' : 'non-durable'),
          fmtNum(r.putsPerSec),
          fmtNum(r.rowsPerSec),
          r.mbPerSec.toFixed(r.mbPerSec < 10 ? 2 : 1),
          fmtUs(r.latencyUs.p50),
          fmtUs(r.latencyUs.p99),
          fmtUs(r.latencyUs.p999),
          fmtUs(r.latencyUs.max),
          r.walEntriesPerSec != null ? fmtNum(r.walEntriesPerSec) : '',
          r.putsPerWalEntry != null ? r.putsPerWalEntry.toFixed(1) : '',
          ...(syncs ? [r.syncs?.perPut != null ? r.syncs.perPut.toFixed(r.syncs.perPut < 0.1 ? 3 : 2) : r.syncs?.unavailable ? 'n/a' : ''] : []),
          [
            r.errors ? `${r.errors} errors` : '',
            r.tolerated ? `${r.tolerated} puts refused (commit conflict)` : '',
            r.jsThreadUsPerPut != null ? `JS thread ${r.jsThreadUsPerPut.toFixed(1)} µs/put` : '',
            r.generationsFlushed
              ? `${r.generationsFlushed} generations flushed (${fmtUs(r.generationFlushMs * 1000)} each, ${r.generationFlushMBps.toFixed(0)} MB/s)`
              : '',
            r.backpressureWaitMs ? `stall ${fmtNum(r.backpressureWaitMs)} ms` : '',
            w === 'W5' && r.rssPeak
              ? `RSS +${fmtBytes(Math.max(0, r.rssPeak - r.rssStart))} (outside the JS heap +${fmtBytes(Math.max(0, r.rssOutsideHeapGrowth))})`
              : '',
            r.store === 'lancedb' ? 'no fsync' : '',
            r.reusedFrom ? `(= ${r.reusedFrom} cell)` : '',
          ]
            .filter(Boolean)
            .join('; '),
        ]),
        [false, true, true, false, true, true, true, true, true, true, true, true, true, ...(syncs ? [true] : []), false],
      ),
    )
  }
}

/** Prints W6's recovery cells through `say`, if it ran. */
export function sayRecoveryTable(w6, say) {
  if (!w6.length) return
  say()
  say('W6 recovery: reopen (claim + WAL replay) after writing durable WAL entries, then abort')
  say(
    textTable(
      ['entries', 'rows/put', 'WAL entries', 'WAL bytes', 'collected', 'rows replayed', 'open', 'MB/s', 'entries/s', 'rows/s'],
      w6.map((r) => [
        r.kind,
        r.rowsPerPut,
        r.walEntries,
        fmtBytes(r.walBytes),
        r.walEntriesCollected ?? 0,
        `${r.rowsReplayed}/${r.rowsWritten}`,
        fmtUs(r.openMs * 1000),
        r.replayMBps.toFixed(0),
        fmtNum(r.entriesPerSec),
        fmtNum(r.rowsPerSec),
      ]),
      [false, true, true, true, true, true, true, true, true, true],
    ),
  )
}

/**
 * W7's repetitions summed up: claim and open times, the first rejection, and what happened to
 * the old writer's puts, for the claimer in another process (the top level: W7a), in this
 * process (`inProcess`), and both (`all`: W7b); `null` if W7 did not run.
 */
export function summarizeFencing(w7, w7Idle) {
  if (!w7.process.length) return null
  const dist = (xs) => {
    const v = [...xs].sort((a, b) => a - b)
    return { p50: v[Math.floor((v.length - 1) / 2)], max: v[v.length - 1], min: v[0] }
  }
  const summarize = (reps) => {
    const sum = (k) => reps.reduce((s, r) => s + r[k], 0)
    const rejects = reps
      .map((r) => r.firstRejectAfterClaimMs)
      .filter((x) => x !== null)
      .sort((a, b) => a - b)
    return {
      reps: reps.length,
      claimMs: dist(reps.map((r) => r.claimMs)),
      openMs: dist(reps.map((r) => r.openMs)),
      replayedEntries: dist(reps.map((r) => r.replayedEntries)),
      firstRejectAfterClaimMs: rejects.length
        ? { p50: rejects[Math.floor((rejects.length - 1) / 2)], max: rejects[rejects.length - 1] }
        : null,
      inflightAtClaim: sum('inflightAtClaim'),
      inflightRejected: sum('inflightRejected'),
      inflightResolvedAndRecovered: sum('inflightResolvedAndRecovered'),
      duringClaim: sum('duringClaim'),
      duringClaimRejected: sum('duringClaimRejected'),
      duringClaimResolvedAndRecovered: sum('duringClaimResolvedAndRecovered'),
      okAfterClaimInvoked: sum('okAfterClaimInvoked'),
      okMissingAfterReopen: sum('okMissingAfterReopen'),
      nonFencedErrors: sum('nonFencedErrors'),
      hung: reps.filter((r) => r.hung).length,
    }
  }
  return {
    // The W7a figure: the claimer in its own process, as failover between instances.
    ...summarize(w7.process),
    inProcess: summarize(w7.inProcess),
    // Every repetition of both kinds, for W7b.
    all: summarize([...w7.process, ...w7.inProcess]),
    idleClaimMs: w7Idle.length ? dist(w7Idle.map((r) => r.claimMs)) : null,
    idleOpenMs: w7Idle.length ? dist(w7Idle.map((r) => r.openMs)) : null,
  }
}

/** Prints W7's summary through `say`. */
export function sayFencingTable(w7, w7Summary, say) {
  say()
  say(
    `W7 fencing: a second writer claims a live shard (16 clients putting durably), ${w7.process.length} repetitions each from another process and from the same process; idle claim p50 ${w7Summary.idleClaimMs ? fmtUs(w7Summary.idleClaimMs.p50 * 1000) : '-'}`,
  )
  const row = (name, s) => [
    name,
    fmtUs(s.claimMs.p50 * 1000),
    fmtUs(s.claimMs.max * 1000),
    fmtUs(s.openMs.p50 * 1000),
    s.replayedEntries.p50,
    s.firstRejectAfterClaimMs ? fmtUs(s.firstRejectAfterClaimMs.p50 * 1000) : '-',
    s.inflightAtClaim,
    s.inflightRejected,
    s.inflightResolvedAndRecovered,
    s.okAfterClaimInvoked,
    s.okMissingAfterReopen,
    s.hung,
  ]
  say(
    textTable(
      [
        'claimer',
        'claim p50',
        'claim max',
        'open p50 (claim + replay)',
        'replayed entries p50',
        'first rejection p50 (from the claim returning; < 0: before it)',
        'in flight at claim start',
        'rejected',
        'resolved (appended before the fence) and recovered',
        'ok after claim',
        'ok missing after reopen',
        'hung',
      ],
      [row('another process', w7Summary), row('same process', w7Summary.inProcess)],
      [false, true, true, true, true, true, true, true, true, true, true, true],
    ),
  )
}
