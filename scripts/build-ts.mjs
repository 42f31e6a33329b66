// Compiles index.ts twice: CommonJS (index.js, index.d.ts) for `require('memwal')` and ESM
// (index.mjs, index.d.mts) for `import ... from 'memwal'`. Each flavour loads the matching
// build of apache-arrow, so a user's Table and memwal's encoder always come from one copy:
// mixing apache-arrow's CJS and ESM builds corrupts types silently (e.g. Int32 becomes "Int").
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc')
const run = (...args) => execFileSync(process.execPath, [tsc, ...args], { cwd: root, stdio: 'inherit' })

run('-p', 'tsconfig.json')

const out = mkdtempSync(join(tmpdir(), 'memwal-esm-'))
try {
  run('-p', 'tsconfig.json', '--module', 'ES2022', '--moduleResolution', 'Bundler', '--outDir', out)
  renameSync(join(out, 'index.js'), join(root, 'index.mjs'))
  // The declarations are the same for both flavours.
  writeFileSync(join(root, 'index.d.mts'), readFileSync(join(out, 'index.d.ts')))
} finally {
  rmSync(out, { recursive: true, force: true })
}
