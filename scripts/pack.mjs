// `npm run pack [-- --out DIR]`: builds the two npm tarballs that install with no Rust toolchain
// (and no install script: npm 11 skips dependency install scripts):
//
//   memwal-<v>.tgz                the package: JS, typings, CLI, and the prebuildify layout
//                                 prebuilds/linux-x64/memwal.glibc.node (found by node-gyp-build)
//   memwal-linux-x64-gnu-<v>.tgz  the napi-rs platform package (npm/linux-x64-gnu), which the
//                                 generated loader finds before prebuilds/
//
// The release addon comes from prebuildify driving the napi build through
// scripts/napi-gyp-shim.sh. Everything is staged in a temp directory and packed with
// `npm pack --ignore-scripts`, so packing never rewrites the repo's own build outputs
// (memwal.linux-x64-gnu.node, binding.js, dist/), which running tests may have loaded.
// Prints the tarball paths, one per line. __test__/packaging.spec.ts installs them offline.
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

const root = fileURLToPath(new URL('..', import.meta.url))
const { values } = parseArgs({ options: { out: { type: 'string', default: '.' } } })
const out = resolve(values.out)
fs.mkdirSync(out, { recursive: true })

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
const run = (cmd, args, cwd = root) => execFileSync(cmd, args, { cwd, stdio: ['ignore', 'inherit', 'inherit'] })
const packInto = (dir) => {
  const json = execFileSync(npm, ['pack', '--ignore-scripts', '--json', '--pack-destination', out], {
    cwd: dir,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  return join(out, JSON.parse(json)[0].filename)
}

const stage = fs.mkdtempSync(join(tmpdir(), 'memwal-pack-'))
try {
  const main = join(stage, 'memwal')
  const platform = join(stage, 'linux-x64-gnu')
  fs.mkdirSync(main)
  fs.mkdirSync(platform)

  // 1. The release addon, in the prebuildify layout: <main>/prebuilds/linux-x64/memwal.glibc.node
  run(process.execPath, [
    join(root, 'node_modules', 'prebuildify', 'bin.js'),
    '--napi',
    '--tag-libc',
    '--node-gyp',
    join(root, 'scripts', 'napi-gyp-shim.sh'),
    '--out',
    main,
  ])
  const prebuilds = join(main, 'prebuilds', 'linux-x64')
  const addons = fs.readdirSync(prebuilds).filter((f) => f.endsWith('.node'))
  if (addons.length !== 1) throw new Error(`expected one addon in ${prebuilds}, found ${addons.join(', ') || 'none'}`)

  // 2. The JS side: compiled TS (dist/: the API and the CLI) and the files the package lists.
  run(process.execPath, [join(root, 'scripts', 'build-ts.mjs'), join(main, 'dist')])
  for (const f of ['README.md', 'binding.js', 'binding.d.ts', 'native.js', 'native.d.ts']) {
    fs.copyFileSync(join(root, f), join(main, f))
  }
  // Without the build hooks: npm 11 lists a dependency's `prepare` as an install script to
  // approve, and approving it would try to build from source on a machine without Rust.
  const manifest = JSON.parse(fs.readFileSync(join(root, 'package.json'), 'utf8'))
  delete manifest.scripts.prepare
  delete manifest.scripts.prepack
  fs.writeFileSync(join(main, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`)
  if (fs.existsSync(join(root, 'LICENSE'))) fs.copyFileSync(join(root, 'LICENSE'), join(main, 'LICENSE'))

  // 3. The platform package: its committed package.json and README plus the same addon.
  fs.cpSync(join(root, 'npm', 'linux-x64-gnu'), platform, { recursive: true, filter: (f) => !f.endsWith('.node') })
  fs.copyFileSync(join(prebuilds, addons[0]), join(platform, 'memwal.linux-x64-gnu.node'))

  for (const dir of [main, platform]) console.log(packInto(dir))
} finally {
  fs.rmSync(stage, { recursive: true, force: true })
}
