// An S3-compatible server on 127.0.0.1 for the S3 tests: the Rust tests' in-process server
// (s3s-fs, conditional create honoured) as a process, `crates/memwal-core/examples/s3_server.rs`.
// `cargo test` has usually built it already; `cargo build` is then a no-op. It serves a temp dir,
// listens on an ephemeral port, and exits when its stdin closes (at teardown, or if this process
// dies).

import { spawn, spawnSync } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { createInterface } from 'node:readline'

import type { ExecutionContext } from 'ava'

import type { StorageOptions } from '../../index'
import { tempDir } from './helpers'

const root = join(__dirname, '..', '..')
let built: string | null = null

/** Builds the server binary once per process; returns its path. */
export function s3ServerBinary(): string {
  if (built !== null) return built
  const r = spawnSync('cargo', ['build', '-p', 'memwal-core', '--example', 's3_server', '--locked', '--quiet'], {
    cwd: root,
    stdio: ['ignore', 'inherit', 'inherit'],
  })
  const target = process.env.CARGO_TARGET_DIR ?? join(root, 'target')
  const bin = join(target, 'debug', 'examples', 's3_server')
  if (r.status !== 0 || !existsSync(bin)) {
    throw new Error(`could not build the S3 test server (cargo exited with ${r.status})`)
  }
  built = bin
  return bin
}

/** A running server. */
export interface S3Server {
  /** `http://127.0.0.1:<port>` */
  endpoint: string
  /** Its bucket. */
  bucket: string
  /** Storage options that reach it (explicit, so nothing comes from the environment). */
  storage: StorageOptions
  /** A fresh location `s3://<bucket>/<name>-<uuid>` on it. */
  location(name: string): string
}

/** Starts a server for this test, stopped at teardown. */
export async function startS3Server(
  t: ExecutionContext,
  options: { conditionalWrites?: boolean } = {},
): Promise<S3Server> {
  const bin = s3ServerBinary()
  const args = [tempDir(t)]
  if (options.conditionalWrites === false) args.push('--no-conditional-writes')
  const child = spawn(bin, args, { stdio: ['pipe', 'pipe', 'inherit'] })
  t.teardown(() => {
    child.stdin?.end()
    child.kill()
  })
  const first = await new Promise<string>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! })
    lines.once('line', (l) => resolve(l))
    child.once('exit', (code) => reject(new Error(`the S3 test server exited with ${code} before it was ready`)))
    child.once('error', reject)
  })
  // The server prints the storage options that reach it (explicit, so nothing comes from the
  // environment).
  const info = JSON.parse(first) as { endpoint: string; bucket: string; storage: StorageOptions }
  return {
    endpoint: info.endpoint,
    bucket: info.bucket,
    storage: info.storage,
    location: (name) => `s3://${info.bucket}/${name}-${randomUUID()}`,
  }
}
