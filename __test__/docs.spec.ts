// The API reference builds from index.ts's TSDoc with no warnings (typedoc.json turns on
// validation, including `notDocumented`); `npm run docs` writes the same pages to docs/api/. And
// the hand-written docs link correctly.
import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'

import test from 'ava'

import { tempDir } from './support/helpers'

const root = join(__dirname, '..')

test('typedoc builds the API docs with no warnings', (t) => {
  const out = tempDir(t)
  const r = spawnSync(
    process.execPath,
    [join(root, 'node_modules', 'typedoc', 'bin', 'typedoc'), '--treatWarningsAsErrors', '--out', out],
    { cwd: root, encoding: 'utf8', env: { ...process.env, FORCE_COLOR: '0' } },
  )
  t.is(r.status, 0, `${r.stdout}\n${r.stderr}`)
  t.notRegex(`${r.stdout}${r.stderr}`, /\[warning\]|\[error\]/)
  t.true(existsSync(join(out, 'classes', 'ShardWriter.html')))
})

// Every relative link in the Markdown a contributor reads (the README, CONTRIBUTING, docs/,
// bench/README.md) points at a file that exists and, with a `#fragment`, at a heading of it, as
// GitHub names headings: the docs are split across files, and a moved section must not leave a
// dead link behind.
const MARKDOWN = ['README.md', 'CONTRIBUTING.md', 'bench/README.md', ...mdFiles('docs')]

function mdFiles(dir: string): string[] {
  return readdirSync(join(root, dir))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `${dir}/${f}`)
}

/** The Markdown outside fenced code blocks, where links and headings count. */
function prose(text: string): string[] {
  let fenced = false
  return text.split('\n').filter((line) => {
    if (line.trimStart().startsWith('```')) {
      fenced = !fenced
      return false
    }
    return !fenced
  })
}

/**
 * The anchors GitHub gives the headings of `text`: lowercased, punctuation dropped, spaces to
 * dashes, repeats numbered.
 */
function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>()
  const anchors = new Set<string>()
  for (const line of prose(text)) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (!m) continue
    const base = (m[1] ?? '')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-')
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    anchors.add(n === 0 ? base : `${base}-${n}`)
  }
  return anchors
}

test('relative links in the README and docs/ resolve, anchors included', (t) => {
  const dead: string[] = []
  for (const file of MARKDOWN) {
    const text = readFileSync(join(root, file), 'utf8')
    for (const line of prose(text)) {
      for (const [, target = ''] of line.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/i.test(target)) continue
        const [path = '', fragment] = target.split('#', 2)
        const resolved = path === '' ? join(root, file) : join(root, dirname(file), path)
        if (!existsSync(resolved)) {
          dead.push(`${file}: ${target} (no such file)`)
        } else if (
          fragment !== undefined &&
          resolved.endsWith('.md') &&
          !anchorsOf(readFileSync(resolved, 'utf8')).has(fragment)
        ) {
          dead.push(`${file}: ${target} (no such heading)`)
        }
      }
    }
  }
  t.deepEqual(dead, [])
})
