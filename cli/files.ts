// `memwal files <location> [--shard NAME|ID] [--json]`: the shard's committed generation files,
// as its manifest lists them, for DuckDB, pyarrow or Polars. Read-only.

import type { Command } from 'commander'

import { ShardReader } from '../index.js'
import { SHARD_OPTION, openStore, resolveShard } from './location.js'
import { out } from './output.js'

interface FilesOptions {
  shard: string
  json?: boolean
}

/** Registers `files` on the program. */
export function filesCommand(program: Command): void {
  program
    .command('files')
    .summary("list a shard's committed Parquet files, for other tools")
    .description(
      "Prints the shard's committed generation files, oldest first, as its latest manifest lists them:\n" +
        'one path (or s3://, gs://, az:// URI) per line, or with --json one object per line:\n' +
        '{"generation", "rows", "uri"}. Hand this list to DuckDB, pyarrow or Polars rather than a glob, which can\n' +
        "also match a generation whose flush never reached the manifest. Rows after the replay cursor are\n" +
        'only in the WAL: `memwal scan` includes them. Read-only.',
    )
    .argument('<location>', 'a directory, file:///abs/path, memory://NAME, or an object store URI')
    .option(...SHARD_OPTION)
    .option('--json', 'one JSON object per line (NDJSON)')
    .action(async (location: string, options: FilesOptions) => {
      const store = openStore(location)
      const shard = await resolveShard(store, location, options.shard)
      const reader = await ShardReader.open(store, { shardId: shard.id })
      const files = await reader.files()
      const lines = files.map((f) =>
        options.json ? JSON.stringify({ generation: f.generation, rows: f.rows, uri: f.uri }) : f.uri,
      )
      if (lines.length > 0) await out(`${lines.join('\n')}\n`)
    })
}
