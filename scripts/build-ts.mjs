// Compiles the TypeScript sources: index.ts twice, CommonJS (index.js, index.d.ts) for
// `require('memwal')` and ESM (index.mjs, index.d.mts) for `import ... from 'memwal'`; and the
// CLI (cli/*.ts → cli/*.js, CommonJS). Each flavour of index loads the matching build of
// apache-arrow, so a user's Table and memwal's encoder always come from one copy: mixing
// apache-arrow's CJS and ESM builds corrupts types silently (e.g. Int32 becomes "Int").
//
// Usage: node scripts/build-ts.mjs [outDir]   (default: the repo root; scripts/pack.mjs stages
// a package elsewhere so a build never rewrites files that running tests have loaded)
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const outDir = resolve(process.argv[2] ?? root)
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc')
const run = (...args) => execFileSync(process.execPath, [tsc, ...args], { cwd: root, stdio: 'inherit' })

run('-p', 'tsconfig.json', '--outDir', outDir)

const esm = mkdtempSync(join(tmpdir(), 'memwal-esm-'))
try {
  run('-p', 'tsconfig.json', '--module', 'ES2022', '--moduleResolution', 'Bundler', '--outDir', esm)
  renameSync(join(esm, 'index.js'), join(outDir, 'index.mjs'))
  // The declarations are the same for both flavours.
  writeFileSync(join(outDir, 'index.d.mts'), readFileSync(join(esm, 'index.d.ts')))
} finally {
  rmSync(esm, { recursive: true, force: true })
}
