// Credentials planted in a location (a userinfo password, a `?sig=` value) and in an S3
// endpoint (`http://user:PASSWORD@127.0.0.1:port`) never come out of memwal, on any channel:
// the CLI's stdout and stderr for every command, its --json forms and its failures (with
// MEMWAL_LOG=trace and MEMWAL_DEBUG on, so its logs and stack traces are in stderr too); the
// records a logger set with setLogger receives at trace level, the HTTP client's included;
// MEMWAL_LOG=trace's stderr; ObjectStore.location; events and metrics. What is masked, and
// how, is `crates/memwal-core/src/redact.rs`, whose unit tests sit beside it.

import { randomUUID } from 'node:crypto'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'

import test from 'ava'

import { type LogRecord, ObjectStore, ShardWriter, type StorageOptions, setLogger } from '../index'
import { runProcess, type Run } from './support/child-process'
import { rows, schema, tempDir } from './support/helpers'
import { type S3Server, startS3Server } from './support/s3-server'

const root = join(__dirname, '..')

/** The userinfo password of a location. */
const LOCATION_PASSWORD = 'PLANTEDlocationPassword71'
/** A `sig=` value in a location's query. */
const SIGNATURE = 'PLANTEDsignature38'
/** The userinfo password of the S3 endpoint. */
const ENDPOINT_PASSWORD = 'PLANTEDendpointPassword59'
/**
 * Every planted string, and the endpoint's userinfo as the HTTP client would send it in a
 * Basic `Authorization` header, so a header in a log record counts as a leak too.
 */
const PLANTED = [
  LOCATION_PASSWORD,
  SIGNATURE,
  ENDPOINT_PASSWORD,
  Buffer.from(`user:${ENDPOINT_PASSWORD}`).toString('base64'),
]

/** The planted secrets `text` holds: none, once masking works. */
function leaks(text: string): string[] {
  return PLANTED.filter((secret) => text.includes(secret))
}

/** `http://127.0.0.1:port` with the endpoint's password planted in its userinfo. */
function endpointWithPassword(s3: S3Server): string {
  return s3.endpoint.replace('http://', `http://user:${ENDPOINT_PASSWORD}@`)
}

/** `s3://bucket/prefix` with the location's password and a signature planted. */
function plantedLocation(location: string): string {
  return `${location.replace('s3://', `s3://AKIAUSER:${LOCATION_PASSWORD}@`)}?sig=${SIGNATURE}`
}

/** The planted location as memwal must show it. */
function maskedLocation(location: string): string {
  return `${location.replace('s3://', 's3://***@')}?sig=***`
}

/** Where a command's output is kept for the assertions: its arguments and what it printed. */
function described(args: string[], r: Run): string {
  return `memwal ${args.join(' ')} (exit ${r.code})\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`
}

/**
 * `memwal ...args` as a user would run it, reaching `s3` through AWS_* variables (the CLI has
 * no storage options) with the endpoint's password planted, and with every output channel on:
 * MEMWAL_LOG=trace (the core's and the HTTP client's records on stderr) and MEMWAL_DEBUG=1
 * (stack traces of unexpected errors).
 */
function memwal(s3: S3Server | null, ...args: string[]): Promise<Run> {
  const aws =
    s3 === null
      ? {}
      : {
          AWS_ENDPOINT: endpointWithPassword(s3),
          AWS_ALLOW_HTTP: 'true',
          AWS_REGION: String(s3.storage.region),
          AWS_ACCESS_KEY_ID: String(s3.storage.accessKeyId),
          AWS_SECRET_ACCESS_KEY: String(s3.storage.secretAccessKey),
        }
  const env: NodeJS.ProcessEnv = { ...process.env, FORCE_COLOR: '0', MEMWAL_LOG: 'trace', MEMWAL_DEBUG: '1', ...aws }
  if (s3 === null) {
    for (const key of Object.keys(env)) if (key.startsWith('AWS_')) delete env[key]
  }
  return runProcess(process.execPath, ['--import', 'tsx', join(root, 'cli', 'main.ts'), ...args], { cwd: root, env })
}

/** A shard with two flushed rows and one in the WAL only, at a fresh location on `s3`. */
async function seededShard(s3: S3Server): Promise<string> {
  const location = s3.location('secrets')
  const w = await ShardWriter.open(location, { schema, storage: s3.storage, gc: false })
  await w.put(rows([1, 2]))
  await w.forceSealActive()
  await w.waitForFlushDrain()
  await w.put(rows([3]))
  await w.abort()
  return location
}

/** Every command, in its text and its JSON form. */
const COMMANDS: string[][] = [
  ['inspect'],
  ['inspect', '--json'],
  ['stats'],
  ['stats', '--json'],
  ['files'],
  ['files', '--json'],
  ['wal'],
  ['wal', '--json'],
  ['scan'],
  ['scan', '--format', 'json'],
  ['gc', '--dry-run'],
  ['gc', '--json'],
]

/** Every command once, in its JSON form: a failure is reported the same way in both. */
const JSON_COMMANDS = COMMANDS.filter((args) => args.includes('--json') || args.includes('json'))

/** `memwal command location ...options` for each of `commands`. */
function invocations(commands: string[][], location: string, ...extra: string[]): string[][] {
  return commands.map(([command, ...options]) => [command!, location, ...extra, ...options])
}

// Each CLI test spawns a dozen or more processes: run one at a time, so that none waits on
// the others' and each reports as it ends.
test.serial('no CLI command prints an S3 location’s or endpoint’s credentials, on stdout or stderr, with trace logs on', async (t) => {
  const s3 = await startS3Server(t)
  const location = await seededShard(s3)
  const planted = plantedLocation(location)
  for (const args of invocations(COMMANDS, planted)) {
    const r = await memwal(s3, ...args)
    t.is(r.code, 0, described(args, r))
    t.deepEqual(leaks(r.stdout + r.stderr), [], described(args, r))
    // The HTTP client's trace records, which quote the endpoint, were on stderr: masked, not absent.
    t.regex(r.stderr, /TRACE (?!memwal)/, described(args, r))
    if (args[0] === 'inspect' && args.includes('--json')) {
      t.is((JSON.parse(r.stdout) as { location: string }).location, maskedLocation(location))
    } else if (args[0] === 'inspect') {
      t.true(r.stdout.startsWith(`${maskedLocation(location)}: 1 shard`), r.stdout)
    } else if (args[0] === 'stats' && args.includes('--json')) {
      t.is((JSON.parse(r.stdout) as { location: string }).location, maskedLocation(location))
    }
  }
})

test.serial('failing CLI commands on S3 never print the credentials of the location or the endpoint', async (t) => {
  const s3 = await startS3Server(t)
  const location = await seededShard(s3)
  const planted = plantedLocation(location)
  const cases: Array<[S3Server | null, string[]]> = [
    // No such shard: the error names the location.
    ...invocations(JSON_COMMANDS, planted, '--shard', 'no-such-shard').map((args): [S3Server, string[]] => [s3, args]),
    // No shard at all there.
    ...invocations(JSON_COMMANDS, plantedLocation(s3.location('empty'))).map((args): [S3Server, string[]] => [s3, args]),
    // No credentials at all: refused before any request, naming the location.
    [null, ['inspect', planted]],
    [null, ['stats', planted, '--json']],
  ]
  for (const [server, args] of cases) {
    const r = await memwal(server, ...args)
    t.not(r.code, 0, described(args, r))
    t.not(r.stderr, '', described(args, r))
    t.deepEqual(leaks(r.stdout + r.stderr), [], described(args, r))
  }
})

for (const [title, location] of [
  // The CLI checks the directory the URI names (without its query); the store opens the URI as
  // given, which holds no shard.
  ['a planted query on a directory with a shard', (dir: string) => `file://${dir}?sig=${SIGNATURE}&token=${LOCATION_PASSWORD}`],
  ['a planted query on an empty directory', (dir: string) => `file://${dir}/empty?sig=${SIGNATURE}`],
  ['a planted query on a missing directory', (dir: string) => `file://${dir}/missing?sig=${SIGNATURE}`],
  ['a planted userinfo password', (dir: string) => `file://user:${LOCATION_PASSWORD}@localhost${dir}`],
] as const) {
  test.serial(`CLI commands on a file:// URI with ${title} fail without printing it`, async (t) => {
    const dir = tempDir(t)
    const w = await ShardWriter.open(dir, { schema, gc: false })
    await w.put(rows([1]))
    await w.close()
    mkdirSync(join(dir, 'empty'))
    for (const args of invocations(JSON_COMMANDS, location(dir))) {
      const r = await memwal(null, ...args)
      t.not(r.code, 0, described(args, r))
      t.deepEqual(leaks(r.stdout + r.stderr), [], described(args, r))
    }
  })
}

test.serial('CLI commands on a local directory whose name looks like a signed URL show it masked', async (t) => {
  // A plain path is not parsed as a URI, so this directory opens; what the commands show of its
  // location is masked all the same. `files` is left out: it prints the generation files' real
  // paths, for other tools to open.
  const dir = join(tempDir(t), `d?sig=${SIGNATURE}`)
  const w = await ShardWriter.open(dir, { schema, gc: false })
  await w.put(rows([1]))
  await w.close()
  for (const args of invocations(COMMANDS.filter(([command]) => command !== 'files'), dir)) {
    const r = await memwal(null, ...args)
    t.is(r.code, 0, described(args, r))
    t.deepEqual(leaks(r.stdout + r.stderr), [], described(args, r))
    if (args[0] === 'inspect' && args.includes('--json')) {
      t.is((JSON.parse(r.stdout) as { location: string }).location, dir.replace(SIGNATURE, '***'))
    }
  }
})

/** A logger that keeps every record, and a wait for the first one that `matches`. */
function recorder() {
  const records: LogRecord[] = []
  const waiting: Array<[(r: LogRecord) => boolean, () => void]> = []
  const logger = (r: LogRecord): void => {
    records.push(r)
    for (const [matches, resolve] of waiting) if (matches(r)) resolve()
  }
  const until = (matches: (r: LogRecord) => boolean): Promise<void> => {
    if (records.some(matches)) return Promise.resolve()
    // Records do not keep the process alive: a timer does, until the record comes.
    const alive = setInterval(() => undefined, 1000)
    return new Promise<void>((resolve) => waiting.push([matches, resolve])).finally(() => clearInterval(alive))
  }
  return { records, logger, until }
}

/** `s3`'s storage options with the endpoint's password planted. */
function plantedStorage(s3: S3Server): StorageOptions {
  return { ...s3.storage, endpoint: endpointWithPassword(s3) }
}

// setLogger is process-wide: the tests that set it run one at a time.
test.serial('setLogger at trace never receives an endpoint’s or a location’s credentials, nor do events, metrics or ObjectStore.location', async (t) => {
  const s3 = await startS3Server(t)
  const location = s3.location('logged')
  const planted = plantedLocation(location)
  const storage = plantedStorage(s3)
  const { records, logger, until } = recorder()
  setLogger(logger, { level: 'trace' })
  t.teardown(() => setLogger(null))
  const w = await ShardWriter.open(planted, { schema, storage, shard: 'logged' })
  const events: unknown[] = []
  for (const name of ['walAppend', 'generationFlushed', 'retry', 'gc'] as const) {
    w.on(name, (e: unknown) => events.push(e))
  }
  await w.put(rows([1, 2]))
  await w.put(rows([3]))
  const metrics = w.metrics()
  const stats = await w.stats()
  await w.close()
  await until((r) => r.message === 'flushed generation' && r.fields.shard === w.shardId)
  const store = ObjectStore.fromUri(planted, storage)
  t.is(store.location, maskedLocation(location))
  t.is((await store.listShards()).length, 1)
  const text = JSON.stringify(records)
  t.deepEqual(leaks(text), [], text)
  t.deepEqual(leaks(JSON.stringify(events)), [], JSON.stringify(events))
  t.deepEqual(leaks(metrics + JSON.stringify(stats)), [])
  // The HTTP client logged its requests to the endpoint: masked, not absent.
  t.true(
    records.some((r) => !r.target.startsWith('memwal')),
    'records of the HTTP client under object_store',
  )
  t.true(text.includes(`***@127.0.0.1`), 'the endpoint is logged with its userinfo masked')
})

test.serial('MEMWAL_LOG=trace never prints an endpoint’s or a location’s credentials to stderr', async (t) => {
  const s3 = await startS3Server(t)
  const planted = plantedLocation(s3.location('stderr'))
  const r = await runProcess(
    process.execPath,
    ['--import', 'tsx', join(__dirname, 'support', 'logging-child.ts'), planted, JSON.stringify(plantedStorage(s3))],
    { cwd: __dirname, env: { ...process.env, MEMWAL_LOG: 'trace' } },
  )
  t.is(r.code, 0, r.stderr)
  t.regex(r.stderr, /INFO memwal::writer: claimed shard/)
  t.regex(r.stderr, /TRACE (?!memwal)/, 'the HTTP client logged too')
  t.true(r.stderr.includes('***@127.0.0.1'), 'the endpoint is logged with its userinfo masked')
  t.deepEqual(leaks(r.stdout + r.stderr), [])
})

test.serial('a writer that cannot reach an endpoint with credentials names it masked', async (t) => {
  // Port 9 (discard) refuses connections on the test machine, so the open fails fast.
  const storage: StorageOptions = {
    endpoint: `http://user:${ENDPOINT_PASSWORD}@127.0.0.1:9`,
    allowHttp: true,
    accessKeyId: 'a',
    secretAccessKey: 'b',
    region: 'us-east-1',
    clientMaxRetries: 0,
  }
  const { records, logger } = recorder()
  setLogger(logger, { level: 'trace' })
  t.teardown(() => setLogger(null))
  const e = await t.throwsAsync(ShardWriter.open(plantedLocation(`s3://bucket/${randomUUID()}`), { schema, storage }))
  t.deepEqual(leaks(`${e?.message}\n${e?.stack}\n${JSON.stringify(records)}`), [], e?.message)
})
