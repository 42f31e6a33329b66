// Flushed generations are plain Parquet files that other tools read: DuckDB here (the README's
// "Reading flushed generations with other tools" section runs these queries).
import { join } from 'node:path'

import { DuckDBInstance } from '@duckdb/node-api'
import test from 'ava'
import { Field, Int64, Schema, Utf8, makeVector, vectorFromArray, type Table } from 'apache-arrow'

import { ShardReader, ShardWriter } from '../index'
import { tableOf, tempDir } from './helpers'

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

test('DuckDB reads the flushed generations the manifest lists, and the README glob', async (t) => {
  const dir = tempDir(t)
  const writer = await ShardWriter.open(dir, { schema, maxMemtableBatches: 2 })
  for (let b = 0; b < 5; b++) await writer.put(rows(b * 100, 100)) // 2 batches per generation
  await writer.close() // flushes the last, partial generation
  const manifest = await (await ShardReader.open(dir, { shardId: writer.shardId })).manifest()
  t.is(manifest.flushedGenerations.length, 3)

  // The committed generations, from the manifest (what `memwal inspect --json` prints).
  const files = manifest.flushedGenerations.map((g) => join(dir, '_mem_wal', writer.shardId, g.path, 'data.parquet'))
  const exact = await query(
    `SELECT count(*)::INTEGER AS n, sum(id)::BIGINT AS s, min(name) AS first FROM read_parquet([${files
      .map((f) => `'${f}'`)
      .join(', ')}])`,
  )
  t.deepEqual(exact, [{ n: 500, s: BigInt((499 * 500) / 2), first: 'n0' }])

  const columns = await query(`DESCRIBE SELECT * FROM read_parquet('${files[0]}')`)
  t.deepEqual(
    columns.map((c) => [c.column_name, c.column_type]),
    [
      ['id', 'BIGINT'],
      ['name', 'VARCHAR'],
    ],
  )

  // The README's quick look: every generation of every shard under a location.
  const glob = await query(`SELECT count(*)::INTEGER AS n FROM read_parquet('${dir}/_mem_wal/*/*_gen_*/data.parquet')`)
  t.deepEqual(glob, [{ n: 500 }])
})
