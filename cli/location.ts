// Where the commands read from: a location (a directory, `file:///abs/path` or `memory://NAME`)
// opened as a store, and the shards in it, with NOT_FOUND errors that say what is there instead.
// Like the rest of the CLI, this uses only the public API (`../index.js`).

import { existsSync, statSync } from 'node:fs'

import { ObjectStore } from '../index.js'
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

function localPath(location: string): string | null {
  if (location.startsWith('file://')) return decodeURIComponent(new URL(location).pathname)
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(location)) return null
  return location
}

/** The ids of the shards at `location`; NOT_FOUND if there are none. */
export async function shardsAt(store: ObjectStore, location: string): Promise<string[]> {
  const ids = await store.listShards()
  if (ids.length === 0) {
    throw new CliError(Exit.NOT_FOUND, `no memwal shards at ${location} (expected ${location}/_mem_wal/<shard-id>/)`)
  }
  return ids.sort()
}

/** Checks that shard `id` exists at `location`, naming the shards that do if it does not. */
export async function requireShard(store: ObjectStore, location: string, id: string): Promise<void> {
  const ids = await shardsAt(store, location)
  if (!ids.includes(id)) {
    throw new CliError(Exit.NOT_FOUND, `no shard ${id} at ${location}; shards there: ${ids.join(', ')}`)
  }
}
