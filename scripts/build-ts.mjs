// Compiles the TypeScript sources twice: CommonJS for `require('memwal')` (index.js, lib/*.js,
// with their .d.ts) and ESM for `import ... from 'memwal'` (index.mjs, lib/*.mjs, with their
// .d.mts); and the CLI (cli/*.ts → cli/*.js, CommonJS). Each flavour of the API loads the
// matching build of apache-arrow for the Tables that `scan` returns. What users pass in is read
// by its structure (lib/arrow-schema.ts, lib/arrow-columns.ts), so it may come from either
// build, or from another apache-arrow version.
//
// Both flavours sit side by side in one package without "type": "module", so the ESM files need
// the .mjs extension: the ESM build is compiled to a temp directory, then each of its modules
// is renamed and its relative imports of the others are renamed to match. Imports of
// native.js (CommonJS, loaded by both flavours) and of packages are left as they are.
//
// Usage: node scripts/build-ts.mjs [outDir]   (default: the repo root; scripts/pack.mjs stages
// a package elsewhere so a build never rewrites files that running tests have loaded)
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, posix, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const outDir = resolve(process.argv[2] ?? root)
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc')
const run = (...args) => execFileSync(process.execPath, [tsc, ...args], { cwd: root, stdio: 'inherit' })

run('-p', 'tsconfig.json', '--outDir', outDir)

const esm = mkdtempSync(join(tmpdir(), 'memwal-esm-'))
try {
  run('-p', 'tsconfig.json', '--module', 'ES2022', '--moduleResolution', 'Bundler', '--outDir', esm)
  // The API's modules, as paths relative to the package root without extension.
  const modules = [
    'index',
    ...readdirSync(join(esm, 'lib'))
      .filter((f) => f.endsWith('.js'))
      .map((f) => `lib/${f.slice(0, -'.js'.length)}`),
  ]
  const renamed = new Set(modules)
  // `from './x.js'`, `import './x.js'` and `import("./x.js")` (in declarations): the relative
  // specifiers of the ESM output, which tsc writes as they are in the sources.
  const specifier = /(\bfrom\s*|\bimport\s*\(?\s*)(['"])(\.\.?\/[^'"]*)\.js\2/g
  const rewrite = (module, text) =>
    text.replace(specifier, (whole, lead, quote, path) =>
      renamed.has(posix.join(posix.dirname(module), path)) ? `${lead}${quote}${path}.mjs${quote}` : whole,
    )
  mkdirSync(join(outDir, 'lib'), { recursive: true })
  for (const module of modules) {
    for (const [from, to] of [
      ['.js', '.mjs'],
      ['.d.ts', '.d.mts'],
    ]) {
      writeFileSync(join(outDir, module + to), rewrite(module, readFileSync(join(esm, module + from), 'utf8')))
    }
  }
} finally {
  rmSync(esm, { recursive: true, force: true })
}
