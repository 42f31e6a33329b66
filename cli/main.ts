#!/usr/bin/env node
// The `memwal` command line (package.json `bin`): inspect, stats, wal, scan, files, gc, demo. Each
// command lives in its own file and uses only the public API; this file wires them up and turns
// every failure into one line on stderr and a documented exit code (`Exit` in ./exit-codes.ts).
// Every command but `gc` (which deletes what a shard no longer needs) and `demo` is read-only.

import { readFileSync } from 'node:fs'
import { join } from 'node:path'

import { Command, CommanderError } from 'commander'

import { MemWalError } from '../index.js'
import { redactLocation } from '../lib/redact.js'
import { CliError, EXIT_CODES_HELP, Exit, exitCodeOf } from './exit-codes.js'
import { demoCommand } from './demo.js'
import { filesCommand } from './files.js'
import { gcCommand } from './gc.js'
import { inspectCommand } from './inspect.js'
import { scanCommand } from './scan.js'
import { statsCommand } from './stats.js'
import { walCommand } from './wal.js'

// The package's own package.json is the nearest one above this file: one level up from the
// source (cli/main.ts), two from the build (dist/cli/main.js), which has none in dist/.
function version(): string {
  for (const up of [['..'], ['..', '..']]) {
    try {
      const pkg: unknown = JSON.parse(readFileSync(join(__dirname, ...up, 'package.json'), 'utf8'))
      return String((pkg as { version?: unknown }).version ?? 'unknown')
    } catch {
      // not here: try one level further up
    }
  }
  return 'unknown'
}

function program(): Command {
  const p = new Command('memwal')
    .description(
      'Inspect memwal shards (durable, write-ahead-logged MemTables of Arrow record batches), collect their garbage and run the demo.',
    )
    .version(version(), '-V, --version')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({ outputError: (text, write) => write(`memwal: ${text}`) })
    .addHelpText('after', EXIT_CODES_HELP)
  inspectCommand(p)
  statsCommand(p)
  walCommand(p)
  scanCommand(p)
  filesCommand(p)
  gcCommand(p)
  demoCommand(p)
  for (const c of p.commands) c.addHelpText('after', EXIT_CODES_HELP)
  return p
}

/** One line on stderr for `e`; returns the exit code. */
function report(e: unknown): number {
  if (e instanceof CommanderError) {
    // commander already printed the problem (or the help / version asked for).
    if (e.code === 'commander.helpDisplayed' || e.code === 'commander.version') return Exit.OK
    return Exit.USAGE
  }
  if (e instanceof CliError) {
    process.stderr.write(`memwal: ${e.message}\n`)
    return e.exitCode
  }
  if (e instanceof MemWalError) {
    process.stderr.write(`memwal: ${e.code}: ${e.message}\n`)
    return exitCodeOf(e)
  }
  const err = e instanceof Error ? e : new Error(String(e))
  process.stderr.write(`memwal: unexpected error: ${redactLocation(err.message)}\n`)
  if (process.env.MEMWAL_DEBUG) process.stderr.write(`${redactLocation(err.stack ?? '')}\n`)
  else process.stderr.write('(set MEMWAL_DEBUG=1 to print the stack trace)\n')
  return Exit.UNEXPECTED
}

// `memwal scan … | head` closes stdout early: that is not an error.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'EPIPE') process.exit(Exit.OK)
  throw e
})

program()
  .parseAsync(process.argv)
  .then(
    () => Exit.OK,
    (e: unknown) => report(e),
  )
  .then((code) => {
    process.exitCode = code
  })
