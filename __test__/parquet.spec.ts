// Flushed generations are plain Parquet files that other tools read: DuckDB here (the README's
// "Reading flushed generations with other tools" section runs these queries).
import { copyFileSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'

import { DuckDBInstance } from '@duckdb/node-api'
import test from 'ava'
import { Field, Int64, Schema, Utf8, makeVector, vectorFromArray, type Table } from 'apache-arrow'

import { ShardReader, ShardWriter } from '../index'
import { memwalCli as memwal } from './support/child-process'
import { tableOf, tempDir } from './support/helpers'

const schema = new Schema([new Field('id', new Int64(), false), new Field('name', new Utf8(), true)])

function rows(first: number, count: number): Table {
  return tableOf(schema, [
    makeVector(BigInt64Array.from({ length: count }, (_, i) => BigInt(first + i))),
    vectorFromArray(
      Array.from({ length: count }, (_, i) => `n${first + i}`),
      new Utf8(),
    ),
  ])
}

async function query(sql: string): Promise<Array<Record<string, unknown>>> {
  const db = await DuckDBInstance.create(':memory:')
  const conn = await db.connect()
  try {
    return (await conn.runAndReadAll(sql)).getRowObjectsJS()
  } finally {
    conn.closeSync()
    db.closeSync()
  }
}

test("DuckDB reads the files the manifest lists (reader.files(), `memwal files`); a glob would double count", async (t) => {
  const dir = tempDir(t)
  const writer = await ShardWriter.open(dir, { schema, maxMemtableBatches: 2 })
  for (let b = 0; b < 5; b++) await writer.put(rows(b * 100, 100)) // 2 batches per generation
  await writer.close() // flushes the last, partial generation
  const reader = await ShardReader.open(dir)
  const files = await reader.files()
  t.deepEqual(
    files.map((f) => [f.generation, f.rows]),
    [
      [1, 200],
      [2, 200],
      [3, 100],
    ],
  )
  const manifest = await reader.manifest()
  t.deepEqual(
    files.map((f) => f.uri),
    manifest.flushedGenerations.map((g) => join(dir, '_mem_wal', writer.shardId, g.path, 'data.parquet')),
  )
  // An orphan: a copy of a generation whose manifest commit never happened (a writer fenced or
  // killed mid-flush leaves one; a later generation holds its rows).
  const orphan = join(dir, '_mem_wal', writer.shardId, 'deadbeef_gen_2')
  mkdirSync(orphan)
  copyFileSync(files[1]!.uri, join(orphan, 'data.parquet'))

  const list = (uris: string[]): string => uris.map((f) => `'${f.replaceAll("'", "''")}'`).join(', ')
  const exact = await query(
    `SELECT count(*)::INTEGER AS n, sum(id)::BIGINT AS s, min(name) AS first FROM read_parquet([${list(files.map((f) => f.uri))}])`,
  )
  t.deepEqual(exact, [{ n: 500, s: BigInt((499 * 500) / 2), first: 'n0' }])
  const glob = await query(`SELECT count(*)::INTEGER AS n FROM read_parquet('${dir}/_mem_wal/*/*_gen_*/data.parquet')`)
  t.deepEqual(glob, [{ n: 700 }], 'what a glob would have counted')

  const columns = await query(`DESCRIBE SELECT * FROM read_parquet('${files[0]!.uri}')`)
  t.deepEqual(
    columns.map((c) => [c.column_name, c.column_type]),
    [
      ['id', 'BIGINT'],
      ['name', 'VARCHAR'],
    ],
  )

  // The orphan is reported, by the reader and by `memwal inspect`.
  t.deepEqual(await reader.uncommittedGenerations(), ['deadbeef_gen_2'])
  const inspect = await memwal('inspect', dir)
  t.is(inspect.code, 0, inspect.stderr)
  t.regex(inspect.stdout, /^ {2}not in the manifest: deadbeef_gen_2\/ \(a flush or compaction in progress, one abandoned/m)

  // `memwal files`: one path per line, or one JSON object per line.
  const cli = (...args: string[]) => memwal('files', dir, ...args)
  const text = await cli()
  t.is(text.code, 0, text.stderr)
  t.deepEqual(text.stdout.trim().split('\n'), files.map((f) => f.uri))
  const json = await cli('--shard', 'default', '--json')
  t.is(json.code, 0, json.stderr)
  t.deepEqual(
    json.stdout.trim().split('\n').map((l) => JSON.parse(l) as unknown),
    files.map((f) => ({ generation: f.generation, rows: f.rows, uri: f.uri })),
  )
})
