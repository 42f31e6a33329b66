import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomUUID } from 'node:crypto'

import type { ExecutionContext } from 'ava'
import { Field, Int32, Schema, type Table, Utf8, makeVector, vectorFromArray, type Vector } from 'apache-arrow'

import { ObjectStore, ShardWriter, type ShardWriterOptions } from '../../index'
import { tableOf } from '../../cli/table'

export { tableOf } from '../../cli/table'

/** `id: Int32 not null, name: Utf8` */
export const schema = new Schema([new Field('id', new Int32(), false), new Field('name', new Utf8(), true)])

/** `schema` with `id` nullable: differs from the shard's only in nullability. */
export const nullableId = new Schema([new Field('id', new Int32(), true), new Field('name', new Utf8(), true)])

/** A table of the given ids with names `n<id>`. */
export function rows(ids: number[]): Table {
  const id = makeVector(Int32Array.from(ids))
  const name = vectorFromArray(
    ids.map((i) => `n${i}`),
    new Utf8(),
  ) as Vector<Utf8>
  return tableOf(schema, [id, name])
}

/** The ids in a table, in order. */
export function ids(t: Table): number[] {
  return Array.from(t.getChild('id')?.toArray() ?? [], Number)
}

/** A temp dir removed when the test ends. */
export function tempDir(t: ExecutionContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'memwal-test-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 }))
  return dir
}

/** A writer of `schema` on a new shard of a fresh in-memory store, and the store, whose faults the test drives. */
export async function inMemoryWriter(
  options: Omit<ShardWriterOptions, 'schema'> = {},
): Promise<{ store: ObjectStore; w: ShardWriter }> {
  const store = ObjectStore.memory()
  return { store, w: await ShardWriter.open(store, { schema, ...options }) }
}

/** A fresh `memory://` location shared by every open in this process. */
export function memoryLocation(): string {
  return `memory://${randomUUID()}`
}

/** Whether the long runs are on: `npm run test:long` sets MEMWAL_LONG=1. */
export const LONG = process.env.MEMWAL_LONG === '1'

/**
 * How many runs a randomized test makes: the number in the environment variable `envVar` if it
 * is set, else `counts.long` under MEMWAL_LONG=1, else `counts.ci`.
 */
export function runCount(envVar: string, counts: { ci: number; long: number }): number {
  return Number(process.env[envVar] ?? (LONG ? counts.long : counts.ci))
}

/** The WAL layouts the crash loop and the model-based test run on. */
export type WalLayout = NonNullable<ShardWriterOptions['walLayout']>

/**
 * Writer options for a shard of `layout`. Segments are the smallest allowed, so that a short
 * test rotates through several and a writer's background spare costs little to allocate.
 */
export function layoutOptions(layout: WalLayout): Pick<ShardWriterOptions, 'walLayout' | 'walSegmentBytes'> {
  return layout === 'segments' ? { walLayout: 'segments', walSegmentBytes: 64 << 10 } : { walLayout: 'objects' }
}
