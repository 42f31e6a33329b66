// The `memwal` CLI, spawned as a user would run it (from source, through tsx): output and exit
// codes of every command, including bad input. One small demo run provides the shard the
// read-only commands look at.

import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'

import test from 'ava'

import { memwalCli as memwal, runProcess, type Run } from './support/child-process'
import { MemWalError, type MemWalErrorCode, ShardReader, ShardWriter } from '../index'
import { Exit, exitCodeOf } from '../cli/exit-codes'
import { rows, schema, tempDir } from './support/helpers'

const root = join(__dirname, '..')


// Exit codes, as documented in the README and `memwal --help`.
const USAGE = 2
const NOT_FOUND = 3
const CORRUPT = 4

const ROWS = 20_000

/** One demo run shared by the read-only tests: small MemTables so it rotates several times. */
const workDir = mkdtempSync(join(tmpdir(), 'memwal-cli-'))
test.after.always(() => rmSync(workDir, { recursive: true, force: true }))
const demoDir = join(workDir, 'demo')
let demoRun: Promise<Run> | undefined
async function demo(): Promise<{ run: Run; shard: string }> {
  demoRun ??= memwal(
    'demo',
    demoDir,
    '--rows',
    String(ROWS),
    '--writers',
    '4',
    '--batch-rows',
    '500',
    '--memtable-size',
    '65536',
  )
  const run = await demoRun
  if (run.code !== 0) throw new Error(`demo failed (${run.code}):\n${run.stdout}\n${run.stderr}`)
  const shard = readdirSync(join(demoDir, '_mem_wal'))[0]!
  return { run, shard }
}

test('--help lists the commands and the exit codes; every command has --help', async (t) => {
  const help = await memwal('--help')
  t.is(help.code, 0)
  for (const c of ['inspect', 'stats', 'wal', 'scan', 'files', 'demo']) t.regex(help.stdout, new RegExp(`^  ${c} `, 'm'))
  t.regex(help.stdout, /Exit codes:[\s\S]*3 {2}not found/)
  for (const c of ['inspect', 'stats', 'wal', 'scan', 'files', 'demo']) {
    const r = await memwal(c, '--help')
    t.is(r.code, 0, c)
    t.regex(r.stdout, new RegExp(`^Usage: memwal ${c} `, 'm'))
    t.regex(r.stdout, /Exit codes:/)
  }
  const version = await memwal('--version')
  t.is(version.code, 0)
  t.is(version.stdout.trim(), JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version)
})

test('bad command lines exit 2 with one clear line, not a stack', async (t) => {
  const cases: Array<[string[], RegExp]> = [
    [[], /Usage: memwal/],
    [['frobnicate'], /unknown command 'frobnicate'/],
    [['inspect'], /missing required argument 'location'/],
    [['inspect', workDir, '--bogus'], /unknown option '--bogus'/],
    [['wal', workDir, '--shard', 'x', '--from', '0'], /'--from <n>' argument '0' is invalid\. expected an integer ≥ 1/],
    [['wal', workDir, '--shard', 'x', '--limit', 'ten'], /'--limit <m>' argument 'ten' is invalid/],
    [['scan', workDir, '--shard', 'x', '--format', 'xml'], /expected one of table, json, ndjson, csv/],
    [['scan', workDir, '--shard', 'x', '--limit', '-1'], /'--limit <n>' argument '-1' is invalid/],
    [['demo', workDir, '--rows', '0'], /'--rows <n>' argument '0' is invalid/],
    [['inspect', 'gopher://bucket/data'], /^memwal: INVALID_ARGUMENT: unsupported location scheme/m],
    // No credentials in the environment: refused before any request (none leaves the machine).
    [['inspect', 's3://bucket/data'], /^memwal: INVALID_ARGUMENT: no credentials for s3:\/\/bucket\/data/m],
  ]
  for (const [args, message] of cases) {
    const r = await memwal(...args)
    t.is(r.code, USAGE, args.join(' '))
    t.regex(r.stderr, message, args.join(' '))
    t.notRegex(r.stderr, /\n\s+at /, 'no stack trace')
  }
})

test('demo ingests, fails over, reopens and verifies every acknowledged row', async (t) => {
  const { run, shard } = await demo()
  t.regex(run.stdout, new RegExp(`shard default \\(${shard}\\): writer epoch 1`))
  t.regex(run.stdout, /ingested 20,000 rows in [\d.]+ s: [\d,]+ rows\/s/)
  t.regex(run.stdout, /40 durable puts in [\d,]+ WAL entr/)
  const rotated = Number(/(\d+) MemTables? rotated/.exec(run.stdout)?.[1])
  t.true(rotated >= 2, `rotated ${rotated} MemTables`)
  t.regex(run.stdout, /failover: a second writer opened the shard .* \(epoch 2;/)
  t.regex(run.stdout, /the first writer \(epoch 1\) is fenced: .*FencedError \(PeerClaimedEpoch\)/)
  t.regex(run.stdout, /every one of the 20,000 acknowledged rows is there exactly once, and nothing else/)
  t.regex(run.stdout, /summary: 20,000 rows, [\d,]+ rows\/s durable ingest from 4 writers/)
  t.regex(run.stderr, /100% \| 20000\/20000 rows acknowledged/, 'the progress bar reached the end')
})

test('demo refuses a non-empty directory it did not make, and reruns in its own', async (t) => {
  const foreign = tempDir(t)
  writeFileSync(join(foreign, 'precious.txt'), 'keep me')
  const refused = await memwal('demo', foreign, '--rows', '10')
  t.is(refused.code, USAGE)
  t.regex(refused.stderr, /is not empty and was not made by `memwal demo`/)
  t.is(readFileSync(join(foreign, 'precious.txt'), 'utf8'), 'keep me')

  const own = join(tempDir(t), 'demo')
  for (let i = 0; i < 2; i++) {
    const r = await memwal('demo', own, '--rows', '1000', '--writers', '2', '--batch-rows', '100')
    t.is(r.code, 0, r.stderr)
  }
  t.is(readdirSync(join(own, '_mem_wal')).length, 1, 'the rerun replaced the earlier shard')
})

test('inspect reports epoch, manifest version, generations, replay cursor and WAL lag', async (t) => {
  const { shard } = await demo()
  const text = await memwal('inspect', demoDir)
  t.is(text.code, 0, text.stderr)
  t.regex(text.stdout, /: 1 shard\n/)
  t.regex(text.stdout, new RegExp(`^shard default \\(${shard}\\)$`, 'm'))
  t.regex(text.stdout, /epoch 2, manifest version \d+/)
  t.regex(text.stdout, /flushed generations: \d+ \(20,000 rows, /)
  t.regex(text.stdout, /^ {4}generation +rows +in-memory size +file$/m)
  // A generation file as the manifest lists it (compaction renumbers no generation, but may
  // replace the first ones by a merged file).
  t.regex(text.stdout, /^ {4}\d+ +[\d,]+ +[\d.]+ \w+ +[0-9a-f]{8}_gen_\d+\/data\.parquet$/m)
  t.regex(text.stdout, /replay cursor: WAL position \d+/)
  t.regex(text.stdout, /WAL tip: position \d+; lag: \d+ entr/)

  const json = await memwal('inspect', demoDir, '--shard', shard, '--json')
  t.is(json.code, 0, json.stderr)
  const report = JSON.parse(json.stdout) as {
    shards: Array<{
      shardId: string
      epoch: number
      generations: Array<{ rows: number }>
      replayCursor: number
      walTip: number
      walLag: number
    }>
  }
  const s = report.shards[0]!
  t.is(s.shardId, shard)
  t.is(s.epoch, 2)
  t.is(
    s.generations.reduce((n, g) => n + g.rows, 0),
    ROWS,
  )
  t.true(s.walTip >= s.replayCursor)
  t.is(s.walLag, s.walTip - s.replayCursor)
})

test('inspect names the holder: writer id, host, pid, epoch and claim time', async (t) => {
  const dir = tempDir(t)
  const w = await ShardWriter.open(dir, { schema })
  await w.put(rows([1]))
  await w.close()
  const claimedAt = (await ShardReader.open(dir, { shardId: w.shardId }).then((r) => r.manifest())).holder?.claimedAt
  t.truthy(claimedAt)
  const text = await memwal('inspect', dir)
  t.is(text.code, 0, text.stderr)
  t.true(
    text.stdout.includes(
      `  holder: writer ${w.writerId} on host ${hostname()} pid ${process.pid} (epoch ${w.epoch}, claimed at ${claimedAt!.toISOString()})\n`,
    ),
    text.stdout,
  )
  const json = await memwal('inspect', dir, '--json')
  t.is(json.code, 0, json.stderr)
  const report = JSON.parse(json.stdout) as { shards: Array<{ holder: unknown }> }
  t.deepEqual(report.shards[0]?.holder, {
    writerId: w.writerId,
    host: hostname(),
    pid: process.pid,
    epoch: w.epoch,
    claimedAt: claimedAt!.toISOString(),
  })
})

test('inspect: a missing directory, an empty store and an unknown shard exit 3; a file exits 2', async (t) => {
  await demo()
  const missing = await memwal('inspect', join(workDir, 'nope'))
  t.is(missing.code, NOT_FOUND)
  t.regex(missing.stderr, /^memwal: no such directory: /)

  const empty = tempDir(t)
  const none = await memwal('inspect', empty)
  t.is(none.code, NOT_FOUND)
  t.regex(none.stderr, /no memwal shards at .*_mem_wal\/<shard-id>/)

  const unknown = await memwal('inspect', demoDir, '--shard', '00000000-0000-0000-0000-000000000000')
  t.is(unknown.code, NOT_FOUND)
  t.regex(unknown.stderr, /no shard 00000000-0000-0000-0000-000000000000 at .*; shards there: /)

  const file = join(tempDir(t), 'file')
  writeFileSync(file, '')
  const notDir = await memwal('inspect', file)
  t.is(notDir.code, USAGE)
  t.regex(notDir.stderr, /not a directory/)
})

test('wal lists entries with position, epoch, batches, rows and the fence sentinel', async (t) => {
  const { shard } = await demo()
  const json = await memwal('wal', demoDir, '--shard', shard, '--json')
  t.is(json.code, 0, json.stderr)
  const { walTip, entries } = JSON.parse(json.stdout) as {
    walTip: number
    entries: Array<{ position: number; epoch: number; batches: number; rows: number; sentinel: boolean }>
  }
  t.is(entries.length, walTip)
  t.deepEqual(
    entries.map((e) => e.position),
    Array.from({ length: walTip }, (_, i) => i + 1),
  )
  const data = entries.filter((e) => !e.sentinel)
  t.is(
    data.reduce((n, e) => n + e.rows, 0),
    ROWS,
  )
  t.true(data.every((e) => e.epoch === 1 && e.batches >= 1))
  const sentinels = entries.filter((e) => e.sentinel)
  t.deepEqual(
    sentinels.map((e) => [e.epoch, e.batches, e.rows]),
    [[2, 0, 0]],
    "the second writer's fence sentinel",
  )

  const page = await memwal('wal', demoDir, '--shard', shard, '--from', '2', '--limit', '3')
  t.is(page.code, 0, page.stderr)
  const lines = page.stdout.trim().split('\n')
  t.regex(lines[0]!, /^position +epoch +batches +rows +sentinel$/)
  t.deepEqual(
    lines.slice(1, 4).map((l) => Number(l.split(/\s+/)[0])),
    [2, 3, 4],
  )
  t.regex(lines[4]!, new RegExp(`^\\(positions 2\\.\\.4; WAL tip: position ${walTip}\\)$`))

  const past = await memwal('wal', demoDir, '--shard', shard, '--from', String(walTip + 10))
  t.is(past.code, 0)
  t.regex(past.stdout, /\(no entries; WAL tip/)

  const unknown = await memwal('wal', demoDir, '--shard', 'nope')
  t.is(unknown.code, NOT_FOUND)
})

test('scan prints rows as a table, JSON or CSV', async (t) => {
  const { shard } = await demo()
  const json = await memwal('scan', demoDir, '--shard', shard, '--limit', '3', '--format', 'json')
  t.is(json.code, 0, json.stderr)
  const rows = JSON.parse(json.stdout) as Array<{ id: number; writer: number; value: number; payload: string }>
  t.is(rows.length, 3)
  t.deepEqual(Object.keys(rows[0]!), ['id', 'writer', 'value', 'payload'])
  t.true(rows.every((r) => typeof r.id === 'number' && r.payload === `sensor-${r.writer} reading ${r.id}`))

  const csv = await memwal('scan', demoDir, '--shard', shard, '--limit', '2', '--format', 'csv')
  t.is(csv.code, 0, csv.stderr)
  const lines = csv.stdout.split('\r\n')
  t.is(lines[0], 'id,writer,value,payload')
  t.is(lines.length, 4) // header, 2 rows, trailing empty
  t.regex(lines[1]!, /^\d+,\d+,-?[\d.e-]+,sensor-\d+ reading \d+$/)

  const table = await memwal('scan', demoDir, '--shard', shard, '--limit', '4')
  t.is(table.code, 0, table.stderr)
  t.regex(table.stdout, /^id +writer +value +payload\n/)
  t.regex(table.stdout, /\n\(4 of 20000 rows\)\n$/)

  const all = await memwal('scan', demoDir, '--shard', shard, '--format', 'csv')
  t.is(all.stdout.split('\r\n').length, ROWS + 2)

  const empty = await memwal('scan', demoDir, '--shard', shard, '--limit', '0', '--format', 'json')
  t.deepEqual(JSON.parse(empty.stdout), [])
})

test('a corrupt manifest exits 4 with the CORRUPT code and the object named', async (t) => {
  const dir = join(tempDir(t), 'd')
  const made = await memwal('demo', dir, '--rows', '1000', '--writers', '1', '--batch-rows', '500')
  t.is(made.code, 0, made.stderr)
  const shard = readdirSync(join(dir, '_mem_wal'))[0]!
  const manifests = join(dir, '_mem_wal', shard, 'manifest')
  for (const f of readdirSync(manifests).filter((n) => n.endsWith('.binpb'))) {
    writeFileSync(join(manifests, f), 'not a protobuf')
  }
  const r = await memwal('inspect', dir)
  t.is(r.code, CORRUPT, r.stderr)
  t.regex(r.stderr, /^memwal: CORRUPT: .*manifest/m)
  t.notRegex(r.stderr, /\n\s+at /)
})

test('scan output piped into a closed reader ends quietly', async (t) => {
  const { shard } = await demo()
  const r = await runProcess(
    'sh',
    ['-c', `"${process.execPath}" --import tsx cli/main.ts scan "${demoDir}" --shard ${shard} --format csv | head -1`],
    { cwd: root },
  )
  t.is(r.code, 0)
  t.is(r.stdout, 'id,writer,value,payload\r\n')
  t.is(r.stderr, '')
})

test('a memwal error exits by its code, and a code exitCodeOf does not list exits 1', (t) => {
  t.is(exitCodeOf(new MemWalError('IO', 'the store failed')), Exit.IO)
  t.is(exitCodeOf(new MemWalError('TRUNCATED', 'gone')), Exit.USAGE)
  t.is(exitCodeOf(new MemWalError('NOT_YET_A_CODE' as MemWalErrorCode, 'a code added later')), Exit.UNEXPECTED)
})
