import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomUUID } from 'node:crypto'

import type { ExecutionContext } from 'ava'
import { Field, Int32, Schema, Table, Utf8, makeVector, vectorFromArray, type Vector } from 'apache-arrow'

/** `id: Int32 not null, name: Utf8` */
export const schema = new Schema([new Field('id', new Int32(), false), new Field('name', new Utf8(), true)])

/** A table of the given ids with names `n<id>`. */
export function rows(ids: number[]): Table {
  const id = makeVector(Int32Array.from(ids))
  const name = vectorFromArray(
    ids.map((i) => `n${i}`),
    new Utf8(),
  ) as Vector<Utf8>
  return new Table(schema, { id, name } as never)
}

/** The ids in a table, in order. */
export function ids(t: Table): number[] {
  return Array.from(t.getChild('id')?.toArray() ?? [], Number)
}

/** A temp dir removed when the test ends. */
export function tempDir(t: ExecutionContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'memwal-test-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** A fresh `memory://` location shared by every open in this process. */
export function memoryLocation(): string {
  return `memory://${randomUUID()}`
}
