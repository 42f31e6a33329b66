// `memwal scan <location> [--shard NAME|ID] [--limit N] [--format table|json|csv]`: every row a new
// writer would recover (flushed generations, then the WAL after the replay cursor), in
// insertion order. Read-only.

import { type Command, Option } from 'commander'
import type { Table } from 'apache-arrow'

import { ShardReader, WalTailer } from '../index.js'
import { SHARD_OPTION, openStore, resolveShard } from './location.js'
import { integerAtLeast, oneOf } from './options.js'
import { out, textTable } from './output.js'
import { NO_PROGRESS, PROGRESS_OPTION, progressShown, startProgress } from './progress.js'

const FORMATS = ['table', 'json', 'ndjson', 'csv'] as const
type Format = (typeof FORMATS)[number]

interface ScanOptions {
  shard: string
  limit?: number
  format: Format
  json?: boolean
  progress?: boolean
}

/**
 * A cell as plain JSON data: 64-bit integers become numbers when exact (strings otherwise),
 * binary becomes base64, dates ISO strings, lists arrays and structs objects.
 */
export function plain(v: unknown): unknown {
  if (v === null || v === undefined) return null
  if (typeof v === 'bigint') return Number.isSafeInteger(Number(v)) ? Number(v) : v.toString()
  if (typeof v === 'number') return Number.isFinite(v) ? v : String(v)
  if (typeof v !== 'object') return v
  if (v instanceof Date) return v.toISOString()
  if (v instanceof Uint8Array) return Buffer.from(v).toString('base64')
  if (ArrayBuffer.isView(v)) return Array.from(v as unknown as ArrayLike<unknown>, plain)
  if (Array.isArray(v)) return v.map(plain)
  const toJSON = (v as { toJSON?: unknown }).toJSON
  if (typeof toJSON === 'function') return plain(toJSON.call(v))
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]))
}

function text(v: unknown): string {
  const p = plain(v)
  if (p === null) return ''
  return typeof p === 'object' ? JSON.stringify(p) : String(p)
}

function csvField(s: string): string {
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s
}

/** Calls `emit` with the rows of `table` as chunks of lines. */
async function eachChunk(
  table: Table,
  line: (cells: unknown[]) => string,
  emit: (chunk: string, rows: number) => Promise<void>,
): Promise<void> {
  const columns = table.schema.fields.map((_, c) => table.getChildAt(c))
  const chunk = 4096
  for (let start = 0; start < table.numRows; start += chunk) {
    const lines: string[] = []
    const end = Math.min(table.numRows, start + chunk)
    for (let i = start; i < end; i++) {
      lines.push(line(columns.map((col) => col?.get(i))))
    }
    await emit(lines.join(''), end - start)
  }
}

/** Registers `scan` on the program. */
export function scanCommand(program: Command): void {
  program
    .command('scan')
    .summary("print a shard's rows")
    .description(
      'Prints every row a new writer would recover (flushed generations, then the WAL after the replay cursor),\n' +
        'in insertion order. Formats: table (aligned text, long cells cut), json (an array of row objects, one\n' +
        'per line; 64-bit integers beyond 2^53 as strings, binary as base64), ndjson (--json: one row object per\n' +
        'line, nothing else), csv (RFC 4180, with a header; null is an empty field). Read-only.',
    )
    .argument('<location>', 'a directory, file:///abs/path, or memory://NAME')
    .option(...SHARD_OPTION)
    .option('--limit <n>', 'at most this many rows (default: all)', integerAtLeast(0))
    .option('--format <format>', `output format: ${FORMATS.join(', ')}`, oneOf(FORMATS), 'table')
    .addOption(
      new Option('--json', 'one JSON object per row, one per line (NDJSON; as --format ndjson)').conflicts('format'),
    )
    .option(...PROGRESS_OPTION)
    .action(async (location: string, options: ScanOptions) => {
      const store = openStore(location)
      const shard = await resolveShard(store, location, options.shard)
      const reader = await ShardReader.open(store, { shardId: shard.id })
      const show = progressShown(options.progress)
      let all: Table
      let bar = NO_PROGRESS
      let reads = 0
      try {
        if (show !== null) {
          // What the read goes through, for the bar: the reader's one call cannot report more.
          const m = await reader.manifest()
          const tailer = await WalTailer.open(store, { shardId: shard.id })
          const walEntries = Math.max(0, (await tailer.nextPosition()) - 1 - m.replayAfterWalEntryPosition)
          await tailer.close()
          reads = m.flushedGenerations.length + walEntries
          bar = startProgress('{what}', reads, show, { clearOnStop: true }, {
            what: 'generations and WAL entries read',
          })
        }
        all = await reader.scan()
        bar.update(reads)
      } finally {
        bar.stop()
      }
      const table = options.limit === undefined ? all : all.slice(0, options.limit)
      const names = table.schema.fields.map((f) => f.name)
      // Rows being written are counted only into a pipe or file: on a terminal the bar and the
      // rows would share the screen.
      const writing = process.stdout.isTTY === true ? null : show
      bar = startProgress('{what}', table.numRows, writing, { clearOnStop: true }, { what: 'rows written' })
      try {
        await print(table, names, all.numRows, options.json ? 'ndjson' : options.format, (n) => bar.increment(n))
      } finally {
        bar.stop()
      }
    })
}

/** Writes the rows of `table` to stdout in `format`; `done(n)` after each chunk of `n` rows. */
async function print(
  table: Table,
  names: string[],
  totalRows: number,
  format: Format,
  done: (rows: number) => void,
): Promise<void> {
  const emit = async (chunk: string, rows: number): Promise<void> => {
    await out(chunk)
    done(rows)
  }
  const object = (cells: unknown[]): string =>
    JSON.stringify(Object.fromEntries(names.map((n, c) => [n, plain(cells[c])])))
  switch (format) {
    case 'json': {
      let first = true
      await out('[')
      await eachChunk(
        table,
        (cells) => {
          const s = `${first ? '\n' : ',\n'}${object(cells)}`
          first = false
          return s
        },
        emit,
      )
      await out(first ? ']\n' : '\n]\n')
      break
    }
    case 'ndjson':
      await eachChunk(table, (cells) => `${object(cells)}\n`, emit)
      break
    case 'csv':
      await out(`${names.map(csvField).join(',')}\r\n`)
      await eachChunk(table, (cells) => `${cells.map((v) => csvField(text(v))).join(',')}\r\n`, emit)
      break
    case 'table': {
      const rows: string[][] = []
      await eachChunk(
        table,
        (cells) => {
          rows.push(cells.map((v) => (v === null || v === undefined ? 'null' : text(v))))
          return ''
        },
        async (_, n) => done(n),
      )
      await out(`${textTable(names, rows)}\n(${table.numRows} of ${totalRows} rows)\n`)
      break
    }
  }
}
