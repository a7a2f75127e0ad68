// Contract v2, the response side, through the real test server: status mapping, the stored-limit
// rule, handler errors (sync and async, Express 4 and 5), replayed headers, problem `type`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  MAJOR, assertProblem, calls, connectDb, effects, json, lookalikeCalls, newKey, plantLookalikes, post,
  request, startServer, stopServer, stored,
} from './helpers.js';

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

test('status mapping: 2xx stored, 4xx final, 5xx/408/409/425/429 retryable', async () => {
  const cases = [[201, 'succeeded', 1], [302, 'succeeded', 1], [404, 'failed_final', 1], [422, 'failed_final', 1],
    [500, 'failed_retryable', 2], [503, 'failed_retryable', 2], [408, 'failed_retryable', 2], [409, 'failed_retryable', 2],
    [425, 'failed_retryable', 2], [429, 'failed_retryable', 2]];
  for (const [code, status, runs] of cases) {
    const key = newKey();
    const first = await post(server, `/api/status/${code}`, key);
    assert.equal(first.status, code);
    assert.equal((await stored(db, key)).status, status, String(code));
    const again = await post(server, `/api/status/${code}`, key);
    assert.equal(again.status, code);
    assert.equal(again.headers['idempotent-replayed'], runs === 1 ? 'true' : undefined, String(code));
    assert.equal(await calls(server, key), runs, String(code));
  }
});

test('configurable status mapping: statusAction', async () => {
  const key = newKey();
  assert.equal((await post(server, '/api/custom-status/503', key)).status, 503);
  assert.equal((await stored(db, key)).status, 'failed_final');
  assert.equal((await post(server, '/api/custom-status/503', key)).headers['idempotent-replayed'], 'true');
  const k404 = newKey();
  await post(server, '/api/custom-status/404', k404);
  assert.equal((await stored(db, k404)).status, 'failed_retryable');
});

test('a 4xx response over the stored limit is sent whole, then replayed without its body, never rerun', async () => {
  const key = newKey();
  const first = await post(server, '/api/big?status=400&size=9000', key);
  assert.equal(first.status, 400);
  assert.equal(first.body.length, 9000);
  assert.equal(first.headers['idempotent-body-omitted'], undefined);
  for (let i = 0; i < 2; i++) {
    const again = await post(server, '/api/big?status=400&size=9000', key);
    assert.equal(again.status, 400);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    assert.equal(again.headers['idempotent-body-omitted'], 'true');
    assert.equal(again.headers['content-type'], 'text/plain; charset=utf-8');
    assert.equal(again.body.length, 0);
  }
  assert.equal((await stored(db, key)).status, 'failed_final');
  assert.equal(await calls(server, key), 1);
  // Under the limit: kept whole.
  const small = newKey();
  const s1 = await post(server, '/api/big?status=400&size=7000', small);
  const s2 = await post(server, '/api/big?status=400&size=7000', small);
  assert.deepEqual(s2.body, s1.body);
  assert.equal(s2.headers['idempotent-body-omitted'], undefined);
});

test('a 2xx response over max_stored_bytes: the same rule', async () => {
  const key = newKey();
  const first = await post(server, '/api/big?status=200&size=30000', key);
  assert.equal(first.status, 200);
  assert.equal(first.body.length, 30000);
  const again = await post(server, '/api/big?status=200&size=30000', key);
  assert.equal(again.status, 200);
  assert.equal(again.headers['idempotent-body-omitted'], 'true');
  assert.equal(again.body.length, 0);
  assert.equal(await calls(server, key), 1);
});

test('a binary response body is sent whole and replayed without it (not UTF-8 text)', async () => {
  const key = newKey();
  const first = await post(server, '/api/binary', key);
  assert.deepEqual([...first.body], [0, 1, 2, 255, 254]);
  const again = await post(server, '/api/binary', key);
  assert.equal(again.status, 200);
  assert.equal(again.headers['idempotent-body-omitted'], 'true');
  assert.equal(await calls(server, key), 1);
});

for (const route of ['throw-sync', 'throw-async', ...(MAJOR === '5' ? ['mw-throw'] : [])]) {
  test(`a handler error (${route}) is a 500 problem without its text, retryable, the server lives`, async () => {
    const key = newKey();
    const r = await post(server, `/api/${route}`, key);
    const doc = assertProblem(r, 500, 'internal-error');
    assert.equal(doc.title, 'Internal Server Error');
    assert.doesNotMatch(r.body.toString(), /secret|Error:|at /);
    assert.equal((await stored(db, key)).status, 'failed_retryable');
    assert.equal(await effects(db, key), 0);
    assertProblem(await post(server, `/api/${route}`, key), 500, 'internal-error');
    assert.equal(await calls(server, key), 2);
    assert.equal((await request('GET', server, '/health')).status, 200);
  });
}

test('replayed headers: the allow-list plus replayHeaders, never Set-Cookie', async () => {
  const key = newKey();
  const first = await post(server, '/api/headers', key);
  assert.equal(first.status, 201);
  assert.equal(first.headers['x-custom'], 'kept');
  assert.match(first.headers['set-cookie'][0], /^session=secret/);
  const again = await post(server, '/api/headers', key);
  assert.equal(again.headers['idempotent-replayed'], 'true');
  assert.equal(again.headers['x-custom'], 'kept');
  assert.equal(again.headers['x-other'], undefined);
  assert.equal(again.headers['set-cookie'], undefined);
  assert.equal(again.headers['content-type'], first.headers['content-type']);
});

test('writeHead, write and end are recorded and replayed', async () => {
  const key = newKey();
  const first = await post(server, '/api/writehead', key);
  assert.equal(first.status, 202);
  assert.equal(first.body.toString(), 'part 1, part 2');
  const again = await post(server, '/api/writehead', key);
  assert.equal(again.status, 202);
  assert.equal(again.body.toString(), 'part 1, part 2');
  assert.equal(again.headers.location, '/x/1');
});

test('problemBase sets the problem type', async () => {
  assertProblem(await post(server, '/api/problem-base', undefined), 400, 'key-required', 'https://example.com/problems/');
});

test('no look-alike on the search_path ran', async () => {
  assert.deepEqual(await lookalikeCalls(db, since), []);
});
