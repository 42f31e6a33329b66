// The holder of a shard: the writer that claimed its epoch, as the manifest records it. Fence
// errors and manifests both carry it; the binding hands it over with the claim time in
// milliseconds, and this file is where that becomes a Date.

import type { FlushedGeneration, NativeShardHolder, ShardManifest as NativeShardManifest } from '../native.js'

/**
 * The writer that holds a shard: who claimed its current epoch, where, and when. A
 * {@link FencedError} with `fenceReason: 'PeerClaimedEpoch'` names it, and so does
 * {@link ShardManifest.holder}.
 */
export interface ShardHolder {
  /** The random id of the writer handle (compare with {@link ShardWriter.writerId}). */
  writerId: string
  /** The host name of the machine it runs on. */
  host: string
  /** Its process id. */
  pid: number
  /** The epoch it claimed. */
  epoch: number
  /** When it claimed the epoch (by its own clock). */
  claimedAt: Date
}

/** The plain-data form of a holder: what the binding returns and the fence tag carries. */
interface HolderRecord {
  writerId: string
  host: string
  pid: number
  epoch: number
  claimedAtMs: number
}

/**
 * A shard manifest version, as {@link ShardWriter.manifest} and {@link ShardReader.manifest}
 * return it. Written out rather than derived from the binding's type, so that the API docs
 * describe every field.
 */
export interface ShardManifest {
  /** The shard id (a UUID); `null` if the manifest does not record one. */
  shardId: string | null
  /** The shard's name; `null` for a shard only ever opened by id. */
  shardName: string | null
  /** Manifest version: 1 for the first, +1 for every commit. */
  version: number
  /** The fencing token: the epoch of the latest writer to claim the shard. */
  writerEpoch: number
  /** WAL entries at or below this position are in flushed generations. */
  replayAfterWalEntryPosition: number
  /** A hint of the WAL tip when the manifest was written; not authoritative. */
  walEntryPositionLastSeen: number
  /**
   * The WAL low-water mark: entries at or below it may have been removed by garbage
   * collection (their rows are in flushed generations). 0 while nothing may have been.
   */
  walLowWater: number
  /** The generation number the next flushed MemTable gets. */
  currentGeneration: number
  /** Flushed generations, oldest first. */
  flushedGenerations: Array<FlushedGeneration>
  /** Id of the writer handle that wrote this version. */
  writerId: string
  /** The writer that claimed the epoch; `null` if the manifest predates holder records. */
  holder: ShardHolder | null
  /**
   * How the shard's WAL is laid out (the writer option `walLayout`): `'objects'` (also every
   * shard whose manifest does not say, as Lance's) or `'segments'`.
   */
  walLayout: 'segments' | 'objects'
}

/** `r` with its claim time as a Date. */
export function holderOf(r: HolderRecord | NativeShardHolder): ShardHolder {
  return { writerId: r.writerId, host: r.host, pid: r.pid, epoch: r.epoch, claimedAt: new Date(r.claimedAtMs) }
}

/** The binding's manifest with its holder's claim time as a Date. */
export function manifestOf(m: NativeShardManifest): ShardManifest {
  return {
    ...m,
    shardName: m.shardName ?? null,
    holder: m.holder == null ? null : holderOf(m.holder),
    walLayout: m.walLayout === 'segments' ? 'segments' : 'objects',
  }
}

/** The holder a fence tag carries, as JSON; `undefined` if it is not a well-formed holder. */
export function parseHolder(json: string): ShardHolder | undefined {
  let v: unknown
  try {
    v = JSON.parse(json)
  } catch {
    return undefined
  }
  if (typeof v !== 'object' || v === null) return undefined
  const r = v as Record<string, unknown>
  if (
    typeof r.writerId !== 'string' ||
    typeof r.host !== 'string' ||
    typeof r.pid !== 'number' ||
    typeof r.epoch !== 'number' ||
    typeof r.claimedAtMs !== 'number'
  ) {
    return undefined
  }
  return holderOf({ writerId: r.writerId, host: r.host, pid: r.pid, epoch: r.epoch, claimedAtMs: r.claimedAtMs })
}
