#!/usr/bin/env node
// Entry point of `npm run bench` (root) and `npm run bench` (bench/). Uses Node built-ins only:
// it first makes sure everything the benchmark needs is there, then runs src/run.mjs in a
// child process with the same arguments.
//
//   1. the root package's dependencies (`npm ci` at the root, which also builds the addon);
//   2. the release addon and the compiled API (`npm run build`), rebuilt when missing, when the
//      addon is a debug build, or when a Rust source is newer than it; the compiled API alone
//      (`npm run build:ts`) when index.ts or a lib/*.ts is newer than its build in dist/ or that
//      is missing
//      (skip: --no-build);
//   3. this package's dependencies (`npm ci` here; bench/.npmrc turns install scripts off);
//   4. better-sqlite3's native module, built from source with node-gyp (prebuilt downloads
//      are not reachable here);
//   5. the Rust floors (`cargo build --release --example store_floor --example segment_floor`),
//      if cargo exists; `--smoke` takes the debug builds instead (`cargo test` has built them
//      already in CI, and the smoke guards do not look at the floors' speed).
//
// Each step prints how long it took; `--setup-only` stops after them.

import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
const root = path.resolve(here, '..')
const args = process.argv.slice(2)
const noBuild = args.includes('--no-build')

function log(msg) {
  process.stderr.write(`[bench setup] ${msg}\n`)
}

function run(cmd, argv, cwd, env = process.env) {
  log(`$ (cd ${path.relative(root, cwd) || '.'} && ${cmd} ${argv.join(' ')})`)
  const r = spawnSync(cmd, argv, { cwd, stdio: ['ignore', 'inherit', 'inherit'], env })
  if (r.status !== 0) {
    log(`failed: ${cmd} ${argv.join(' ')} (exit ${r.status ?? r.signal})`)
    process.exit(1)
  }
}

const timings = {}
function step(name, fn) {
  const t0 = Date.now()
  const did = fn()
  const s = (Date.now() - t0) / 1000
  timings[name] = { seconds: s, ran: Boolean(did) }
  log(`${name}: ${did ? `done in ${s.toFixed(1)} s` : 'up to date'}`)
}

/** Whether an ELF file has a section named `name` (reads only the headers). */
function elfHasSection(file, name) {
  const fd = fs.openSync(file, 'r')
  try {
    const h = Buffer.alloc(64)
    fs.readSync(fd, h, 0, 64, 0)
    if (h.readUInt32BE(0) !== 0x7f454c46 || h[4] !== 2) return false // not ELF64
    const shoff = Number(h.readBigUInt64LE(0x28))
    const shentsize = h.readUInt16LE(0x3a)
    const shnum = h.readUInt16LE(0x3c)
    const shstrndx = h.readUInt16LE(0x3e)
    const table = Buffer.alloc(shentsize * shnum)
    fs.readSync(fd, table, 0, table.length, shoff)
    const strOff = Number(table.readBigUInt64LE(shstrndx * shentsize + 0x18))
    const strSize = Number(table.readBigUInt64LE(shstrndx * shentsize + 0x20))
    const strtab = Buffer.alloc(strSize)
    fs.readSync(fd, strtab, 0, strSize, strOff)
    for (let i = 0; i < shnum; i++) {
      const n = table.readUInt32LE(i * shentsize)
      const end = strtab.indexOf(0, n)
      if (strtab.toString('latin1', n, end) === name) return true
    }
    return false
  } finally {
    fs.closeSync(fd)
  }
}

function newestMtime(paths) {
  let newest = 0
  const visit = (p) => {
    let st
    try {
      st = fs.statSync(p)
    } catch {
      return
    }
    if (st.isDirectory()) {
      for (const e of fs.readdirSync(p)) visit(path.join(p, e))
    } else {
      newest = Math.max(newest, st.mtimeMs)
    }
  }
  paths.forEach(visit)
  return newest
}

const mtime = (p) => (fs.existsSync(p) ? fs.statSync(p).mtimeMs : 0)

step('root dependencies', () => {
  if (fs.existsSync(path.join(root, 'node_modules', '@napi-rs', 'cli', 'package.json'))) return false
  run('npm', ['ci', '--no-audit', '--no-fund'], root)
  return true
})

const addon = path.join(root, 'memwal.linux-x64-gnu.node')
step('release addon', () => {
  if (noBuild) return false
  const sources = newestMtime([
    path.join(root, 'crates', 'memwal-core', 'src'),
    path.join(root, 'crates', 'memwal-core', 'Cargo.toml'),
    path.join(root, 'crates', 'memwal-node', 'src'),
    path.join(root, 'crates', 'memwal-node', 'Cargo.toml'),
    path.join(root, 'Cargo.lock'),
  ])
  const why = !fs.existsSync(addon)
    ? 'missing'
    : elfHasSection(addon, '.debug_info')
      ? 'a debug build'
      : sources > mtime(addon)
        ? 'older than the Rust sources'
        : null
  if (why === null) return false
  log(`the addon is ${why}: building the release addon (minutes)`)
  run('npm', ['run', 'build'], root)
  return true
})

step('compiled API (dist/)', () => {
  if (noBuild) return false
  // The API is index.ts and the modules it re-exports from lib/: each compiles to dist/, at the
  // same path, as .js and .mjs at once (scripts/build-ts.mjs), so one of them dates both.
  const sources = [
    'index.ts',
    ...fs
      .readdirSync(path.join(root, 'lib'))
      .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
      .map((f) => `lib/${f}`),
  ]
  const built = (ts) => path.join(root, 'dist', ts.replace(/\.ts$/, '.mjs'))
  if (sources.every((ts) => mtime(built(ts)) >= mtime(path.join(root, ts)))) return false
  run('npm', ['run', 'build:ts'], root)
  return true
})

step('bench dependencies', () => {
  const installed = path.join(here, 'node_modules', '.package-lock.json')
  if (fs.existsSync(installed) && mtime(installed) >= mtime(path.join(here, 'package-lock.json'))) return false
  run('npm', ['ci', '--no-audit', '--no-fund'], here)
  return true
})

step('better-sqlite3 (node-gyp, from source)', () => {
  const pkg = path.join(here, 'node_modules', 'better-sqlite3')
  if (fs.existsSync(path.join(pkg, 'build', 'Release', 'better_sqlite3.node'))) return false
  // npm's own node-gyp; the headers of the running Node (no download).
  const npmDir = process.env.npm_execpath
    ? path.dirname(path.dirname(process.env.npm_execpath))
    : path.join(path.dirname(path.dirname(process.execPath)), 'lib', 'node_modules', 'npm')
  const gyp = createRequire(path.join(npmDir, 'package.json')).resolve('node-gyp/bin/node-gyp.js')
  const prefix = path.dirname(path.dirname(process.execPath))
  const nodedir = fs.existsSync(path.join(prefix, 'include', 'node', 'node.h')) ? [`--nodedir=${prefix}`] : []
  run(process.execPath, [gyp, 'rebuild', '--release', ...nodedir, `--jobs=${os.availableParallelism()}`], pkg)
  return true
})

step('Rust floors (cargo examples)', () => {
  if (noBuild) return false
  const rustc = spawnSync('rustc', ['-vV'], { encoding: 'utf8' })
  if (rustc.status !== 0) {
    log('no Rust toolchain: the Rust floor rows will be skipped')
    return false
  }
  const host = /host: (\S+)/.exec(rustc.stdout)?.[1]
  const example = ['--locked', '-p', 'memwal-core', '--example', 'store_floor', '--example', 'segment_floor']
  if (args.includes('--smoke')) {
    run('cargo', ['build', ...example], root)
  } else {
    // The napi build uses --target <host>, so this shares its compiled dependencies.
    run('cargo', ['build', '--release', ...example, '--target', host], root)
  }
  return true
})

fs.mkdirSync(path.join(here, 'results', 'tmp'), { recursive: true })
fs.writeFileSync(path.join(here, 'results', 'tmp', 'setup.json'), JSON.stringify(timings, null, 2))
if (args.includes('--setup-only')) process.exit(0)

const child = spawnSync(process.execPath, ['--expose-gc', path.join(here, 'src', 'run.mjs'), ...args], {
  cwd: here,
  stdio: 'inherit',
})
process.exit(child.status ?? 1)
