// Counting the sync calls (fsync, fdatasync) a cell makes over exactly its measured window, with
// `perf stat` on the kernel's syscall tracepoints, attached to this process. A tracepoint
// counter costs the counted call almost nothing, so the cell's own speed is unchanged, and it
// sees every thread (memwal's and lmdb's own ones included). strace would stop each traced call
// for the tracer, and so slow the very group commits whose syncs it counts.
//
// perf's counters start disabled; the window's edges switch them on and off through its control
// FIFO (a non-blocking write, so an edge never waits), and the cell divides what they counted by
// the puts it acknowledged in the same window. Without perf, or where it may not attach, the
// counts are null and the report says why: nothing else depends on them.

import { execFileSync, spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'

// perf takes ~50 ms per tracepoint to start. msync and sync_file_range were counted too at first:
// no store here made either call.
const CALLS = ['fsync', 'fdatasync']
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/**
 * Whether sync calls can be counted here: `{ available: true, events }`, or `{ available:
 * false, reason }`. Probes perf once per tracepoint, attached to this process as the cells'
 * counters will be (a tracepoint may be missing, or attaching may not be allowed).
 */
export function probeSyncCounting() {
  const events = []
  let reason = null
  for (const call of CALLS) {
    try {
      execFileSync('perf', ['stat', '-x,', '-e', `syscalls:sys_enter_${call}`, '-p', String(process.pid), '--', 'true'], {
        stdio: ['ignore', 'ignore', 'pipe'],
        timeout: 10_000,
      })
      events.push(call)
    } catch (e) {
      if (e.code === 'ENOENT') return { available: false, reason: 'perf is not installed (linux-perf: perf stat with the syscalls:* tracepoints)' }
      reason ??= `perf stat -e syscalls:sys_enter_${call} failed: ${String(e.stderr ?? e.message).trim().split('\n')[0]}`
    }
  }
  try {
    execFileSync('mkfifo', ['--help'], { stdio: 'ignore' })
  } catch {
    return { available: false, reason: 'mkfifo is missing (perf is driven through a FIFO)' }
  }
  if (!events.includes('fsync') || !events.includes('fdatasync')) return { available: false, reason }
  return { available: true, events }
}

/**
 * Starts counting this process's sync calls, disabled, and resolves once perf answers its
 * control FIFO, to a session or to `{ failed: why }`. The session's `start()` and `stop()`
 * (synchronous, for a window's edges) switch the counters on and off; `result()` ends perf and
 * resolves (never rejects) to `{ calls: { fsync, fdatasync, … }, total }`, or to `{ failed: why }`.
 */
export async function countSyncs(probe, tmpDir) {
  const dir = fs.mkdtempSync(path.join(tmpDir, 'perf-'))
  const ctl = path.join(dir, 'ctl')
  const ack = path.join(dir, 'ack')
  const out = path.join(dir, 'counts.csv')
  execFileSync('mkfifo', [ctl, ack])
  const events = probe.events.map((c) => `syscalls:sys_enter_${c}`).join(',')
  const perf = spawn(
    'perf',
    ['stat', '-x,', '-o', out, '--control', `fifo:${ctl},${ack}`, '-D', '-1', '-e', events, '-p', String(process.pid)],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  )
  let stderr = ''
  perf.stderr.on('data', (d) => (stderr += d))
  let exited = false
  const closed = new Promise((resolve) =>
    perf.on('close', () => {
      exited = true
      resolve()
    }),
  )
  perf.on('error', () => (exited = true))
  const { O_WRONLY, O_RDONLY, O_NONBLOCK } = fs.constants
  let ctlFd = null
  let ackFd = null
  const cleanup = () => {
    for (const fd of [ctlFd, ackFd]) if (fd !== null) fs.closeSync(fd)
    ctlFd = ackFd = null
    fs.rmSync(dir, { recursive: true, force: true })
  }
  const fail = async (why) => {
    if (!exited) perf.kill('SIGKILL')
    await closed
    cleanup()
    return { failed: `${why}${stderr.trim() ? `: ${stderr.trim().split('\n').pop()}` : ''}` }
  }
  // Each wait tries once more after its deadline: the JavaScript thread may have been busy
  // elsewhere (a cell's set-up) for all of it.
  const deadline = () => {
    const end = Date.now() + 30_000
    return () => Date.now() > end
  }
  let acks = ''
  /** Waits until perf has acknowledged `n` commands in all. */
  const awaitAcks = async (n) => {
    const buf = Buffer.alloc(64)
    for (const late = deadline(); ; ) {
      try {
        const k = fs.readSync(ackFd, buf)
        acks += buf.toString('latin1', 0, k)
      } catch (e) {
        if (e.code !== 'EAGAIN') throw e
      }
      if ((acks.match(/ack/g) ?? []).length >= n) return true
      if (exited || late()) return false
      await sleep(1)
    }
  }
  // perf opens its end of the FIFO once it has attached; until then a non-blocking open for
  // writing fails with ENXIO.
  for (const late = deadline(); ctlFd === null; ) {
    try {
      ctlFd = fs.openSync(ctl, O_WRONLY | O_NONBLOCK)
    } catch (e) {
      if (e.code !== 'ENXIO') throw e
      if (exited) return fail('perf exited')
      if (late()) return fail('perf did not open its control FIFO')
      await sleep(2)
    }
  }
  ackFd = fs.openSync(ack, O_RDONLY | O_NONBLOCK)
  // A no-op command answered proves perf is reading its FIFO before the window opens.
  fs.writeSync(ctlFd, 'disable\n')
  if (!(await awaitAcks(1))) return fail('perf did not answer on its control FIFO')

  let counting = false
  let edges = 0
  return {
    start() {
      fs.writeSync(ctlFd, 'enable\n')
      edges++
      counting = true
    },
    stop() {
      if (!counting) return
      fs.writeSync(ctlFd, 'disable\n')
      edges++
      counting = false
    },
    async result() {
      if (counting) this.stop()
      let answered = false
      try {
        answered = await awaitAcks(1 + edges)
      } catch {
        // read below as counted nothing
      }
      // perf prints its counts when it exits on SIGINT; one that hangs is killed.
      perf.kill('SIGINT')
      const hung = setTimeout(() => perf.kill('SIGKILL'), 5000)
      await closed
      clearTimeout(hung)
      let text = ''
      try {
        text = fs.readFileSync(out, 'utf8')
      } catch {
        // perf wrote nothing: reported below
      }
      cleanup()
      const calls = {}
      for (const line of text.split('\n')) {
        const [count, , event] = line.split(',')
        const m = /^syscalls:sys_enter_(\w+)$/.exec(event ?? '')
        if (m && /^\d+$/.test(count)) calls[m[1]] = Number(count)
      }
      if (!answered || !('fdatasync' in calls)) {
        return { failed: `perf counted nothing${stderr.trim() ? `: ${stderr.trim().split('\n').pop()}` : ''}` }
      }
      return { calls, total: Object.values(calls).reduce((a, b) => a + b, 0) }
    },
  }
}
