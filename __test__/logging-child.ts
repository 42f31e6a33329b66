// A program that opens a writer, puts a row and closes: the logging tests run it with and
// without MEMWAL_LOG to see what it prints to stderr. Argument: the shard's directory.

import { ShardWriter } from '../index'
import { rows, schema } from './helpers'

async function main(): Promise<void> {
  const w = await ShardWriter.open(process.argv[2] ?? '.', { schema, shard: 'logged' })
  await w.put(rows([1]))
  await w.close()
}

void main()
