// The names a run's cells are planned and judged by: the store groups, W3's labels and W5's
// MemTable options. The workloads (run.mjs) use them to run cells, the targets and the smoke
// guards to find those cells again, so each is written once, here.

/** The raw disk floors: publishing the put's bytes as a new file, from JavaScript and Rust. */
export const FLOORS = ['floor-js', 'floor-rust']
/** The embedded Node stores memwal is compared with. */
export const PEERS = ['better-sqlite3', 'lmdb', 'classic-level', 'lancedb']
/** The peers whose puts survive a power loss (LanceDB does not fsync a local directory). */
export const DURABLE_PEERS = ['better-sqlite3', 'lmdb', 'classic-level']
/** Every store of W1-W3. */
export const ALL = [...FLOORS, 'memwal', ...PEERS]
/** memwal given plain-object rows built per put (W2 also runs it beside the prebuilt Tables). */
export const MEMWAL_OBJECTS = 'memwal objects'

/**
 * The raw floors of a segment-log WAL: records written at the next offset of a preallocated
 * file, then one `fdatasync` per group commit; from JavaScript and from Rust. W1 and W2 (1-row
 * puts) run them, and the lone-put and 64-client targets are ratios against the JavaScript one.
 */
export const SEGMENT_FLOORS = ['segment-floor-js', 'segment-floor-rust']

/**
 * The name of memwal store `store` on WAL layout `layout` (`'objects'`, `'segments'`), or
 * `store` itself when `layout` is null: a writer without the `walLayout` option has one layout,
 * and its cells keep the names earlier reports used.
 */
export const layoutName = (store, layout) => (layout ? `${store} (${layout})` : store)

/** W8's stores: memwal with an event object and with a Table built per event, and the peers. */
export const W8_STORES = [MEMWAL_OBJECTS, 'memwal tableFromArrays', 'better-sqlite3', 'lmdb', 'classic-level', 'lancedb']
/** W8e's stores (classic-level has no typed-array value, so it sits out the embeddings). */
export const W8E_STORES = [MEMWAL_OBJECTS, 'better-sqlite3', 'lmdb', 'lancedb']

/** W3's non-durable cell from a fresh writer, before backpressure can start. */
export const BURST = 'non-durable burst (fresh writer, 0.5 s)'
/** W3's non-durable cell over the full window. */
export const SUSTAINED = 'non-durable sustained'

/**
 * W5's MemTables that rotate under load (what its memory bound is judged against), with garbage
 * collection every second and compaction past 8 generations, so that their cost is in the cell.
 */
export const W5_ROTATING = {
  maxMemtableBatches: 1000,
  maxMemtableSize: 1 << 20,
  maxUnflushedMemtableBytes: 8 << 20,
  gcIntervalMs: 1000,
  gcGraceMs: 5000,
  compactionMaxGenerations: 8,
}
/** W5's MemTables large enough never to rotate during the cell. */
export const W5_STEADY = { maxMemtableBatches: 1 << 21, maxMemtableSize: 2 ** 33, maxUnflushedMemtableBytes: 2 ** 34 }
/**
 * W8's cells in run order, as `[workload, store, { kind, durable, clients }]`. memwal's durable
 * plain-object events run on each of `layouts` (see {@link layoutName}); its other cells on the
 * writer's default layout.
 */
export const w8Plan = (layouts = [null]) => {
  const stores = (durable) =>
    W8_STORES.flatMap((s) => (s === MEMWAL_OBJECTS && durable ? layouts.map((l) => layoutName(s, l)) : [s]))
  return [
    ...[true, false].flatMap((durable) =>
      [1, 64].flatMap((clients) => stores(durable).map((store) => ['W8', store, { kind: 'events', durable, clients }])),
    ),
    ...W8E_STORES.map((store) => ['W8e', store, { kind: 'embeddings', durable: true, clients: 64 }]),
  ]
}
