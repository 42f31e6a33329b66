// The files of a shard's WAL in a local directory, as `memwal files --wal` lists them and
// `memwal stats` sizes them: on the segment layout its segment files (with what their headers
// say), spares and fence file; on the object layout its entry files.

import { closeSync, openSync, readSync, readdirSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'

/** One file of a shard's WAL. */
export interface WalFile {
  /**
   * `segment`: records of the segment layout; `spare`: an allocated segment file waiting to be
   * used (or reused); `allocating`: a spare still being written; `fence`: the epoch of the
   * latest claim; `entry`: one entry of the object layout.
   */
  kind: 'segment' | 'spare' | 'allocating' | 'fence' | 'entry'
  /** Its absolute path. */
  path: string
  /** Its size on disk: a segment or spare is allocated whole before it is used. */
  bytes: number
  /** A segment's sequence number (segments are read in this order); `null` for other files. */
  seq: number | null
  /**
   * A segment's first WAL position (its records run up to the next segment's), or an entry's
   * position; `null` for other files, or a segment whose header does not read.
   */
  firstPosition: number | null
  /** The epoch of the writer that created a segment; `null` for other files. */
  epoch: number | null
}

/** `<64 binary digits, bit-reversed>.<ext>` → the number (as the core names WAL entries). */
export function bitrev64Position(name: string): number | null {
  const m = /^([01]{64})\.[A-Za-z0-9]+$/.exec(name)
  if (m === null) return null
  const n = BigInt(`0b${[...m[1]!].reverse().join('')}`)
  return n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : null
}

/** The names in `dir`, none if it does not exist. */
function namesIn(dir: string): string[] {
  try {
    return readdirSync(dir)
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return []
    throw e
  }
}

/** `fn()`, or `null` if the file it reads is gone (collection may remove or recycle it meanwhile). */
function unlessGone<T>(fn: () => T): T | null {
  try {
    return fn()
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null
    throw e
  }
}

/** Bytes a segment header starts with (`crates/memwal-core/src/wal/segments/format.rs`). */
const SEGMENT_MAGIC = 'MEMWALSG'
const SEGMENT_FORMAT_VERSION = 1

/**
 * What the header of the segment at `path` says, `null` if it is not one this version reads.
 * Shown, not trusted: its checksum is not checked here (`memwal inspect` reads every segment
 * as replay does, and reports damage).
 */
function segmentHeader(path: string): { seq: number; epoch: number; firstPosition: number } | null {
  const b = Buffer.alloc(40)
  const fd = openSync(path, 'r')
  let n: number
  try {
    n = readSync(fd, b, 0, b.length, 0)
  } finally {
    closeSync(fd)
  }
  if (n < b.length || b.toString('latin1', 0, 8) !== SEGMENT_MAGIC || b.readUInt32LE(8) !== SEGMENT_FORMAT_VERSION) {
    return null
  }
  return {
    seq: Number(b.readBigUInt64LE(16)),
    epoch: Number(b.readBigUInt64LE(24)),
    firstPosition: Number(b.readBigUInt64LE(32)),
  }
}

const ORDER: Record<WalFile['kind'], number> = { segment: 0, entry: 0, spare: 1, allocating: 2, fence: 3 }

/**
 * The WAL files of shard `shardId` under the local directory `root`, for a shard of WAL layout
 * `layout`: segments by sequence number, then spares and the fence file; or entries by
 * position. Files removed while they are listed are left out.
 */
export function walFiles(root: string, shardId: string, layout: 'segments' | 'objects'): WalFile[] {
  const shardDir = resolve(root, '_mem_wal', shardId)
  const files: WalFile[] = []
  if (layout === 'objects') {
    const dir = join(shardDir, 'wal')
    for (const name of namesIn(dir)) {
      const position = bitrev64Position(name)
      if (position === null) continue
      const path = join(dir, name)
      const bytes = unlessGone(() => statSync(path).size)
      if (bytes !== null) files.push({ kind: 'entry', path, bytes, seq: null, firstPosition: position, epoch: null })
    }
  } else {
    const dir = join(shardDir, 'segments')
    for (const name of namesIn(dir)) {
      const path = join(dir, name)
      let kind: WalFile['kind']
      if (/^\d{20}\.seg$/.test(name)) kind = 'segment'
      else if (name.startsWith('.spare-')) kind = 'spare'
      else if (name.startsWith('.filling-')) kind = 'allocating'
      else if (name === 'fence') kind = 'fence'
      else continue
      const found = unlessGone(() => ({
        bytes: statSync(path).size,
        header: kind === 'segment' ? segmentHeader(path) : null,
      }))
      if (found === null) continue
      files.push({
        kind,
        path,
        bytes: found.bytes,
        seq: kind === 'segment' ? (found.header?.seq ?? Number(name.slice(0, 20))) : null,
        firstPosition: found.header?.firstPosition ?? null,
        epoch: found.header?.epoch ?? null,
      })
    }
  }
  return files.sort(
    (a, b) =>
      ORDER[a.kind] - ORDER[b.kind] ||
      (a.seq ?? a.firstPosition ?? 0) - (b.seq ?? b.firstPosition ?? 0) ||
      a.path.localeCompare(b.path),
  )
}

/**
 * Bytes of the WAL files that hold positions above `lowWater` (up to `tip`): entries in
 * `(lowWater, tip]`, or the segments whose range reaches past the mark (a segment's range ends
 * where the next one starts; the last one's is open). Spares and the fence file hold none.
 */
export function walBytesAbove(files: WalFile[], lowWater: number, tip: number): number {
  let bytes = 0
  const segments = files.filter((f) => f.kind === 'segment')
  segments.forEach((f, i) => {
    const next = segments[i + 1]?.firstPosition
    if (next === undefined || next === null || next - 1 > lowWater) bytes += f.bytes
  })
  for (const f of files) {
    if (f.kind === 'entry' && f.firstPosition !== null && f.firstPosition > lowWater && f.firstPosition <= tip) {
      bytes += f.bytes
    }
  }
  return bytes
}
