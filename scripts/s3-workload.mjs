// What the S3 scripts (`bench-s3.mjs`, `measure-put-cost.mjs`) share: their command-line
// options, the 10-row sensor-reading put they time, and the local S3-compatible test server
// (`crates/memwal-core/examples/s3_server.rs`, built in release) they run it against.
import { spawn, spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

import { Field, Float64, Int32, Schema, Utf8, tableFromArrays } from 'apache-arrow'

export const root = fileURLToPath(new URL('..', import.meta.url))

/** The value after `--name` on the command line, or `dflt`. */
export function opt(name, dflt) {
  const args = process.argv.slice(2)
  const i = args.indexOf(`--${name}`)
  return i >= 0 ? args[i + 1] : dflt
}

export const schema = new Schema([
  new Field('id', new Int32(), false),
  new Field('value', new Float64(), false),
  new Field('payload', new Utf8(), false),
])

/** A function building the next put: a Table of `rowsPerPut` rows with fresh ids. */
export function tables(rowsPerPut) {
  let nextId = 0
  return () => {
    const id = Int32Array.from({ length: rowsPerPut }, () => nextId++)
    return tableFromArrays({
      id,
      value: Float64Array.from(id, (i) => i * 0.5),
      payload: Array.from(id, (i) => `sensor-${i % 64} reading ${i}`),
    })
  }
}

/**
 * Builds and starts the S3 test server on `dir`, adding `latencyMs` to every request; resolves
 * with the child process and the server's `{ bucket, storage }`.
 */
export function startS3Server(dir, latencyMs) {
  const build = spawnSync('cargo', ['build', '--release', '-p', 'memwal-core', '--example', 's3_server', '--locked'], {
    cwd: root,
    stdio: 'inherit',
  })
  if (build.status !== 0) throw new Error('cannot build the S3 server')
  const target = process.env.CARGO_TARGET_DIR ?? join(root, 'target')
  const child = spawn(join(target, 'release', 'examples', 's3_server'), [dir, '--latency-ms', String(latencyMs)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).once('line', (l) => resolve({ child, info: JSON.parse(l) }))
    child.once('exit', (c) => reject(new Error(`S3 server exited with ${c}`)))
  })
}
