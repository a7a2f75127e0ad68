// The Node adapter through real HTTP: examples/http/node/serve.sh as a real server process,
// real concurrent requests, against the database in $DATABASE_URL (scripts/http-test.sh).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { appUrl } from './helpers.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const SERVE = path.join(root, 'examples/http/node/serve.sh');
const DB = process.env.DATABASE_URL;
const BODY = '{"order_id": "o-1", "amount": 12.5}';
const RESPACED = '{ "amount":12.5,\n  "order_id" :"o-1" }';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

class Server {
  async start() {
    this.port = await freePort();
    this.url = `http://127.0.0.1:${this.port}`;
    this.proc = spawn(SERVE, [], {
      env: { ...process.env, PORT: String(this.port), DATABASE_URL: appUrl(DB), IDEM_EXAMPLE_TEST_HOOKS: '1' },
      stdio: ['ignore', 'inherit', 'inherit'],
      detached: true,
    });
    const deadline = Date.now() + 300_000; // the first start runs npm install
    while (Date.now() < deadline) {
      if (this.proc.exitCode !== null) throw new Error(`serve.sh exited with ${this.proc.exitCode}`);
      try {
        await fetch(`${this.url}/health`);
        return this;
      } catch {
        await sleep(200);
      }
    }
    throw new Error('the example service did not start');
  }

  exited() {
    return this.proc.exitCode !== null || this.proc.signalCode !== null
      ? Promise.resolve()
      : new Promise((r) => this.proc.once('exit', r));
  }

  async kill(signal = 'SIGKILL') {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      process.kill(-this.proc.pid, signal);
      await this.exited();
    }
  }
}

let server;
let db;
before(async () => {
  assert.ok(DB, 'DATABASE_URL is not set: run scripts/http-test.sh');
  db = new pg.Client({ connectionString: DB });
  await db.connect();
  server = await new Server().start();
});
after(async () => {
  await server?.kill('SIGTERM');
  await db?.end();
});

const newKey = () => `node-${randomUUID()}`;

function post(srv, key, body = BODY, headers = {}) {
  const h = { 'content-type': 'application/json', ...headers };
  if (key !== undefined) h['idempotency-key'] = `"${key}"`;
  return fetch(`${srv.url}/payments`, { method: 'POST', body, headers: h });
}

async function read(response) {
  return { status: response.status, headers: response.headers, body: Buffer.from(await response.arrayBuffer()) };
}

async function rows(key) {
  const { rows: r } = await db.query('SELECT count(*)::int AS n FROM payments WHERE idem_key = $1', [key]);
  return r[0].n;
}

// The example's default scope for an anonymous POST /payments: its service is its package's name.
const SCOPE = JSON.stringify(['idempotency-http-example', null, 'POST', '/payments', {}, '']);

async function hold(key, body = BODY) {
  const c = new pg.Client({ connectionString: DB });
  await c.connect();
  await c.query('BEGIN');
  await c.query('SELECT * FROM idem_claim($1, $2, idem_hash($3::jsonb))', [SCOPE, key, body]);
  return c;
}

test('400 problem+json without the header', async () => {
  const r = await read(await post(server));
  assert.equal(r.status, 400);
  assert.equal(r.headers.get('content-type'), 'application/problem+json');
  assert.equal(JSON.parse(r.body).status, 400);
});

test('201, then a byte-identical replay for the same body spelled differently', async () => {
  const key = newKey();
  const first = await read(await post(server, key));
  assert.equal(first.status, 201, first.body.toString());
  const doc = JSON.parse(first.body);
  assert.equal(doc.order_id, 'o-1');
  assert.equal(first.headers.get('location'), `/payments/${doc.payment_id}`);
  assert.equal(first.headers.get('idempotent-replayed'), null);
  const again = await read(await post(server, key, RESPACED));
  assert.equal(again.status, 201);
  assert.deepEqual(again.body, first.body);
  for (const h of ['location', 'content-type', 'etag']) assert.equal(again.headers.get(h), first.headers.get(h), h);
  assert.equal(again.headers.get('idempotent-replayed'), 'true');
  assert.equal(await rows(key), 1);
});

test('422 for a changed body', async () => {
  const key = newKey();
  assert.equal((await read(await post(server, key))).status, 201);
  const r = await read(await post(server, key, '{"order_id": "o-1", "amount": 13}'));
  assert.equal(r.status, 422);
  assert.equal(r.headers.get('content-type'), 'application/problem+json');
  assert.equal(await rows(key), 1);
});

test('409 with Retry-After while another session holds the key', async () => {
  const key = newKey();
  const holder = await hold(key);
  try {
    const r = await read(await post(server, key));
    assert.equal(r.status, 409);
    assert.equal(r.headers.get('retry-after'), '1');
    assert.equal(r.headers.get('content-type'), 'application/problem+json');
  } finally {
    await holder.query('ROLLBACK');
    await holder.end();
  }
  assert.equal(await rows(key), 0);
});

test('wait turns the 409 into the replay', async () => {
  const key = newKey();
  const first = post(server, key, BODY, { 'x-test-sleep-after-insert': '2' }).then(read);
  await sleep(700);
  assert.equal((await read(await post(server, key))).status, 409);
  const started = Date.now();
  const waited = await read(await post(server, key, RESPACED, { prefer: 'wait=15' }));
  const elapsed = Date.now() - started;
  const firstDone = await first;
  assert.equal(firstDone.status, 201);
  assert.equal(waited.status, 201, waited.body.toString());
  assert.equal(waited.headers.get('idempotent-replayed'), 'true');
  assert.deepEqual(waited.body, firstDone.body);
  assert.ok(elapsed < 10_000, `waited ${elapsed} ms`);
  assert.equal(await rows(key), 1);
});

test('wait takes the key over when the holder rolls back', async () => {
  const key = newKey();
  const holder = await hold(key);
  const rollback = sleep(1000).then(() => holder.query('ROLLBACK'));
  const r = await read(await post(server, key, BODY, { prefer: 'wait=15' }));
  await rollback;
  await holder.end();
  assert.equal(r.status, 201, r.body.toString());
  assert.equal(r.headers.get('idempotent-replayed'), null);
  assert.equal(await rows(key), 1);
});

test('50 concurrent requests with one key make one row', async () => {
  const key = newKey();
  const all = await Promise.all(Array.from({ length: 50 }, () => post(server, key).then(read)));
  const statuses = all.map((r) => r.status);
  assert.ok(statuses.every((s) => s === 201 || s === 409), statuses.join(','));
  const fresh = all.filter((r) => r.status === 201 && r.headers.get('idempotent-replayed') === null);
  assert.equal(fresh.length, 1);
  for (const r of all.filter((x) => x.status === 201)) assert.deepEqual(r.body, fresh[0].body);
  assert.equal(await rows(key), 1);
});

test('a server killed between effect and commit, then a retry: one row', async () => {
  const key = newKey();
  const victim = await new Server().start();
  const hung = post(victim, key, BODY, { 'x-test-sleep-after-insert': '30' }).then(
    () => 'answered',
    () => 'connection lost',
  );
  const deadline = Date.now() + 20_000;
  for (;;) {
    const { rows: r } = await db.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'idle in transaction' AND query LIKE 'INSERT INTO payments%'",
    );
    if (r[0].n > 0) break;
    assert.ok(Date.now() < deadline, 'the request never reached its insert');
    await sleep(100);
  }
  await victim.kill('SIGKILL');
  assert.equal(await hung, 'connection lost');
  const survivor = await new Server().start();
  try {
    let r;
    for (let i = 0; i < 100; i++) { // the killed request's session ends when Postgres notices
      r = await read(await post(survivor, key));
      if (r.status !== 409) break;
      await sleep(100);
    }
    assert.equal(r.status, 201, r.body.toString());
    assert.equal(r.headers.get('idempotent-replayed'), null);
    assert.equal((await post(survivor, key)).headers.get('idempotent-replayed'), 'true');
  } finally {
    await survivor.kill('SIGTERM');
  }
  assert.equal(await rows(key), 1);
});

test('a handler error fails the attempt retryably', async () => {
  const key = newKey();
  const r = await read(await post(server, key, '{"order_id": "o-err", "amount": "not a number"}'));
  assert.equal(r.status, 500);
  const { rows: s } = await db.query(
    "SELECT status::text AS status FROM idempotency.requests WHERE key = $1 AND scope = $2", [key, SCOPE]);
  assert.equal(s[0].status, 'failed_retryable');
  assert.equal(await rows(key), 0);
});

test('a final client error is stored and replayed', async () => {
  const key = newKey();
  const r = await read(await post(server, key, '{"order_id": "o-2"}'));
  assert.equal(r.status, 400);
  const again = await read(await post(server, key, '{"order_id":"o-2"}'));
  assert.equal(again.status, 400);
  assert.deepEqual(again.body, r.body);
  assert.equal(again.headers.get('idempotent-replayed'), 'true');
  const { rows: s } = await db.query(
    "SELECT status::text AS status FROM idempotency.requests WHERE key = $1 AND scope = $2", [key, SCOPE]);
  assert.equal(s[0].status, 'failed_final');
});

// Uploads through multer (examples/http/node/app.js, POST /receipts): idempotency() before multer,
// which it feeds the bytes it read. A real client's multipart body (fetch's FormData), serialized
// once so that a retry resends the same bytes, boundary included (docs/http.md, fingerprints).
async function form(fields) {
  const fd = new FormData();
  for (const [name, value] of Object.entries(fields)) {
    if (typeof value === 'string') fd.append(name, value);
    else fd.append(name, new Blob([value.bytes], { type: 'application/pdf' }), value.filename);
  }
  const req = new Request('http://127.0.0.1/', { method: 'POST', body: fd });
  return { body: Buffer.from(await req.arrayBuffer()), type: req.headers.get('content-type') };
}

function upload(key, { body, type }, init = {}) {
  return fetch(`${server.url}/receipts`, {
    method: 'POST', body, headers: { 'content-type': type, 'idempotency-key': `"${key}"` }, ...init,
  });
}

async function receipts(key) {
  const { rows: r } = await db.query('SELECT filename, note, bytes FROM receipts WHERE idem_key = $1::pg_catalog.text', [key]);
  return r;
}

async function claimed(key) {
  const { rows: r } = await db.query('SELECT count(*)::int AS n FROM idempotency.requests WHERE key = $1::pg_catalog.text', [key]);
  return r[0].n;
}

const PDF = Buffer.from('%PDF-1.4 receipt 42\n'.repeat(50));

test('multer: an upload makes one row, and the same bytes again are the replay', async () => {
  const key = newKey();
  const sent = await form({ note: 'lunch', file: { bytes: PDF, filename: 'r42.pdf' } });
  assert.match(sent.type, /^multipart\/form-data; boundary=/);
  const first = await read(await upload(key, sent));
  assert.equal(first.status, 201, first.body.toString());
  assert.deepEqual(JSON.parse(first.body), { receipt_id: JSON.parse(first.body).receipt_id, filename: 'r42.pdf', size: PDF.length });
  const again = await read(await upload(key, sent));
  assert.equal(again.status, 201);
  assert.equal(again.headers.get('idempotent-replayed'), 'true');
  assert.deepEqual(again.body, first.body);
  const stored = await receipts(key);
  assert.equal(stored.length, 1);
  assert.deepEqual([stored[0].filename, stored[0].note], ['r42.pdf', 'lunch']);
  assert.deepEqual(stored[0].bytes, PDF); // multer parsed the bytes the adapter read
});

test('multer: another file, or the same file in a new form (another boundary), under one key is 422', async () => {
  const key = newKey();
  assert.equal((await upload(key, await form({ file: { bytes: PDF, filename: 'r42.pdf' } }))).status, 201);
  for (const other of [{ file: { bytes: Buffer.concat([PDF, Buffer.from('x')]), filename: 'r42.pdf' } },
    { file: { bytes: PDF, filename: 'r42.pdf' } }]) {
    const r = await read(await upload(key, await form(other)));
    assert.equal(r.status, 422, r.body.toString());
    assert.equal(JSON.parse(r.body).type.endsWith('#payload-mismatch'), true);
  }
  assert.equal((await receipts(key)).length, 1);
});

test('multer: past maxBodyBytes, 413 before multer runs, nothing claimed (with a length, and chunked)', async () => {
  const big = await form({ file: { bytes: Buffer.alloc(600 * 1024, 7), filename: 'big.pdf' } });
  const sized = newKey();
  const r = await read(await upload(sized, big));
  assert.equal(r.status, 413);
  assert.equal(JSON.parse(r.body).type.endsWith('#body-too-large'), true);
  const chunked = newKey();
  const stream = new ReadableStream({
    start(c) {
      for (let i = 0; i < big.body.length; i += 64 * 1024) c.enqueue(big.body.subarray(i, i + 64 * 1024));
      c.close();
    },
  });
  const rc = await read(await upload(chunked, { body: stream, type: big.type }, { duplex: 'half' }));
  assert.equal(rc.status, 413);
  for (const key of [sized, chunked]) {
    assert.equal(await claimed(key), 0);
    assert.equal((await receipts(key)).length, 0);
  }
});
