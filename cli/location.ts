// Where the commands read from: a location (a directory, `file:///abs/path` or `memory://NAME`)
// opened as a store, and the shards in it, with NOT_FOUND errors that say what is there instead.
// Like the rest of the CLI, this uses only the public API (`../index.js`).

import { existsSync, statSync } from 'node:fs'

import { DEFAULT_SHARD_NAME, ObjectStore, type ShardInfo } from '../index.js'
import { CliError, Exit } from './exit-codes.js'

/**
 * The store at `location` (a directory, `file:///abs/path`, or `memory://NAME`), checked to
 * exist: a missing directory is a clear NOT_FOUND rather than an empty listing.
 */
export function openStore(location: string): ObjectStore {
  const path = localPath(location)
  if (path !== null) {
    if (!existsSync(path)) {
      throw new CliError(Exit.NOT_FOUND, `no such directory: ${path}`)
    }
    if (!statSync(path).isDirectory()) {
      throw new CliError(Exit.USAGE, `not a directory: ${path} (a location is the directory that holds _mem_wal/)`)
    }
  }
  return ObjectStore.fromUri(location)
}

/** The directory of a local location (a path or `file://` URI); `null` for any other store. */
export function localPath(location: string): string | null {
  if (location.startsWith('file://')) return decodeURIComponent(new URL(location).pathname)
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(location)) return null
  return location
}

/** The shards at `location` (those with a manifest), sorted by id; NOT_FOUND if there are none. */
export async function shardsAt(store: ObjectStore, location: string): Promise<ShardInfo[]> {
  const shards = await store.listShards()
  if (shards.length === 0) throw noShards(location)
  return shards
}

/** The NOT_FOUND error of a location that holds no shard. */
export function noShards(location: string): CliError {
  return new CliError(Exit.NOT_FOUND, `no memwal shards at ${location} (expected ${location}/_mem_wal/<shard-id>/)`)
}

/** A shard as the CLI prints it: `name (id)`, or the id alone for a shard with no name. */
export function shardLabel(s: ShardInfo): string {
  return s.name === null ? s.id : `${s.name} (${s.id})`
}

/**
 * The shard `nameOrId` (a UUID is an id, anything else a name) at `location`, naming the shards
 * that are there if it is not.
 */
export async function resolveShard(store: ObjectStore, location: string, nameOrId: string): Promise<ShardInfo> {
  // The API refuses such names; a lookup in the listing would only say "no shard" instead.
  if (nameOrId !== nameOrId.normalize('NFC')) {
    throw new CliError(
      Exit.USAGE,
      `shard name ${JSON.stringify(nameOrId)} is not in Unicode NFC; pass it normalized (its NFC spelling is ${JSON.stringify(nameOrId.normalize('NFC'))})`,
    )
  }
  const shards = await shardsAt(store, location)
  const wanted = nameOrId.toLowerCase()
  const found = shards.find((s) => s.id === wanted || s.name === nameOrId)
  if (found === undefined) {
    throw new CliError(
      Exit.NOT_FOUND,
      `no shard ${nameOrId} at ${location}; shards there: ${shards.map(shardLabel).join(', ')}`,
    )
  }
  return found
}

/** The `--shard` option of the commands that read one shard, defaulting as the API does. */
export const SHARD_OPTION = [
  '--shard <name or id>',
  'the shard, by name or id (see `memwal inspect`)',
  DEFAULT_SHARD_NAME,
] as const
