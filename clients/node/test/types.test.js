// index.d.ts as installed from the tarball: tsc --strict accepts an Express app using it, and
// rejects wrong options (so the check can fail).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { MAJOR, PROJECT, here } from './helpers.js';

const tsc = path.join(here, '../node_modules/typescript/bin/tsc');
const dir = path.join(PROJECT ?? '', 'types-check');

function compile(file) {
  fs.mkdirSync(dir, { recursive: true });
  for (const f of ['usage.ts', 'bad.ts']) fs.copyFileSync(path.join(here, 'types', f), path.join(dir, f));
  const config = JSON.parse(fs.readFileSync(path.join(here, 'types/tsconfig.json'), 'utf8'));
  config.files = [file];
  fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify(config));
  return spawnSync(process.execPath, [tsc, '-p', dir], { cwd: dir, encoding: 'utf8' });
}

test(`tsc --strict accepts the typed usage (Express ${MAJOR})`, () => {
  assert.ok(PROJECT, 'IDEM_NODE_PROJECT: run scripts/http-test.sh');
  const r = compile('usage.ts');
  assert.equal(r.status, 0, r.stdout + r.stderr);
});

test(`tsc --strict rejects wrong options (Express ${MAJOR})`, () => {
  const r = compile('bad.ts');
  assert.notEqual(r.status, 0);
  assert.match(r.stdout, /bad\.ts\(6,[0-9]+\): error TS2322/);
  assert.match(r.stdout, /bad\.ts\(7,[0-9]+\): error TS2322/);
});
