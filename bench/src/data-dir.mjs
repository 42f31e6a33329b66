// The benchmark's data directory: freeing a finished cell's space, and removing it all at the
// end.

import fs from 'node:fs'
import path from 'node:path'

/**
 * Frees a finished cell's disk space but keeps its files, emptied, until the run ends (when
 * the whole data directory is removed). On ext4 without a journal (this class of VM), creating
 * a file scans past every inode freed in the last minutes (`recently_deleted` in ext4's inode
 * allocator): deleting one cell's tens of thousands of small files made each file created by
 * the cells after it cost up to a millisecond of kernel CPU (a quarter of all CPU samples in a
 * profile of durable puts). That charged memwal and the floors, which create a file per WAL
 * entry, for the harness's own cleanup, and the peers, which reuse their files, nothing.
 */
export function retire(dir) {
  let entries
  try {
    entries = fs.readdirSync(dir, { recursive: true, withFileTypes: true })
  } catch (e) {
    if (e?.code === 'ENOENT') return
    throw e
  }
  for (const e of entries) {
    if (!e.isFile()) continue
    try {
      fs.truncateSync(path.join(e.parentPath ?? e.path, e.name), 0)
    } catch (err) {
      // abort() does not wait for a flush already writing (see rmrf below): its staging file
      // can be renamed, or collection can remove a file, between the listing and here.
      if (err?.code !== 'ENOENT') throw err
    }
  }
}

// abort() stops a writer's tasks without waiting for an append already handed to the disk; that
// file can still appear while the directory is being removed, so retry on ENOTEMPTY.
// (Node 20's own maxRetries does not cover a rmdir deep in the tree.)
export function rmrf(p) {
  for (let attempt = 1; ; attempt++) {
    try {
      fs.rmSync(p, { recursive: true, force: true })
      return
    } catch (e) {
      if (e?.code !== 'ENOTEMPTY' || attempt >= 40) throw e
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50)
    }
  }
}
