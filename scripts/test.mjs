// `npm test`: the Rust core's tests, then the ava suite, always both. Streams their output,
// then prints one closing line "N passed, N failed" summing every runner. Exits non-zero if
// anything failed or a runner could not run.
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('..', import.meta.url))

function run(cmd, args, env = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    let text = ''
    const tee = (stream, out) =>
      stream.on('data', (d) => {
        text += d
        out.write(d)
      })
    tee(child.stdout, process.stdout)
    tee(child.stderr, process.stderr)
    child.on('error', (e) => resolve({ code: 1, text: `${text}\n${e.message}` }))
    child.on('close', (code) => resolve({ code: code ?? 1, text }))
  })
}

const sum = (text, re) => [...text.matchAll(re)].reduce((n, m) => n + Number(m[1]), 0)

const results = []

// --no-fail-fast: a failing test binary must not hide the tests of the binaries after it.
const cargo = await run('cargo', ['test', '--workspace', '--locked', '--no-fail-fast', '--color', 'never'])
{
  const passed = sum(cargo.text, /^test result: \w+\. (\d+) passed/gm)
  let failed = sum(cargo.text, /^test result: \w+\. \d+ passed; (\d+) failed/gm)
  if (cargo.code !== 0 && failed === 0) failed = 1 // did not build or crashed
  results.push(['cargo test', passed, failed])
}

const ava = await run(process.execPath, [fileURLToPath(new URL('../node_modules/ava/entrypoints/cli.mjs', import.meta.url))], {
  FORCE_COLOR: '0',
})
{
  // ava prints "N tests passed" only when nothing failed; otherwise count the passing lines.
  const passed = Math.max(sum(ava.text, /^\s*(\d+) tests? passed/gm), (ava.text.match(/^\s*✔ /gm) ?? []).length)
  let failed =
    sum(ava.text, /^\s*(\d+) tests? failed/gm) +
    sum(ava.text, /^\s*(\d+) uncaught exceptions?/gm) +
    sum(ava.text, /^\s*(\d+) unhandled rejections?/gm) +
    sum(ava.text, /^\s*(\d+) tests? remained pending/gm)
  if (ava.code !== 0 && failed === 0) failed = 1
  results.push(['ava', passed, failed])
}

for (const [name, p, f] of results) console.log(`${name}: ${p} passed, ${f} failed`)
const passed = results.reduce((n, r) => n + r[1], 0)
const failed = results.reduce((n, r) => n + r[2], 0)
console.log(`${passed} passed, ${failed} failed`)
process.exit(failed > 0 ? 1 : 0)
