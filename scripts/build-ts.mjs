// Compiles the TypeScript sources into one folder, dist/ (so no compiled file sits beside a
// source, where tsx or an editor could pick it up instead): CommonJS for `require('memwal')`
// (dist/index.js, dist/lib/*.js, with their .d.ts), ESM for `import ... from 'memwal'`
// (dist/index.mjs, dist/lib/*.mjs, with their .d.mts), and the CLI (dist/cli/*.js, CommonJS).
// Each flavour of the API loads the matching build of apache-arrow for the Tables that `scan`
// returns. What users pass in is read by its structure (lib/arrow-schema.ts,
// lib/arrow-columns.ts), so it may come from either build, or from another apache-arrow version.
//
// Both flavours sit side by side in one package without "type": "module", so the ESM files need
// the .mjs extension: each build is compiled to a temp directory, then the ESM build's modules
// are renamed, and their relative imports of each other renamed to match.
//
// The addon loader (native.js, binding.js) is not compiled and stays at the package root, where
// the napi-rs build writes the local addon and prebuildify writes prebuilds/. dist/ mirrors the
// source tree one level down, so every relative import of such a root file ('../native.js' in
// lib/redact.ts) is re-pointed one level up ('../../native.js' in dist/lib/redact.js).
//
// Usage: node scripts/build-ts.mjs [outDir]   (default: dist/ in the repo; scripts/pack.mjs
// stages a package elsewhere so a build never rewrites files that running tests have loaded.
// outDir must sit directly in the package root, as dist/ does, for the re-pointed imports.)
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, posix, relative, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))
const outDir = resolve(process.argv[2] ?? join(root, 'dist'))
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc')
const run = (...args) => execFileSync(process.execPath, [tsc, ...args], { cwd: root, stdio: 'inherit' })

/** Every file under `dir`, as posix paths relative to it. */
const filesUnder = (dir) =>
  readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath ?? e.path, e.name)).split(sep).join('/'))

// Relative specifiers of tsc's output, which it writes as they are in the sources:
// `require("./x.js")` (CommonJS), `from './x.js'`, `import './x.js'` and `import("./x.js")`.
const specifier = /(\brequire\s*\(\s*|\bfrom\s*|\bimport\s*\(?\s*)(['"])(\.\.?\/[^'"]*)\.js\2/g

/**
 * The text of `module` (a source path without extension, such as 'lib/errors') with each
 * relative specifier re-pointed: a compiled module keeps its path, with `esm` renamed to .mjs;
 * anything else is a root file, reached from one level further down.
 */
function rewrite(module, text, compiled, esm) {
  const dir = posix.dirname(module)
  return text.replace(specifier, (whole, lead, quote, path) => {
    const target = posix.join(dir, path)
    if (compiled.has(target)) return esm.has(target) ? `${lead}${quote}${path}.mjs${quote}` : whole
    const up = posix.relative(posix.join('dist', dir), target)
    return `${lead}${quote}${up.startsWith('.') ? up : `./${up}`}.js${quote}`
  })
}

const stripExt = (f, ext) => f.slice(0, -ext.length)
const extOf = (f) => ['.d.ts', '.d.mts', '.mjs', '.js'].find((e) => f.endsWith(e))

/**
 * Compiles the sources into a temp directory with the extra tsc `flags`, then writes the files
 * `pick` keeps into outDir, renamed by `rename` and rewritten. Only what this build emitted is
 * written (and rewritten once): a module whose source is gone keeps its old file, which
 * nothing imports.
 */
function compile(flags, pick, rename, compiled, esm) {
  const tmp = mkdtempSync(join(tmpdir(), 'memwal-tsc-'))
  try {
    run('-p', 'tsconfig.json', ...flags, '--outDir', tmp)
    const files = filesUnder(tmp)
    compiled ??= new Set(files.filter((f) => f.endsWith('.js')).map((f) => stripExt(f, '.js')))
    for (const f of files.filter(pick)) {
      const ext = extOf(f)
      const module = stripExt(f, ext)
      const to = join(outDir, module + rename(ext))
      mkdirSync(dirname(to), { recursive: true })
      writeFileSync(to, rewrite(module, readFileSync(join(tmp, f), 'utf8'), compiled, esm))
    }
    return compiled
  } finally {
    rmSync(tmp, { recursive: true, force: true })
  }
}

// CommonJS: the API and the CLI, as tsc names them.
const compiled = compile([], () => true, (ext) => ext, undefined, new Set())
// ESM: the API's modules (index and lib/) only, the CLI being CommonJS; .js becomes .mjs and
// .d.ts .d.mts, and so do their imports of each other.
const api = (f) => f === 'index.js' || f === 'index.d.ts' || f.startsWith('lib/')
const esm = new Set([...compiled].filter((m) => api(`${m}.js`)))
compile(
  ['--module', 'ES2022', '--moduleResolution', 'Bundler'],
  api,
  (ext) => (ext === '.js' ? '.mjs' : '.d.mts'),
  compiled,
  esm,
)
