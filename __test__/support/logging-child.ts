// A program that opens a writer, puts a row and closes: the logging tests run it with and
// without MEMWAL_LOG to see what it prints to stderr. Arguments: the shard's location, and
// optionally its storage options as JSON (secrets.spec.ts: an S3 endpoint with credentials).

import { ShardWriter, type StorageOptions } from '../../index'
import { rows, schema } from './helpers'

async function main(): Promise<void> {
  const storage = process.argv[3] === undefined ? undefined : (JSON.parse(process.argv[3]) as StorageOptions)
  const w = await ShardWriter.open(process.argv[2] ?? '.', { schema, shard: 'logged', storage })
  await w.put(rows([1]))
  await w.close()
}

void main()
