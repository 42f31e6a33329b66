// `memwal files <location> [--shard NAME|ID] [--wal] [--json]`: the shard's committed generation
// files, as its manifest lists them, for DuckDB, pyarrow or Polars; or with --wal the files of
// its WAL, with their sizes. Read-only.

import type { Command } from 'commander'

import { ShardReader } from '../index.js'
import { redactLocation } from '../lib/redact.js'
import { CliError, Exit } from './exit-codes.js'
import { SHARD_OPTION, localPath, openStore, resolveShard } from './location.js'
import { formatBytes, out, textTable } from './output.js'
import { walFiles } from './wal-files.js'

interface FilesOptions {
  shard: string
  wal?: boolean
  json?: boolean
}

/** The text form of `memwal files --wal`: one file per row. */
function walTable(files: ReturnType<typeof walFiles>): string {
  const rows = files.map((f) => [
    f.kind,
    f.seq === null ? '' : String(f.seq),
    f.firstPosition === null ? '' : String(f.firstPosition),
    f.epoch === null ? '' : String(f.epoch),
    formatBytes(f.bytes),
    f.path,
  ])
  // Paths are not cut: they are what the listing is for.
  return textTable(['kind', 'seq', 'position', 'epoch', 'size', 'file'], rows, Number.MAX_SAFE_INTEGER)
}

/** Registers `files` on the program. */
export function filesCommand(program: Command): void {
  program
    .command('files')
    .summary("list a shard's committed Parquet files, for other tools (or its WAL files)")
    .description(
      "Prints the shard's committed generation files, oldest first, as its latest manifest lists them:\n" +
        'one path (or s3://, gs://, az:// URI) per line, or with --json one object per line:\n' +
        '{"generation", "rows", "uri"}. Hand this list to DuckDB, pyarrow or Polars rather than a glob, which can\n' +
        "also match a generation whose flush never reached the manifest. Rows after the replay cursor are\n" +
        'only in the WAL: `memwal scan` includes them.\n' +
        'With --wal, prints the files of the WAL instead (local directories only), with their sizes: on the\n' +
        'segment layout its segment files (sequence number, first position, epoch), spares (allocated for\n' +
        'the next segments) and fence file; on the object layout its entry files (position). With --json one\n' +
        'object per line: {"kind", "seq", "firstPosition", "epoch", "bytes", "path"}. Read-only.',
    )
    .argument('<location>', 'a directory, file:///abs/path, memory://NAME, or an object store URI')
    .option(...SHARD_OPTION)
    .option('--wal', "list the WAL's files with their sizes instead (a local directory only)")
    .option('--json', 'one JSON object per line (NDJSON)')
    .action(async (location: string, options: FilesOptions) => {
      const root = localPath(location)
      if (options.wal && root === null) {
        throw new CliError(
          Exit.USAGE,
          `--wal lists the files of a local directory, and ${redactLocation(location)} is not one (on an object store the WAL is one object per entry, under _mem_wal/<shard-id>/wal/)`,
        )
      }
      const store = openStore(location)
      const shard = await resolveShard(store, location, options.shard)
      const reader = await ShardReader.open(store, { shardId: shard.id })
      if (options.wal && root !== null) {
        const files = walFiles(root, shard.id, (await reader.manifest()).walLayout)
        if (options.json) {
          const objects = files.map(({ kind, seq, firstPosition, epoch, bytes, path }) =>
            JSON.stringify({ kind, seq, firstPosition, epoch, bytes, path }),
          )
          if (objects.length > 0) await out(`${objects.join('\n')}\n`)
        } else {
          await out(`${walTable(files)}\n`)
        }
        return
      }
      const files = await reader.files()
      const lines = files.map((f) =>
        options.json ? JSON.stringify({ generation: f.generation, rows: f.rows, uri: f.uri }) : f.uri,
      )
      if (lines.length > 0) await out(`${lines.join('\n')}\n`)
    })
}
