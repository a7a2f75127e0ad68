// Shared by the contract suites: the test server (test/fixtures/server.js) started inside the clean
// node project $IDEM_NODE_PROJECT (express $EXPRESS_MAJOR and the adapter from its npm pack
// tarball), a raw HTTP client (node:http, so a header can be sent twice), and the database.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

export const here = path.dirname(fileURLToPath(import.meta.url));
export const DB = process.env.DATABASE_URL;
/** IDEM_HTTP_POOLER=host:port: apps and adapters connect through that pooler (the script's PgBouncer
 * in transaction mode, its second pass); the tests' own checks (DB) stay direct. */
export const POOLER = process.env.IDEM_HTTP_POOLER || null;
/** The URL an app connects with: through POOLER when set, to the same database and user. */
export const appUrl = (url = DB) => (POOLER ? Object.assign(new URL(url), { host: POOLER }).toString() : url);
export const PROJECT = process.env.IDEM_NODE_PROJECT;
export const MAJOR = process.env.EXPRESS_MAJOR;
export const BASE = 'https://datatracker.ietf.org/doc/draft-ietf-httpapi-idempotency-key-header#';
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const newKey = () => `k-${randomUUID()}`;
/** A failsafe only: the concurrency tests wait on observable state, never on a sleep. */
export const FAILSAFE_MS = 120_000;

/** Polls `check` (async) until it is truthy; fails after FAILSAFE_MS. */
export async function until(what, check) {
  const deadline = Date.now() + FAILSAFE_MS;
  while (!(await check())) {
    assert.ok(Date.now() < deadline, `gave up waiting for ${what}`);
    await sleep(20);
  }
}

/** A session holding advisory lock `id` until release(); `waiting()` counts sessions blocked on it. */
export async function advisoryGate(db) {
  const id = 1 + Math.floor(Math.random() * 2 ** 24);
  const gate = new pg.Client({ connectionString: DB });
  await gate.connect();
  await gate.query('SELECT pg_catalog.pg_advisory_lock($1::pg_catalog.int8)', [id]);
  let ended;
  return {
    id,
    waiting: async () => (await db.query(`SELECT count(*)::int AS n FROM pg_catalog.pg_locks WHERE locktype = 'advisory'
      AND NOT granted AND classid = 0 AND objid = $1::pg_catalog.int8::pg_catalog.oid AND objsubid = 1`, [id])).rows[0].n,
    release: () => (ended ??= gate.end()),
  };
}

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

export async function startServer(env = {}) {
  assert.ok(DB && PROJECT && MAJOR, 'DATABASE_URL, IDEM_NODE_PROJECT and EXPRESS_MAJOR: run scripts/http-test.sh');
  fs.copyFileSync(path.join(here, 'fixtures/server.js'), path.join(PROJECT, 'server.js'));
  const port = await freePort();
  const proc = spawn(process.execPath, ['server.js'], {
    cwd: PROJECT, env: { ...process.env, PORT: String(port), ...env, DATABASE_URL: appUrl(env.DATABASE_URL ?? DB) }, stdio: ['ignore', 'inherit', env.IDEM_TEST_LOG ? 'pipe' : 'inherit'],
  });
  const server = { port, proc, exited: false, output: '' };
  proc.stderr?.on('data', (chunk) => { server.output += chunk; }); // with IDEM_TEST_LOG: what it logged
  proc.once('exit', () => { server.exited = true; });
  for (let i = 0; i < 100; i++) {
    assert.equal(server.exited, false, 'the test server exited');
    try {
      const r = await request('GET', server, '/health');
      assert.equal(JSON.parse(r.body).express, MAJOR);
      return server;
    } catch (err) {
      if (err.code !== 'ECONNREFUSED') throw err;
      await sleep(100);
    }
  }
  throw new Error('the test server did not start');
}

export function stopServer(server) {
  if (!server || server.exited) return Promise.resolve();
  return new Promise((resolve) => {
    server.proc.once('exit', resolve);
    server.proc.kill('SIGTERM');
  });
}

/**
 * One HTTP request. headers: an object, or an array of [name, value] pairs (repeats allowed).
 * Resolves to { status, headers (lower-case names), body (Buffer), ms }.
 */
export function request(method, server, urlPath, { headers = {}, body } = {}) {
  const pairs = Array.isArray(headers) ? headers : Object.entries(headers);
  const raw = ['host', `127.0.0.1:${server.port}`, ...pairs.flat()]; // raw headers get no automatic Host
  const data = body === undefined ? undefined : Buffer.isBuffer(body) ? body : Buffer.from(body);
  if (data !== undefined && !pairs.some(([k]) => ['content-length', 'transfer-encoding'].includes(k.toLowerCase()))) raw.push('content-length', String(data.length));
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: server.port, method, path: urlPath, headers: raw, agent: false }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks), ms: performance.now() - started }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(data);
  });
}

/** POST with a key header value as given (undefined: no header). */
export function post(server, urlPath, key, body = '{"a":1}', contentType = 'application/json', extra = {}) {
  const headers = [];
  if (contentType !== null) headers.push(['content-type', contentType]);
  if (key !== undefined) headers.push(['idempotency-key', key]);
  for (const [k, v] of Object.entries(extra)) headers.push([k, v]);
  return request('POST', server, urlPath, { headers, body });
}

export const json = (r) => JSON.parse(r.body.toString());

export function assertProblem(r, status, slug, base = BASE) {
  assert.equal(r.status, status, r.body.toString());
  assert.equal(r.headers['content-type'], 'application/problem+json');
  const doc = json(r);
  assert.equal(doc.status, status);
  assert.equal(doc.type, base + slug);
  return doc;
}

export async function connectDb() {
  const db = new pg.Client({ connectionString: DB });
  await db.connect();
  await db.query('CREATE TABLE IF NOT EXISTS public.effects (scope text, key text)');
  return db;
}

/** The stored row of a key (any scope), or undefined. */
export async function stored(db, key) {
  const { rows } = await db.query(
    'SELECT scope, status::pg_catalog.text AS status, request_hash FROM idempotency.requests WHERE key = $1::pg_catalog.text', [key]);
  return rows.length > 1 ? rows : rows[0];
}

export async function effects(db, key) {
  const { rows } = await db.query('SELECT count(*)::int AS n FROM public.effects WHERE key = $1::pg_catalog.text', [key]);
  return rows[0].n;
}

export async function calls(server, key) {
  return json(await request('GET', server, `/calls/${encodeURIComponent(key)}`)).n;
}

// Look-alikes, each logging its call to public.lookalike_calls and then doing the real work:
// - in schema trap, first on the app's search_path (test/fixtures/server.js), with the real
//   signatures and parameter names: picked by any unqualified call;
// - in the extension's own schema (EXT), with text where the real one takes another type: picked
//   by a qualified call whose argument is left untyped (node-postgres sends parameters untyped).
const LOOKALIKES = [
  ['trap', 'idem_claim(scope text, key text, request_hash text, lease interval DEFAULT NULL, retention interval DEFAULT NULL, '
    + 'claimed_by text DEFAULT NULL, wait interval DEFAULT NULL)',
    'EXT.idem_claim_result', 'SELECT EXT.idem_claim($1, $2, $3, $4, $5, $6, $7)'],
  ['trap', 'idem_hash(jsonb)', 'text', 'SELECT EXT.idem_hash($1)'],
  ['trap', 'idem_canonical(jsonb)', 'text', 'SELECT EXT.idem_canonical($1)'],
  ['trap', 'idem_http_replay(claim EXT.idem_claim_result, keep text[])', 'jsonb', 'SELECT EXT.idem_http_replay($1, $2)'],
  ['trap', 'idem_http_response(status int4, headers jsonb, body text, keep text[])', 'jsonb', 'SELECT EXT.idem_http_response($1, $2, $3, $4)'],
  ['trap', 'idem_http_response(int4, text, text)', 'jsonb', 'SELECT EXT.idem_http_response($1, $2::jsonb, $3)'],
  ['trap', 'idem_complete(scope text, key text, response jsonb, attempt int4)', 'void', 'SELECT EXT.idem_complete($1, $2, $3, $4)'],
  ['trap', 'idem_fail(scope text, key text, retryable bool, code text, message text, attempt int4)', 'void', 'SELECT EXT.idem_fail($1, $2, $3, $4, $5, $6)'],
  ['trap', 'idem_http_fail(scope text, key text, response jsonb, attempt int4)', 'void', 'SELECT EXT.idem_http_fail($1, $2, $3, $4)'],
  ['trap', 'sha256(bytea)', 'bytea', 'SELECT pg_catalog.sha256($1)'],
  ['trap', 'encode(bytea, text)', 'text', 'SELECT pg_catalog.encode($1, $2)'],
  ['trap', 'convert_to(text, name)', 'bytea', 'SELECT pg_catalog.convert_to($1, $2)'],
  ['trap', 'octet_length(text)', 'int4', 'SELECT pg_catalog.octet_length($1)'],
  ['trap', 'textcat(text, text)', 'text', 'SELECT pg_catalog.textcat($1, $2)'],
  ['EXT', 'idem_claim(scope text, key text, request_hash text, lease text, retention text)', 'EXT.idem_claim_result',
    'SELECT EXT.idem_claim($1, $2, $3, $4::interval, $5::interval)'],
  ['EXT', 'idem_hash(text)', 'text', 'SELECT EXT.idem_hash($1::jsonb)'],
  ['EXT', 'idem_canonical(text)', 'text', 'SELECT EXT.idem_canonical($1::jsonb)'],
  ['EXT', 'idem_http_replay(claim EXT.idem_claim_result, keep text)', 'jsonb', 'SELECT EXT.idem_http_replay($1, $2::text[])'],
  ['EXT', 'idem_http_response(status text, headers jsonb, body text, keep text[])', 'jsonb', 'SELECT EXT.idem_http_response($1::int4, $2, $3, $4)'],
  ['EXT', 'idem_complete(scope text, key text, response jsonb, attempt text)', 'void', 'SELECT EXT.idem_complete($1, $2, $3, $4::int4)'],
  ['EXT', 'idem_fail(scope text, key text, retryable bool, code text, message text, attempt text)', 'void', 'SELECT EXT.idem_fail($1, $2, $3, $4, $5, $6::int4)'],
  ['EXT', 'idem_http_fail(scope text, key text, response jsonb, attempt text)', 'void', 'SELECT EXT.idem_http_fail($1, $2, $3, $4::int4)'],
];

/** The functions' schema, quoted: $IDEM_EXAMPLE_SCHEMA (the portable edition's plain script has
 * no pg_extension row), else the extension's. */
export async function extensionSchema(db) {
  const { rows } = await db.query(`SELECT pg_catalog.quote_ident(coalesce($1::text, (SELECT n.nspname::text
    FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
    WHERE e.extname = 'idempotency'))) AS ext`, [process.env.IDEM_EXAMPLE_SCHEMA || null]);
  return rows[0].ext;
}

export async function plantLookalikes(db) {
  const ext = await extensionSchema(db);
  await db.query('CREATE SCHEMA IF NOT EXISTS trap');
  await db.query('CREATE TABLE IF NOT EXISTS public.lookalike_calls (name text, at timestamptz DEFAULT now())');
  for (const [where, sig, ret, body] of LOOKALIKES) {
    const schema = where === 'EXT' ? ext : where;
    const x = (t) => t.replaceAll('EXT.', `${ext}.`);
    const name = `${schema}.${sig.slice(0, sig.indexOf('('))}`;
    await db.query(`CREATE OR REPLACE FUNCTION ${x(`${schema}.${sig}`)} RETURNS ${x(ret)}
      LANGUAGE sql AS $f$ INSERT INTO public.lookalike_calls (name) VALUES ('${name}'); ${x(body)} $f$`);
  }
  await db.query(`DO $$ BEGIN
    IF NOT EXISTS (SELECT FROM pg_operator WHERE oprname = '||' AND oprnamespace = 'trap'::regnamespace) THEN
      CREATE OPERATOR trap.|| (LEFTARG = text, RIGHTARG = text, FUNCTION = trap.textcat);
    END IF; END $$`);
}

/** The names of the look-alikes that ran since `since` (a timestamptz string). */
export async function lookalikeCalls(db, since) {
  const { rows } = await db.query('SELECT name FROM public.lookalike_calls WHERE at >= $1::timestamptz', [since]);
  return rows.map((r) => r.name);
}

/** A POST written byte by byte on a socket (header values Node's client refuses, e.g. DEL); UTF-8 on the wire. */
export function rawPost(server, urlPath, keyValue, body) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(server.port, '127.0.0.1');
    const chunks = [];
    sock.on('data', (c) => chunks.push(c));
    sock.on('error', reject);
    sock.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const [head, ...rest] = text.split('\r\n\r\n');
      resolve({ status: Number(head.split(' ')[1]), head, body: Buffer.from(rest.join('\r\n\r\n')) });
    });
    sock.write(Buffer.concat([Buffer.from(`POST ${urlPath} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n`
      + `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nIdempotency-Key: `),
    Buffer.from(keyValue, 'utf8'), Buffer.from(`\r\n\r\n${body}`)]));
  });
}
