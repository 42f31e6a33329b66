// The machine floor (printed first in every report) and the Rust store floor runner.

import { execFileSync, spawn } from 'node:child_process'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'

import { retire } from './data-dir.mjs'
import { Latencies, now } from './latencies.mjs'

/** Repeats `fn` (synchronous) for `ms` (at least `min` times); latency summary in µs. */
function loopSync(ms, min, fn) {
  const lat = new Latencies()
  const end = now() + ms
  for (let i = 0; i < min || now() < end; i++) {
    const a = now()
    fn(i)
    lat.push((now() - a) * 1000)
  }
  return lat.summary()
}

/**
 * fdatasync of a 100 B append; durable publish of a new 100 B file, without and with an fsync of
 * the file after its rename; memcpy; async hop.
 */
export async function machineFloor(dir, { ms }) {
  fs.mkdirSync(dir, { recursive: true })
  const rec = Buffer.alloc(100, 0x61)

  const appendFile = path.join(dir, 'append.log')
  const fd = fs.openSync(appendFile, 'a')
  fs.writeSync(fd, rec)
  fs.fdatasyncSync(fd)
  const append = loopSync(ms, 50, () => {
    fs.writeSync(fd, rec)
    fs.fdatasyncSync(fd)
  })
  fs.closeSync(fd)

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
    publishNewFile100B: { ...publish, perSecond: 1e6 / publish.mean },
    publishNewFileSynced100B: { ...publishSynced, perSecond: 1e6 / publishSynced.mean },
    memcpyGBs: { inCache1MiB: memcpyCacheGBs, dram64MiB: memcpyDramGBs },
    asyncHop: hop.summary(),
  }
}

/**
 * Where the store_floor example binary is, or null: the newest release build
 * (`target/<triple>/release`, `target/release`), else with `allowDebug` the debug build.
 */
export function rustFloorBinary(benchDir, { allowDebug = false } = {}) {
  const target = path.join(benchDir, '..', 'target')
  if (!fs.existsSync(target)) return null
  const exists = (list) => list.filter((c) => fs.existsSync(c))
  const newest = (list) => list.sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs)[0] ?? null
  // `target/release` (a build for the host) and `target/<triple>/release` (napi's builds).
  const release = exists(
    ['', ...fs.readdirSync(target)].map((t) => path.join(target, t, 'release', 'examples', 'store_floor')),
  )
  const debug = allowDebug ? exists([path.join(target, 'debug', 'examples', 'store_floor')]) : []
  return newest(release) ?? newest(debug)
}

/** Runs one Rust floor cell (a child process) and returns its JSON result. */
export function runRustFloor(bin, { dir, payload, clients, warmupMs, measureMs }) {
  fs.mkdirSync(dir, { recursive: true })
  const payloadFile = path.join(dir, '..', `payload-${path.basename(dir)}.arrow`)
  fs.writeFileSync(payloadFile, payload)
  return new Promise((resolve, reject) => {
    const p = spawn(
      bin,
      [
        '--dir',
        dir,
        '--payload',
        payloadFile,
        '--clients',
        String(clients),
        '--warmup-ms',
        String(warmupMs),
        '--duration-ms',
        String(measureMs),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    )
    let out = ''
    let err = ''
    p.stdout.on('data', (d) => (out += d))
    p.stderr.on('data', (d) => (err += d))
    p.on('error', reject)
    p.on('close', (code) => {
      fs.rmSync(payloadFile, { force: true })
      if (code !== 0) return reject(new Error(`store_floor exited ${code}: ${err.trim().slice(0, 500)}`))
      try {
        resolve(JSON.parse(out.trim().split('\n').pop()))
      } catch (e) {
        reject(new Error(`store_floor printed no JSON: ${out.slice(0, 200)} ${err.slice(0, 200)}`))
      }
    })
  })
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
