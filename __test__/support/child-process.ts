// Running a program to completion from a test, as a user would from a shell: stdin closed,
// stdout and stderr collected, the exit code kept (a non-zero exit is a result to check, not a
// rejection; only a program that cannot start rejects).

import { spawn } from 'node:child_process'
import { join } from 'node:path'

/** What a finished program left: its exit code (`null` if a signal ended it) and its output. */
export interface Run {
  code: number | null
  stdout: string
  stderr: string
}

/** Runs `cmd` with `args` in `cwd` (with `env`, default this process's) until it exits. */
export function runProcess(
  cmd: string,
  args: string[],
  options: { cwd: string; env?: NodeJS.ProcessEnv },
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()))
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()))
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, stdout, stderr }))
  })
}

/** The repository root, where the CLI runs from. */
const root = join(__dirname, '..', '..')

/** `memwal ...args`, run from source (through tsx) as a user would run it, without colours. */
export function memwalCli(...args: string[]): Promise<Run> {
  return runProcess(process.execPath, ['--import', 'tsx', join(root, 'cli', 'main.ts'), ...args], {
    cwd: root,
    env: { ...process.env, FORCE_COLOR: '0', MEMWAL_DEBUG: '' },
  })
}
