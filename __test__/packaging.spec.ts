// The npm tarballs install and run with no Rust toolchain and no network, once through the
// napi-rs platform package and once through the prebuildify layout inside the main tarball.
//
// scripts/pack.mjs builds the release addon (a no-op after `npm ci`/`npm install`, which build
// it through `prepare`; minutes from cold) and packs both tarballs. Each test then makes a
// temp project outside the repo, installs with `npm install --offline` from the local npm
// cache and with cargo/rustc off PATH, type-checks __test__/support/consumer-smoke.ts against
// the installed typings, runs it with tsx, and checks which addon file was loaded.
//
// Offline installs need no registry metadata: the temp project gets a lockfile copied from the
// repo's package-lock.json (the packages memwal needs at runtime) plus the tarballs' own entries,
// so npm only reads tarballs from the cache, as `npm ci` left it.

import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'

import test from 'ava'

import { runProcess, type Run } from './support/child-process'
import { tempDir } from './support/helpers'

const root = join(__dirname, '..')
const repoPackage = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  version: string
  dependencies: Record<string, string>
  peerDependencies: Record<string, string>
  devDependencies: Record<string, string>
}

function expectOk(r: Run, what: string): string {
  if (r.code !== 0) throw new Error(`${what} exited with ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`)
  return r.stdout
}

const listTarball = (file: string): string[] =>
  spawnSync('tar', ['-tzf', file], { encoding: 'utf8' })
    .stdout.split('\n')
    .filter((l) => l !== '')

/** The environment of a machine with Node and npm but no Rust toolchain, offline. */
function consumerEnv(): NodeJS.ProcessEnv {
  const hasRust = (dir: string) => ['cargo', 'rustc', 'rustup'].some((b) => existsSync(join(dir, b)))
  const path = (process.env.PATH ?? '').split(':').filter((d) => d !== '' && !hasRust(d))
  const env: NodeJS.ProcessEnv = { ...process.env, PATH: path.join(':'), npm_config_offline: 'true' }
  // Nothing may point the loaders anywhere but the installed packages.
  for (const k of [
    'NODE_PATH',
    'NAPI_RS_NATIVE_LIBRARY_PATH',
    'MEMWAL_PREBUILD',
    'PREBUILDS_ONLY',
    'npm_config_prefix',
  ]) {
    delete env[k]
  }
  return env
}

/**
 * A limit on a release build, not a speed claim. The build after `npm ci` is never a no-op:
 * napi-rs forces the first build of a clean target/ with `NAPI_FORCE_BUILD_MEMWAL_NODE`, and
 * that variable's absence in the next build dirties memwal-node again (about 3 minutes
 * unloaded, 14 on a two-core machine running other compiles), so the limit is generous.
 */
const PACK_TIMEOUT_MS = 30 * 60_000

/** Packs both tarballs once for the whole file, into a directory removed after the last test. */
const tarballDir = mkdtempSync(join(tmpdir(), 'memwal-tarballs-'))
test.after.always(() => rmSync(tarballDir, { recursive: true, force: true }))
let packed: Promise<{ main: string; platform: string }> | undefined
function pack(): Promise<{ main: string; platform: string }> {
  packed ??= (async () => {
    const out = tarballDir
    expectOk(
      await runProcess(process.execPath, [join(root, 'scripts', 'pack.mjs'), '--out', out], { cwd: root }),
      'scripts/pack.mjs',
    )
    const file = (prefix: string) => {
      const f = readdirSync(out).find((n) => n === `${prefix}-${repoPackage.version}.tgz`)
      if (f === undefined) throw new Error(`no ${prefix} tarball in ${out}: ${readdirSync(out).join(', ')}`)
      return join(out, f)
    }
    return { main: file('memwal'), platform: file('memwal-linux-x64-gnu') }
  })()
  return packed
}

/**
 * A lockfile for a project depending on apache-arrow and the given tarballs: the third-party
 * entries are the repo's own (the closure of memwal's dependencies and peer dependencies).
 */
function consumerLock(project: string, tarballs: Record<string, string>): object {
  const repoLock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, Record<string, unknown>>
  }
  const all = repoLock.packages
  const registry = (process.env.npm_config_registry ?? 'https://registry.npmjs.org/').replace(/\/?$/, '/')
  const packages: Record<string, Record<string, unknown>> = {}
  const resolveFrom = (from: string, name: string): string | null => {
    for (let base = from; ;) {
      const candidate = `${base === '' ? '' : `${base}/`}node_modules/${name}`
      if (all[candidate] !== undefined) return candidate
      if (base === '') return null
      const i = base.lastIndexOf('/node_modules/')
      base = i < 0 ? '' : base.slice(0, i)
    }
  }
  const visit = (path: string) => {
    if (packages[path] !== undefined) return
    const { dev: _d, devOptional: _o, peer: _p, ...entry } = all[path] ?? {}
    if (entry.version === undefined) throw new Error(`package-lock.json has no ${path}`)
    // A registry URL spares npm a metadata lookup; the tarball itself comes from the cache,
    // by integrity (the repo's lockfile omits these URLs: omit-lockfile-registry-resolved).
    const name = path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length)
    entry.resolved ??= `${registry}${name}/-/${name.slice(name.lastIndexOf('/') + 1)}-${String(entry.version)}.tgz`
    packages[path] = entry
    const deps = {
      ...(entry.dependencies as object | undefined),
      ...(entry.optionalDependencies as object | undefined),
    }
    for (const name of Object.keys(deps)) {
      const p = resolveFrom(path, name)
      if (p !== null) visit(p)
    }
  }
  for (const name of [...Object.keys(repoPackage.dependencies), ...Object.keys(repoPackage.peerDependencies)]) {
    visit(`node_modules/${name}`)
  }
  const dependencies: Record<string, string> = { 'apache-arrow': repoPackage.devDependencies['apache-arrow']! }
  for (const [name, file] of Object.entries(tarballs)) {
    const spec = `file:${file}`
    dependencies[name] = spec
    const manifest = JSON.parse(
      spawnSync('tar', ['-xzOf', join(project, file), 'package/package.json'], { encoding: 'utf8' }).stdout,
    )
    const integrity = `sha512-${createHash('sha512')
      .update(readFileSync(join(project, file)))
      .digest('base64')}`
    const fields = ['license', 'dependencies', 'peerDependencies', 'bin', 'engines', 'os', 'cpu', 'libc']
    packages[`node_modules/${name}`] = {
      version: manifest.version,
      resolved: spec,
      integrity,
      ...Object.fromEntries(fields.filter((f) => manifest[f] !== undefined).map((f) => [f, manifest[f]])),
    }
  }
  packages[''] = { name: 'consumer', version: '1.0.0', dependencies }
  return {
    name: 'consumer',
    version: '1.0.0',
    lockfileVersion: 3,
    requires: true,
    packages: Object.fromEntries(Object.entries(packages).sort(([a], [b]) => a.localeCompare(b))),
    dependencies,
  }
}

interface SmokeReport {
  shardId: string
  esmIds: number[]
  cjsIds: number[]
  epoch: number
  generations: number
  addons: string[]
}

/** Installs the tarballs into a fresh project and runs the smoke script there; returns its report. */
async function installAndRun(
  work: string,
  tarballs: Record<string, string>,
): Promise<{ project: string; report: SmokeReport; install: Run }> {
  const project = join(work, 'consumer')
  mkdirSync(project)
  const local: Record<string, string> = {}
  for (const [name, file] of Object.entries(tarballs)) {
    const base = file.slice(file.lastIndexOf('/') + 1)
    copyFileSync(file, join(project, base))
    local[name] = base
  }
  const lock = consumerLock(project, local) as { dependencies: Record<string, string> }
  const { dependencies, ...lockfile } = lock
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, type: 'module', dependencies }, null, 2),
  )
  writeFileSync(join(project, 'package-lock.json'), JSON.stringify(lockfile, null, 2))
  copyFileSync(join(__dirname, 'support', 'consumer-smoke.ts'), join(project, 'smoke.ts'))
  writeFileSync(
    join(project, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        noEmit: true,
        skipLibCheck: true,
        types: ['node'],
        typeRoots: [join(root, 'node_modules', '@types')],
      },
      files: ['smoke.ts'],
    }),
  )

  const env = consumerEnv()
  const cargo = spawnSync('cargo', ['--version'], { env })
  if ((cargo.error as NodeJS.ErrnoException | undefined)?.code !== 'ENOENT') {
    throw new Error('cargo is still on PATH in the consumer environment')
  }
  const install = await runProcess('npm', ['install', '--offline', '--no-audit', '--no-fund'], { cwd: project, env })
  expectOk(install, 'npm install --offline')
  expectOk(
    await runProcess(
      process.execPath,
      [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'],
      { cwd: project, env },
    ),
    'tsc (the smoke script against the installed typings)',
  )
  const tsx = pathToFileURL(require.resolve('tsx')).href
  const out = expectOk(
    await runProcess(process.execPath, ['--import', tsx, 'smoke.ts', join(project, 'data')], { cwd: project, env }),
    'smoke.ts',
  )
  const report = JSON.parse(out.trim().split('\n').at(-1) ?? '') as SmokeReport
  return { project, report, install }
}

function checkSmoke(t: import('ava').ExecutionContext, report: SmokeReport): void {
  t.deepEqual(report.esmIds, [1, 2, 3, 4, 5], 'the reopened writer replayed every durable row')
  t.deepEqual(report.cjsIds, [1, 2, 3, 4, 5], 'require("memwal") reads the same rows')
  t.is(report.epoch, 2)
  t.is(report.generations, 1, 'close() flushed one Parquet generation')
}

test('the main tarball carries the JS, the CLI and prebuilds/linux-x64, and no local build', async (t) => {
  t.timeout(PACK_TIMEOUT_MS, 'scripts/pack.mjs builds the release addon (minutes from cold)')
  const { main, platform } = await pack()
  const files = listTarball(main)
  for (const f of [
    'package/package.json',
    'package/dist/index.js',
    'package/dist/index.mjs',
    'package/dist/index.d.ts',
    'package/dist/index.d.mts',
    'package/dist/lib/writer.js',
    'package/dist/lib/writer.mjs',
    'package/binding.js',
    'package/binding.d.ts',
    'package/native.js',
    'package/native.d.ts',
    'package/dist/cli/main.js',
    'package/prebuilds/linux-x64/memwal.glibc.node',
  ]) {
    t.true(files.includes(f), `${f} is in the main tarball`)
  }
  // Compiled output lives in dist/ only; the loader and the addon stay at the root.
  t.deepEqual(
    files.filter((f) => /\.(m?js|d\.m?ts)$/.test(f) && !f.startsWith('package/dist/')).sort(),
    ['package/binding.d.ts', 'package/binding.js', 'package/native.d.ts', 'package/native.js'],
  )
  t.deepEqual(
    files.filter((f) => f.endsWith('.node')),
    ['package/prebuilds/linux-x64/memwal.glibc.node'],
  )
  t.false(
    files.some((f) => f.endsWith('.ts') && !f.endsWith('.d.ts') && !f.endsWith('.d.mts')),
    'no TypeScript sources',
  )
  t.deepEqual(listTarball(platform).sort(), [
    'package/README.md',
    'package/memwal.linux-x64-gnu.node',
    'package/package.json',
  ])
  const manifest = JSON.parse(spawnSync('tar', ['-xzOf', main, 'package/package.json'], { encoding: 'utf8' }).stdout)
  t.is(manifest.scripts?.prepare, undefined, 'no lifecycle script that would try to build from source')
})

test('installed from the main tarball alone, memwal loads prebuilds/ through node-gyp-build', async (t) => {
  t.timeout(PACK_TIMEOUT_MS, 'scripts/pack.mjs builds the release addon (minutes from cold)')
  const work = tempDir(t)
  const { main } = await pack()
  const { project, report } = await installAndRun(work, { memwal: main })
  const installed = join(project, 'node_modules', 'memwal')
  t.false(existsSync(join(installed, 'memwal.linux-x64-gnu.node')), 'no local build next to binding.js')
  t.false(existsSync(join(installed, 'build')), 'no build/ for node-gyp-build to prefer')
  t.false(existsSync(join(project, 'node_modules', 'memwal-linux-x64-gnu')), 'no platform package')
  checkSmoke(t, report)
  t.deepEqual(report.addons, [join(installed, 'prebuilds', 'linux-x64', 'memwal.glibc.node')])

  // The CLI works from the install too.
  const inspect = await runProcess(
    join(project, 'node_modules', '.bin', 'memwal'),
    ['inspect', join(project, 'data')],
    { cwd: project, env: consumerEnv() },
  )
  t.is(inspect.code, 0, inspect.stderr)
  t.regex(inspect.stdout, new RegExp(`^shard default \\(${report.shardId}\\)$`, 'm'))
  const version = await runProcess(join(project, 'node_modules', '.bin', 'memwal'), ['--version'], {
    cwd: project,
    env: consumerEnv(),
  })
  t.is(version.code, 0, version.stderr)
  t.is(version.stdout.trim(), repoPackage.version, 'the installed CLI finds the package.json above dist/')
})

test('installed with the platform package, memwal loads memwal-linux-x64-gnu first', async (t) => {
  t.timeout(PACK_TIMEOUT_MS, 'scripts/pack.mjs builds the release addon (minutes from cold)')
  const work = tempDir(t)
  const { main, platform } = await pack()
  const { project, report } = await installAndRun(work, { memwal: main, 'memwal-linux-x64-gnu': platform })
  t.false(existsSync(join(project, 'node_modules', 'memwal', 'memwal.linux-x64-gnu.node')), 'no local build')
  checkSmoke(t, report)
  t.deepEqual(report.addons, [join(project, 'node_modules', 'memwal-linux-x64-gnu', 'memwal.linux-x64-gnu.node')])
})
