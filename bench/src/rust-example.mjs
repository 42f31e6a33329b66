// The Rust floors are memwal-core examples (`crates/memwal-core/examples/`), built by bench.mjs:
// finding a built example and running one cell of it.

import { spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'

/**
 * Where example `name` is built, or null: the newest release build (`<target>/release`,
 * `<target>/<triple>/release`), else with `allowDebug` the debug build. `<target>` is
 * `CARGO_TARGET_DIR` when set (cargo builds there, and so bench.mjs), else the workspace's.
 */
export function rustExampleBinary(benchDir, name, { allowDebug = false } = {}) {
  const root = path.join(benchDir, '..')
  const target = process.env.CARGO_TARGET_DIR ? path.resolve(root, process.env.CARGO_TARGET_DIR) : path.join(root, 'target')
  if (!fs.existsSync(target)) return null
  const exists = (list) => list.filter((c) => fs.existsSync(c))
  const newest = (list) => list.sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs)[0] ?? null
  // `target/release` (a build for the host) and `target/<triple>/release` (napi's builds).
  const release = exists(['', ...fs.readdirSync(target)].map((t) => path.join(target, t, 'release', 'examples', name)))
  const debug = allowDebug ? exists([path.join(target, 'debug', 'examples', name)]) : []
  return newest(release) ?? newest(debug)
}

/** Runs example binary `bin` with `argv` and returns the JSON object it prints last. */
export function runExample(bin, argv) {
  const name = path.basename(bin)
  return new Promise((resolve, reject) => {
    const p = spawn(bin, argv, { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    p.stdout.on('data', (d) => (out += d))
    p.stderr.on('data', (d) => (err += d))
    p.on('error', reject)
    p.on('close', (code) => {
      if (code !== 0) return reject(new Error(`${name} exited ${code}: ${err.trim().slice(0, 500)}`))
      try {
        resolve(JSON.parse(out.trim().split('\n').pop()))
      } catch {
        reject(new Error(`${name} printed no JSON: ${out.slice(0, 200)} ${err.slice(0, 200)}`))
      }
    })
  })
}
