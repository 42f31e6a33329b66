// Logs: setLogger receives the core's records as objects, state changes at info
// and nothing per put; MEMWAL_LOG prints them to stderr; by default nothing is logged.

import { join } from 'node:path'

import test from 'ava'

import { InvalidArgumentError, type LogRecord, ShardWriter, setLogger } from '../index'
import { runProcess } from './support/child-process'
import { rows, schema, tempDir } from './support/helpers'

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

// setLogger is process-wide: these tests run one at a time.
test.serial('setLogger receives the claim with its shard fields, and nothing per put at info', async (t) => {
  const { records, logger, until } = recorder()
  setLogger(logger)
  t.teardown(() => setLogger(null))
  const w = await ShardWriter.open(tempDir(t), { schema, shard: 'logged' })
  await until((r) => r.message === 'claimed shard' && r.fields.writer_id === w.writerId)
  const claim = records.find((r) => r.message === 'claimed shard')
  t.like(claim, {
    level: 'info',
    target: 'memwal::writer',
    fields: { shard: w.shardId, shard_name: 'logged', epoch: 1, writer_id: w.writerId },
  })
  t.regex(claim?.timestamp ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
  for (let i = 0; i < 20; i++) await w.put(rows([i]))
  await w.close()
  // Records arrive in order: once the close's flush is here, so is anything the puts logged.
  await until((r) => r.message === 'flushed generation' && r.fields.shard === w.shardId)
  t.deepEqual(
    records.map((r) => r.message),
    ['claimed shard', 'sealed MemTable', 'flushed generation'],
  )
})

test.serial('a retry with another row count than its first put is a warning', async (t) => {
  const { records, logger, until } = recorder()
  setLogger(logger)
  t.teardown(() => setLogger(null))
  const w = await ShardWriter.open(tempDir(t), { schema, shard: 'retried' })
  const first = await w.put(rows([1, 2]), { requestId: 'order-1' })
  t.deepEqual(await w.put(rows([3, 4]), { requestId: 'order-1' }), first, 'same row count: silent')
  t.deepEqual(await w.put(rows([5]), { requestId: 'order-1' }), first, 'the first put still wins')
  await w.close()
  // Records arrive in order: once the close's flush is here, so is anything the puts logged.
  await until((r) => r.message === 'flushed generation' && r.fields.shard === w.shardId)
  const warnings = records.filter((r) => r.target === 'memwal::request_id')
  t.is(warnings.length, 1, JSON.stringify(warnings))
  t.like(warnings[0], {
    level: 'warn',
    message: "retry carries another row count than the first put of its requestId; it writes nothing and gets the first put's result",
    fields: { shard: w.shardId, request_id: 'order-1', first_rows: 2, retry_rows: 1 },
  })
})

test.serial('at trace level every put is logged; setLogger(null) stops the records', async (t) => {
  const first = recorder()
  setLogger(first.logger, { level: 'trace' })
  t.teardown(() => setLogger(null))
  const w = await ShardWriter.open(tempDir(t), { schema, shard: 'first' })
  await w.put(rows([1]))
  await first.until((r) => r.message === 'appended WAL entry')
  t.like(
    first.records.find((r) => r.message === 'appended WAL entry'),
    { level: 'trace', target: 'memwal::wal', fields: { rows: 1 } },
  )
  setLogger(null)
  const seen = first.records.length
  await w.put(rows([2]))
  await w.close()
  // A second logger hears of a later writer: by then the first would have had the records.
  const second = recorder()
  setLogger(second.logger)
  const other = await ShardWriter.open(tempDir(t), { schema, shard: 'second' })
  await second.until((r) => r.message === 'claimed shard' && r.fields.writer_id === other.writerId)
  await other.close()
  t.is(first.records.length, seen, JSON.stringify(first.records.slice(seen)))
  t.false(
    second.records.some((r) => r.fields.shard === w.shardId),
    JSON.stringify(second.records),
  )
})

test.serial('setLogger refuses what is not a logger or a level', (t) => {
  t.throws(() => setLogger('console' as never), { instanceOf: InvalidArgumentError, message: /must be a function or null/ })
  t.throws(() => setLogger(() => undefined, { level: 'verbose' as never }), {
    instanceOf: InvalidArgumentError,
    message: /unknown level string "verbose"; levels: error, warn, info, debug, trace/,
  })
})

const child = join(__dirname, 'support', 'logging-child.ts')

test('MEMWAL_LOG=debug prints the records to stderr; without it nothing is logged', async (t) => {
  const logged = await runProcess(process.execPath, ['--import', 'tsx', child, tempDir(t)], {
    cwd: __dirname,
    env: { ...process.env, MEMWAL_LOG: 'debug' },
  })
  t.is(logged.code, 0, logged.stderr)
  t.regex(logged.stderr, /INFO memwal::writer: claimed shard shard=[0-9a-f-]{36} shard_name="logged" epoch=1 writer_id=/)
  t.regex(logged.stderr, /INFO memwal::flush: flushed generation .*generation=1 rows=1/)
  t.notRegex(logged.stderr, /appended WAL entry/, 'a put logs at trace only')

  const quiet = await runProcess(process.execPath, ['--import', 'tsx', child, tempDir(t)], {
    cwd: __dirname,
    env: { ...process.env, MEMWAL_LOG: '' },
  })
  t.is(quiet.code, 0, quiet.stderr)
  t.notRegex(quiet.stderr, /memwal::/)
})
