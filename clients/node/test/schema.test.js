// The extension's schema is found by the adapter (the look-alike and security checks of the
// contract suites rely on it), with a loud warning when others may create functions there.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { claim, fingerprintBytes, normalizeOptions } from '../index.js';
import { appUrl } from './helpers.js';

const DB = process.env.DATABASE_URL;

async function firstClaim(log) {
  const pool = new pg.Pool({ connectionString: appUrl(DB), max: 2 });
  try {
    const opts = normalizeOptions({ pool, log });
    const key = `schema-${process.hrtime.bigint()}`;
    const { attempt } = await claim(opts, 'schema-test', key, fingerprintBytes('text/plain', Buffer.from('x')), 0);
    assert.equal(attempt.outcome, 'new_claim');
    await attempt.client.query('ROLLBACK');
    attempt.client.release();
  } finally {
    await pool.end();
  }
}

test('no warning while only the owner may create in the extension schema; a loud one otherwise', async () => {
  assert.ok(DB, 'DATABASE_URL: run scripts/http-test.sh');
  const db = new pg.Client({ connectionString: DB });
  await db.connect();
  const { rows } = await db.query(`SELECT pg_catalog.quote_ident(n.nspname) AS s FROM pg_catalog.pg_extension e
    JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'idempotency'`);
  const schema = rows[0].s;
  try {
    await db.query(`REVOKE CREATE ON SCHEMA ${schema} FROM PUBLIC`);
    const quiet = [];
    await firstClaim((m) => quiet.push(m));
    assert.deepEqual(quiet, []);
    await db.query(`GRANT CREATE ON SCHEMA ${schema} TO PUBLIC`);
    const loud = [];
    await firstClaim((m) => loud.push(m));
    assert.equal(loud.length, 1);
    assert.match(loud[0], new RegExp(`WARNING: schema ${schema} .* writable by PUBLIC.*REVOKE CREATE ON SCHEMA ${schema}`));
  } finally {
    await db.query(`REVOKE CREATE ON SCHEMA ${schema} FROM PUBLIC`);
    await db.end();
  }
});
