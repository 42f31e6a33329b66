// Looking up a run's cells: one by its parameters, and the best of several.

/**
 * A lookup of the cell of `results` with these parameters (any label unless one is given), or
 * null if none ran.
 */
export const cellFinder =
  (results) =>
  (w, store, rows, clients, durable = true, label = null) =>
    results.find(
      (r) =>
        r.workload === w &&
        r.store === store &&
        r.rows === rows &&
        r.clients === clients &&
        r.durable === durable &&
        (label === null || r.label === label),
    ) ?? null

/** The element of `arr` (nulls skipped) with the largest `f`, or null. */
export const best = (arr, f) => arr.filter(Boolean).reduce((b, r) => (b === null || f(r) > f(b) ? r : b), null)
