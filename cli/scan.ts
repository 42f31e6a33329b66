// `memwal scan <location> [--shard NAME|ID] [--limit N] [--format table|json|csv]`: every row a new
// writer would recover (flushed generations, then the WAL after the replay cursor), in
// insertion order. Read-only.

import type { Command } from 'commander'
import type { Table } from 'apache-arrow'

import { ShardReader } from '../index.js'
import { SHARD_OPTION, openStore, resolveShard } from './location.js'
import { integerAtLeast, oneOf } from './options.js'
import { out, textTable } from './output.js'

const FORMATS = ['table', 'json', 'csv'] as const
type Format = (typeof FORMATS)[number]

interface ScanOptions {
  shard: string
  limit?: number
  format: Format
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
  emit: (chunk: string) => Promise<void>,
): Promise<void> {
  const columns = table.schema.fields.map((_, c) => table.getChildAt(c))
  const chunk = 4096
  for (let start = 0; start < table.numRows; start += chunk) {
    const lines: string[] = []
    for (let i = start; i < Math.min(table.numRows, start + chunk); i++) {
      lines.push(line(columns.map((col) => col?.get(i))))
    }
    await emit(lines.join(''))
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
        'per line; 64-bit integers beyond 2^53 as strings, binary as base64), csv (RFC 4180, with a header;\n' +
        'null is an empty field). Read-only.',
    )
    .argument('<location>', 'a directory, file:///abs/path, or memory://NAME')
    .option(...SHARD_OPTION)
    .option('--limit <n>', 'at most this many rows (default: all)', integerAtLeast(0))
    .option('--format <format>', `output format: ${FORMATS.join(', ')}`, oneOf(FORMATS), 'table')
    .action(async (location: string, options: ScanOptions) => {
      const store = openStore(location)
      const shard = await resolveShard(store, location, options.shard)
      const reader = await ShardReader.open(store, { shardId: shard.id })
      const all = await reader.scan()
      const table = options.limit === undefined ? all : all.slice(0, options.limit)
      const names = table.schema.fields.map((f) => f.name)
      switch (options.format) {
        case 'json': {
          let first = true
          await out('[')
          await eachChunk(
            table,
            (cells) => {
              const row = JSON.stringify(Object.fromEntries(names.map((n, c) => [n, plain(cells[c])])))
              const s = `${first ? '\n' : ',\n'}${row}`
              first = false
              return s
            },
            out,
          )
          await out(first ? ']\n' : '\n]\n')
          break
        }
        case 'csv':
          await out(`${names.map(csvField).join(',')}\r\n`)
          await eachChunk(table, (cells) => `${cells.map((v) => csvField(text(v))).join(',')}\r\n`, out)
          break
        case 'table': {
          const rows: string[][] = []
          await eachChunk(
            table,
            (cells) => {
              rows.push(cells.map((v) => (v === null || v === undefined ? 'null' : text(v))))
              return ''
            },
            async () => undefined,
          )
          await out(`${textTable(names, rows)}\n(${table.numRows} of ${all.numRows} rows)\n`)
          break
        }
      }
    })
}
