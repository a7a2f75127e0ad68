// Without CREATE EXTENSION (the portable edition's plain script: no pg_extension row) and without
// the option schema, the adapter finds the schema holding the functions; when functions of those
// names are in two schemas it refuses with an error naming the option. The real test server, on
// a database of its own.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import pg from 'pg';
import { DB, here, newKey, post, startServer, stopServer } from './helpers.js';

const NAME = 'http_plain_script_node';
const url = new URL(DB);
const plainUrl = Object.assign(new URL(DB), { pathname: `/${NAME}` }).toString();
let admin;
let db;

before(async () => {
  admin = new pg.Client({ connectionString: url.toString() });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${NAME} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${NAME}`);
  const script = spawnSync('bash', [path.join(here, '../../../scripts/portable.sh')], { encoding: 'utf8', maxBuffer: 1 << 26 });
  assert.equal(script.status, 0, script.stderr);
  db = new pg.Client({ connectionString: plainUrl });
  await db.connect();
  await db.query(script.stdout); // the plain script, as psql -f would run it
  await db.query('CREATE TABLE public.effects (scope text, key text)');
});
after(async () => {
  await db?.end();
  await admin?.query(`DROP DATABASE IF EXISTS ${NAME} WITH (FORCE)`);
  await admin?.end();
});

test('the plain script is found without the option schema; two candidate schemas are refused', async () => {
  assert.equal((await db.query("SELECT count(*)::int AS n FROM pg_extension WHERE extname = 'idempotency'")).rows[0].n, 0);
  let server = await startServer({ DATABASE_URL: plainUrl, IDEM_EXAMPLE_SCHEMA: '' });
  try {
    const key = newKey();
    assert.equal((await post(server, '/plain/echo', key)).status, 201);
    assert.equal((await post(server, '/plain/echo', key)).headers['idempotent-replayed'], 'true');
  } finally {
    await stopServer(server);
  }
  await db.query('CREATE SCHEMA decoy');
  await db.query("CREATE FUNCTION decoy.idem_claim(text, text, text) RETURNS int LANGUAGE sql AS 'SELECT 1'");
  await db.query("CREATE FUNCTION decoy.idem_http_replay(int) RETURNS jsonb LANGUAGE sql AS 'SELECT NULL::jsonb'");
  server = await startServer({ DATABASE_URL: plainUrl, IDEM_EXAMPLE_SCHEMA: '', IDEM_TEST_LOG: '1' });
  try {
    const r = await post(server, '/plain/echo', newKey());
    assert.equal(r.status, 500);
  } finally {
    await stopServer(server);
  }
  assert.match(server.output, /several schemas \(decoy, public\): give the option schema/);
});
