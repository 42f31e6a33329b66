// The machine floor (printed first in every report) and the Rust store floor runner.

import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'

import { retire } from './data-dir.mjs'
import { Latencies, now } from './latencies.mjs'
import { runExample } from './rust-example.mjs'
import { preallocate } from './segment-floor.mjs'

/**
 * fdatasync of a 100 B append, and of a 100 B write into a preallocated file; durable publish
 * of a new 100 B file, without and with an fsync of the file after its rename; memcpy; async
 * hop.
 */
export async function machineFloor(dir, { ms }) {
  fs.mkdirSync(dir, { recursive: true })
  const rec = Buffer.alloc(100, 0x61)

  const appendFile = path.join(dir, 'append.log')
  const fd = fs.openSync(appendFile, 'a')
  fs.writeSync(fd, rec)
  fs.fdatasyncSync(fd)
  // The same record written at the next offset of a zero-filled, synced file (a segment log's
  // commit): the append grows the file, so its sync writes the inode too, and this one's does
  // not. Alternating the two in one loop makes their difference this disk's, now.
  const segmentBytes = 16 << 20
  const segFd = preallocate(path.join(dir, 'segment'), segmentBytes)
  let segOffset = 0
  const appended = new Latencies()
  const overwritten = new Latencies()
  const appendEnd = now() + ms
  for (let i = 0; i < 100 || now() < appendEnd; i++) {
    const a = now()
    if (i % 2 === 0) {
      fs.writeSync(fd, rec)
      fs.fdatasyncSync(fd)
      appended.push((now() - a) * 1000)
    } else {
      if (segOffset + rec.length > segmentBytes) segOffset = 0
      fs.writeSync(segFd, rec, 0, rec.length, segOffset)
      segOffset += rec.length
      fs.fdatasyncSync(segFd)
      overwritten.push((now() - a) * 1000)
    }
  }
  const append = appended.summary()
  const preallocated = overwritten.summary()
  fs.closeSync(fd)
  fs.closeSync(segFd)

  // The publish floor, interleaved with the same publish plus an fsync of the file after its
  // rename: the order memwal uses, because on ext4 without a journal only that writes the new
  // link count (docs/durability.md, "What fsync covers on a local disk"). Alternating the two in
  // one loop makes their difference the cost of that fsync on this disk now, whatever else the
  // machine is doing.
  const pubDir = path.join(dir, 'publish')
  fs.mkdirSync(pubDir)
  const dfd = fs.openSync(pubDir, 'r')
  const plain = new Latencies()
  const synced = new Latencies()
  const pubEnd = now() + ms
  for (let i = 0; i < 100 || now() < pubEnd; i++) {
    const syncFile = i % 2 === 1
    const a = now()
    const tmp = path.join(pubDir, `.tmp-${i}`)
    const f = fs.openSync(tmp, 'wx')
    fs.writeSync(f, rec)
    fs.fdatasyncSync(f)
    fs.renameSync(tmp, path.join(pubDir, `${i}.obj`))
    if (syncFile) fs.fsyncSync(f)
    fs.closeSync(f)
    fs.fsyncSync(dfd)
    ;(syncFile ? synced : plain).push((now() - a) * 1000)
  }
  fs.closeSync(dfd)
  const publish = plain.summary()
  const publishSynced = synced.summary()

  // memcpy: copies between pre-faulted buffers, in cache (1 MiB) and DRAM-sized (64 MiB).
  const memcpy = (size) => {
    const src = Buffer.alloc(size, 1)
    const dst = Buffer.alloc(size, 2)
    src.copy(dst)
    let bytes = 0
    const t0 = now()
    while (now() - t0 < Math.max(100, ms / 4)) {
      src.copy(dst)
      bytes += size
    }
    return bytes / ((now() - t0) / 1000) / 1e9
  }
  const memcpyCacheGBs = memcpy(1 << 20)
  const memcpyDramGBs = memcpy(64 << 20)

  // Node async hop: a libuv thread-pool round trip (fs.fstat with a callback), sequential.
  const hopFd = fs.openSync(appendFile, 'r')
  const hop = new Latencies()
  const hopEnd = now() + Math.max(200, ms / 2)
  for (let i = 0; i < 200 || now() < hopEnd; i++) {
    const a = now()
    await new Promise((resolve, reject) => fs.fstat(hopFd, (e) => (e ? reject(e) : resolve())))
    hop.push((now() - a) * 1000)
  }
  fs.closeSync(hopFd)
  retire(dir)

  return {
    fdatasyncAppend100B: { ...append, perSecond: 1e6 / append.mean },
    fdatasyncPreallocated100B: { ...preallocated, perSecond: 1e6 / preallocated.mean },
    publishNewFile100B: { ...publish, perSecond: 1e6 / publish.mean },
    publishNewFileSynced100B: { ...publishSynced, perSecond: 1e6 / publishSynced.mean },
    memcpyGBs: { inCache1MiB: memcpyCacheGBs, dram64MiB: memcpyDramGBs },
    asyncHop: hop.summary(),
  }
}

/** Runs one Rust store floor cell (a child process) and returns its JSON result. */
export function runRustFloor(bin, { dir, payload, clients, warmupMs, measureMs }) {
  fs.mkdirSync(dir, { recursive: true })
  const payloadFile = path.join(dir, '..', `payload-${path.basename(dir)}.arrow`)
  fs.writeFileSync(payloadFile, payload)
  const argv = ['--dir', dir, '--payload', payloadFile, '--clients', String(clients)]
  argv.push('--warmup-ms', String(warmupMs), '--duration-ms', String(measureMs))
  return runExample(bin, argv).finally(() => fs.rmSync(payloadFile, { force: true }))
}

function tryExec(cmd, args) {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
  } catch {
    return null
  }
}

const TMPFS_MAGIC = 0x01021994

/** The file system under `dir`: type name and device, from /proc/mounts (longest prefix). */
export function fsInfo(dir) {
  const real = fs.realpathSync(dir)
  let best = null
  try {
    for (const line of fs.readFileSync('/proc/mounts', 'utf8').split('\n')) {
      const [dev, mnt, type] = line.split(' ')
      if (!mnt) continue
      if (
        (real === mnt || real.startsWith(mnt.endsWith('/') ? mnt : `${mnt}/`)) &&
        (!best || mnt.length > best.mnt.length)
      ) {
        best = { dev, mnt, type }
      }
    }
  } catch {
    // not Linux
  }
  const tmpfs = fs.statfsSync(real).type === TMPFS_MAGIC
  // ext4 names its journal thread here, or `<none>` when it runs without a journal.
  let journal = null
  if (best?.type === 'ext4') {
    try {
      journal = fs.readFileSync(`/sys/fs/ext4/${path.basename(best.dev)}/journal_task`, 'utf8').trim() !== '<none>'
    } catch {
      // no sysfs entry
    }
  }
  return { path: real, device: best?.dev ?? null, mount: best?.mnt ?? null, type: best?.type ?? null, tmpfs, journal }
}

function pkgVersion(entry, name) {
  // Walk up from a resolved entry to the package.json of `name`.
  let d = path.dirname(entry)
  while (d !== path.dirname(d)) {
    const p = path.join(d, 'package.json')
    if (fs.existsSync(p)) {
      const j = JSON.parse(fs.readFileSync(p, 'utf8'))
      if (j.name === name) return j.version
    }
    d = path.dirname(d)
  }
  return null
}

/** Versions of everything in the run. */
export function versions(mods, benchDir, rustBin) {
  const resolveFrom = (from, name) => {
    try {
      return pkgVersion(createRequire(from).resolve(name), name)
    } catch {
      return null
    }
  }
  const root = path.join(benchDir, '..')
  const gitHead = tryExec('git', ['-C', root, 'rev-parse', '--short', 'HEAD'])
  const dirty = tryExec('git', [
    '-C',
    root,
    'status',
    '--porcelain',
    '--untracked-files=no',
    '--',
    'crates',
    'index.ts',
    'lib',
    'Cargo.lock',
  ])
  const benchReq = path.join(benchDir, 'package.json')
  return {
    node: process.version,
    v8: process.versions.v8,
    memwal: `${JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).version} (git ${gitHead}${dirty ? ', crates/, index.ts or lib/ modified in the work tree' : ''})`,
    memwalAddon: path.relative(root, mods.addonPath ?? '') || null,
    apacheArrowMemwal: resolveFrom(mods.memwalEntry, 'apache-arrow'),
    apacheArrowLancedb: resolveFrom(mods.lancedbEntry, 'apache-arrow'),
    betterSqlite3: resolveFrom(benchReq, 'better-sqlite3'),
    sqlite: null,
    lmdb: resolveFrom(benchReq, 'lmdb'),
    classicLevel: resolveFrom(benchReq, 'classic-level'),
    lancedb: resolveFrom(benchReq, '@lancedb/lancedb'),
    rustc: tryExec('rustc', ['--version']),
    rustFloor: rustBin ? path.relative(root, rustBin) : null,
    kernel: `${os.type()} ${os.release()}`,
    cpu: `${os.cpus()[0]?.model ?? '?'} × ${os.availableParallelism()}`,
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
  }
}
