// Contract v2, the request side, through the real test server: keys, bodies and fingerprints
// (behind no parser and behind global express.json/urlencoded/raw/text), limits, methods, and
// look-alike functions on the app's search_path.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import {
  BASE, assertProblem, calls, connectDb, effects, extensionSchema, here, json, lookalikeCalls, newKey, plantLookalikes, post,
  rawPost, request, startServer, stopServer, stored,
} from './helpers.js';

const vectors = JSON.parse(fs.readFileSync(path.join(here, '../../contract-vectors.json'), 'utf8'));
let server;
let db;
let since;
before(async () => {
  db = await connectDb();
  await plantLookalikes(db);
  since = (await db.query('SELECT pg_catalog.now()::text AS t')).rows[0].t;
  server = await startServer();
});
after(async () => {
  await stopServer(server);
  await db?.end();
});

const sha = (essence, bytes) => createHash('sha256').update(`${essence}\n`).update(bytes).digest('hex');

test('a bare key and the same key quoted are one key', async () => {
  const key = newKey();
  const first = await post(server, '/plain/echo', key);
  assert.equal(first.status, 201, first.body.toString());
  assert.equal(first.headers['idempotent-replayed'], undefined);
  const again = await post(server, '/plain/echo', `"${key}";v=1`);
  assert.equal(again.status, 201);
  assert.equal(again.headers['idempotent-replayed'], 'true');
  assert.deepEqual(again.body, first.body);
  assert.equal((await stored(db, key)).status, 'succeeded');
  assert.equal(await effects(db, key), 1);
});

test('every key vector of clients/contract-vectors.json', async () => {
  // The vectors' keys are fixed: forget them from earlier runs.
  await db.query('DELETE FROM idempotency.requests WHERE key = ANY ($1::pg_catalog.text[])', [vectors.keys.map((v) => v.key ?? '')]);
  for (const { header, key } of vectors.keys) {
    const r = await rawPost(server, '/plain/echo', header, '{"v":1}');
    if (key === null) {
      assert.equal(r.status, 400, JSON.stringify(header));
      if (/[\x00-\x08\x0a-\x1f\x7f]/.test(header) && r.body.length === 0) continue; // Node's own HTTP parser refuses it
      const doc = JSON.parse(r.body);
      assert.equal(doc.type, `${BASE}key-malformed`, header);
      assert.equal(doc.title, 'Idempotency-Key header is malformed', header);
      assert.ok(doc.detail, header);
    } else {
      assert.ok(r.status === 201, `${JSON.stringify(header)}: ${r.status} ${r.body}`);
      assert.equal((await stored(db, key))?.status, 'succeeded', header);
    }
  }
});

test('no key: 400 key-required; two field lines: 400 key-malformed; nothing claimed', async () => {
  const doc = assertProblem(await post(server, '/plain/echo', undefined), 400, 'key-required');
  assert.equal(doc.title, 'Idempotency-Key header is required');
  const key = newKey();
  const r = await request('POST', server, '/plain/echo', {
    headers: [['content-type', 'application/json'], ['idempotency-key', key], ['idempotency-key', key]], body: '{}',
  });
  assert.match(assertProblem(r, 400, 'key-malformed').detail, /more than once/);
  assert.equal(await stored(db, key), undefined);
});

test('every fingerprint vector of clients/contract-vectors.json, as stored request_hash', async () => {
  for (const v of vectors.fingerprints) {
    const key = newKey();
    const r = await post(server, '/plain/echo', key, Buffer.from(v.body_base64, 'base64'), v.content_type);
    if (v.error) {
      assertProblem(r, 400, v.error);
      assert.equal(await stored(db, key), undefined, v.name);
    } else {
      assert.equal(r.status, 201, `${v.name}: ${r.body}`);
      assert.equal((await stored(db, key)).request_hash, v.hash, v.name);
    }
  }
});

test('JSON nested deeper than 128 levels (the limit of idem_hash) is 400 body-not-json, read raw or by express.json()', async () => {
  const deep = (n) => `${'['.repeat(n)}${']'.repeat(n)}`;
  // express.json() refuses bodies over its own 100 kB limit (413) before the adapter sees them.
  for (const body of [deep(129), `${'{"a":'.repeat(3000)}1${'}'.repeat(3000)}`, deep(20_000), deep(100_000)]) {
    for (const p of body.length > 100_000 ? ['/plain/echo'] : ['/plain/echo', '/json/echo']) {
      const key = newKey();
      assertProblem(await post(server, p, key, body), 400, 'body-not-json');
      assert.equal(await stored(db, key), undefined, p);
    }
  }
  const key = newKey();
  assert.equal((await post(server, '/json/echo', key, deep(128))).status, 201);
});

test('non-JSON bodies: replayed when equal, 422 when the bytes or the media type differ', async () => {
  const multipart = '--XyZ\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--XyZ--\r\n';
  const cases = [
    ['text/plain', 'hello', 'hello!'],
    ['application/octet-stream', Buffer.from([0, 1, 2, 255]), Buffer.from([0, 1, 2, 254])],
    ['multipart/form-data; boundary=XyZ', multipart, multipart.replace('1', '2')],
    [null, 'no type', 'no type?'],
  ];
  for (const [type, body, other] of cases) {
    const key = newKey();
    assert.equal((await post(server, '/plain/echo', key, body, type)).status, 201, type);
    const essence = (type ?? '').split(';')[0];
    assert.equal((await stored(db, key)).request_hash, sha(essence, Buffer.from(body)), type);
    assert.equal((await post(server, '/plain/echo', key, body, type)).headers['idempotent-replayed'], 'true', type);
    assertProblem(await post(server, '/plain/echo', key, other, type), 422, 'payload-mismatch');
    if (type) assertProblem(await post(server, '/plain/echo', key, body, 'text/x-other'), 422, 'payload-mismatch');
    assert.equal(await effects(db, key), 1);
  }
});

test('an empty body is its own case, not JSON null', async () => {
  const key = newKey();
  const r = await post(server, '/plain/echo', key, '', 'application/json');
  assert.equal(r.status, 201);
  assert.equal((await stored(db, key)).request_hash, 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  assertProblem(await post(server, '/plain/echo', key, 'null', 'application/json'), 422, 'payload-mismatch');
});

test('form bodies: field order and escapes do not matter, the order of repeated values does', async () => {
  const key = newKey();
  const form = 'application/x-www-form-urlencoded';
  assert.equal((await post(server, '/plain/echo', key, 'a=1&b=x+y&a=2', form)).status, 201);
  const again = await post(server, '/plain/echo', key, 'b=x%20y&a=1&a=2', form);
  assert.equal(again.headers['idempotent-replayed'], 'true');
  assertProblem(await post(server, '/plain/echo', key, 'a=2&a=1&b=x+y', form), 422, 'payload-mismatch');
  assert.equal(await effects(db, key), 1);
});

test('413 past max_body_bytes: nothing claimed, the handler does not run', async () => {
  const key = newKey();
  const doc = assertProblem(await post(server, '/plain/echo', key, Buffer.alloc((1 << 20) + 1, 'a'), 'text/plain'), 413, 'body-too-large');
  assert.equal(doc.title, 'Request body is too large');
  const chunked = await request('POST', server, '/plain/echo', {
    headers: [['idempotency-key', key], ['content-type', 'text/plain'], ['transfer-encoding', 'chunked']],
    body: Buffer.alloc((1 << 20) + 1, 'b'),
  });
  assertProblem(chunked, 413, 'body-too-large');
  assert.equal(await stored(db, key), undefined);
  assert.equal(await calls(server, key), 0);
  assert.equal((await post(server, '/plain/echo', key, Buffer.alloc(1 << 20, 'a'), 'text/plain')).status, 201);
});

test('behind a global express.json(): JSON fingerprints equal the raw ones, req.body is parsed', async () => {
  for (const body of ['{"order_id": "o-1", "amount": 12.5}', '[1, "two", {"b": null, "a": [true]}]', '{"big": 1e2, "s": "\\u00e9\\ud83d\\ude00"}']) {
    const k1 = newKey();
    const k2 = newKey();
    const viaParser = await post(server, '/json/echo', k1, body);
    assert.equal(viaParser.status, 201, viaParser.body.toString());
    assert.deepEqual(json(viaParser).body, JSON.parse(body));
    assert.equal((await post(server, '/plain/echo', k2, body)).status, 201);
    assert.equal((await stored(db, k1)).request_hash, (await stored(db, k2)).request_hash, body);
    const respaced = JSON.stringify(JSON.parse(body), null, 3);
    assert.equal((await post(server, '/json/echo', k1, respaced)).headers['idempotent-replayed'], 'true');
  }
  const k = newKey();
  assert.equal((await post(server, '/json/echo', k, '', 'application/json')).status, 201);
  assert.equal((await stored(db, k)).request_hash, 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
  // A type express.json() skips is read by the adapter itself.
  const t = newKey();
  assert.equal((await post(server, '/json/echo', t, 'plain words', 'text/plain')).status, 201);
  assert.equal((await stored(db, t)).request_hash, sha('text/plain', Buffer.from('plain words')));
});

test('behind a global express.json(): its own refusals are problem documents (idempotencyErrorHandler)', async () => {
  const key = newKey();
  assertProblem(await post(server, '/json/echo', key, '{"a":', 'application/json'), 400, 'body-not-json');
  assertProblem(await post(server, '/json/echo', key, `{"a":"${'x'.repeat(200_000)}"}`, 'application/json'), 413, 'body-too-large');
  assert.equal(await stored(db, key), undefined);
});

test('behind a global express.urlencoded(): the parsed fields give the raw fingerprint', async () => {
  const form = 'application/x-www-form-urlencoded';
  for (const prefix of ['/form', '/qs']) {
    for (const body of ['a=1&b=x+y&a=2', 'name=%C3%A9t%C3%A9&empty=&flag']) {
      const k1 = newKey();
      const k2 = newKey();
      const r = await post(server, `${prefix}/echo`, k1, body, form);
      assert.equal(r.status, 201, r.body.toString());
      assert.equal((await post(server, '/plain/echo', k2, body, form)).status, 201);
      assert.equal((await stored(db, k1)).request_hash, (await stored(db, k2)).request_hash, `${prefix} ${body}`);
    }
  }
});

test('behind a global express.raw() and express.text(): the exact bytes', async () => {
  for (const [prefix, type, body] of [['/raw', 'application/octet-stream', Buffer.from([9, 0, 255])],
    ['/raw', 'application/json', Buffer.from('{"b":2,"a":1}')], ['/text', 'text/plain', Buffer.from('été')]]) {
    const k1 = newKey();
    const k2 = newKey();
    assert.equal((await post(server, `${prefix}/echo`, k1, body, type)).status, 201, `${prefix} ${type}`);
    assert.equal((await post(server, '/plain/echo', k2, body, type)).status, 201);
    assert.equal((await stored(db, k1)).request_hash, (await stored(db, k2)).request_hash, `${prefix} ${type}`);
  }
});

test('invalid JSON: 400 body-not-json, nothing claimed', async () => {
  const key = newKey();
  const doc = assertProblem(await post(server, '/plain/echo', key, '{"a":', 'application/json'), 400, 'body-not-json');
  assert.equal(doc.title, 'Request body is not valid JSON');
  assertProblem(await post(server, '/plain/echo', key, '{"a":"\\u0000"}', 'application/json'), 400, 'body-not-json');
  assert.equal(await stored(db, key), undefined);
});

test('GET with a key is ignored: nothing claimed, stored or replayed', async () => {
  const key = newKey();
  for (const p of ['/plain/echo', '/global/thing', '/global/thing']) {
    const r = await request('GET', server, p, { headers: { 'idempotency-key': key } });
    assert.equal(r.status, 200);
    assert.equal(r.headers['idempotent-replayed'], undefined);
  }
  assert.equal(json(await request('GET', server, '/global/thing')).gets, 3);
  assert.equal(await stored(db, key), undefined);
  const r = await request('HEAD', server, '/global/thing', { headers: { 'idempotency-key': 'not a key' } });
  assert.equal(r.status, 200);
  // App-wide: POST is claimed.
  assertProblem(await post(server, '/global/thing', undefined), 400, 'key-required');
  assert.equal((await post(server, '/global/thing', key)).status, 201);
  assert.equal((await post(server, '/global/thing', key)).headers['idempotent-replayed'], 'true');
  assert.equal((await stored(db, key)).scope, 'global');
});

test('configured methods: PUT claimed on its route', async () => {
  assertProblem(await request('PUT', server, '/api/put', { headers: { 'content-type': 'application/json' }, body: '{}' }), 400, 'key-required');
  const key = newKey();
  const headers = { 'content-type': 'application/json', 'idempotency-key': key };
  assert.equal((await request('PUT', server, '/api/put', { headers, body: '{}' })).status, 201);
  assert.equal((await request('PUT', server, '/api/put', { headers, body: '{}' })).headers['idempotent-replayed'], 'true');
});

test('the look-alike trap works, and no look-alike ran for any request above', async () => {
  const c = await connectDb();
  try {
    await c.query('SET search_path = trap, public, pg_catalog');
    await c.query("SELECT idem_hash('{}'::jsonb), sha256('\\x00'::bytea)");
    await c.query(`SELECT ${await extensionSchema(c)}.idem_hash($1)`, ['{}']); // untyped, as node-postgres sends it
  } finally {
    await c.end();
  }
  const ext = await extensionSchema(db);
  const names = ['trap.idem_hash', 'trap.sha256', `${ext}.idem_hash`];
  assert.deepEqual((await lookalikeCalls(db, since)).sort(), names.sort());
  await db.query('DELETE FROM public.lookalike_calls WHERE name = ANY ($1::text[])', [names]);
});
