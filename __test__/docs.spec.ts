// The API reference builds from index.ts's TSDoc with no warnings (typedoc.json turns on
// validation, including `notDocumented`); `npm run docs` writes the same pages to docs/api/.
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'

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
