// Contract v2 under concurrency, through the real test server: 20 duplicates -> one effect,
// `Prefer: wait` polling without holding a pooled connection (latency of an unrelated key with a
// pool of 4 while 5 and 20 duplicates wait), max_waiters.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  MAJOR, assertProblem, calls, connectDb, effects, lookalikeCalls, newKey, plantLookalikes, post,
  sleep, startServer, stopServer,
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

test('20 concurrent duplicates without wait: one effect, the others 409 in-flight or the replay', async () => {
  const key = newKey();
  const all = await Promise.all(Array.from({ length: 20 }, () => post(server, '/plain/echo?sleep=300', key)));
  const fresh = all.filter((r) => r.status === 201 && r.headers['idempotent-replayed'] === undefined);
  assert.equal(fresh.length, 1);
  for (const r of all) {
    if (r.status === 409) {
      assertProblem(r, 409, 'in-flight');
      assert.equal(r.headers['retry-after'], '1');
    } else {
      assert.equal(r.status, 201);
      assert.deepEqual(r.body, fresh[0].body);
    }
  }
  assert.equal(await effects(db, key), 1);
  assert.equal(await calls(server, key), 1);
});

test('20 concurrent duplicates with Prefer: wait: one effect, 19 replays', async () => {
  const key = newKey();
  const all = await Promise.all(Array.from({ length: 20 }, () =>
    post(server, '/plain/echo?sleep=500', key, '{"a":1}', 'application/json', { prefer: 'wait=10' })));
  assert.deepEqual(all.map((r) => r.status), Array(20).fill(201));
  assert.equal(all.filter((r) => r.headers['idempotent-replayed'] === 'true').length, 19);
  assert.equal(await effects(db, key), 1);
});

test('wait runs out: 409 in-flight after about the asked time', async () => {
  const key = newKey();
  const holder = post(server, '/plain/echo?sleep=2500', key);
  await sleep(300);
  // The same request (the query string is part of the scope), sent while the first runs.
  const r = await post(server, '/plain/echo?sleep=2500', key, '{"a":1}', 'application/json', { prefer: 'wait=1' });
  assertProblem(r, 409, 'in-flight');
  assert.ok(r.ms >= 900 && r.ms < 2000, `${r.ms} ms`);
  assert.equal((await holder).status, 201);
});

for (const waiters of [5, 20]) {
  test(`pool of 4: an unrelated key while ${waiters} duplicates of a slow key wait`, async () => {
    const slow = newKey();
    const holder = post(server, '/pool/slow?sleep=4000', slow);
    await sleep(300);
    const dups = Array.from({ length: waiters }, () =>
      post(server, '/pool/slow?sleep=4000', slow, '{"a":1}', 'application/json', { prefer: 'wait=10' }));
    await sleep(700);
    const samples = [];
    for (let i = 0; i < 5; i++) {
      const r = await post(server, '/pool/fast', newKey());
      assert.equal(r.status, 201);
      samples.push(r.ms);
    }
    const results = await Promise.all([holder, ...dups]);
    assert.ok(results.every((r) => r.status === 201), results.map((r) => r.status).join(','));
    samples.sort((x, y) => x - y);
    const median = samples[2];
    console.log(`# Express ${MAJOR}, pool of 4, ${waiters} waiting duplicates: unrelated key latency `
      + `median ${median.toFixed(1)} ms, max ${samples[4].toFixed(1)} ms (${samples.map((s) => s.toFixed(0)).join(', ')})`);
    // Every sample is taken while the duplicates still wait (the slow key holds for 4 s).
    assert.ok(samples[4] < 1000, `max ${samples[4]} ms`);
    assert.equal(await effects(db, slow), 1);
  });
}

test('max_waiters: past the bound, 409 too-many-waiters at once', async () => {
  const key = newKey();
  const holder = post(server, '/api/waiters?sleep=2500', key);
  await sleep(300);
  const waiting = [post(server, '/api/waiters?sleep=2500', key, '{"a":1}', 'application/json', { prefer: 'wait=10' }),
    post(server, '/api/waiters?sleep=2500', key, '{"a":1}', 'application/json', { prefer: 'wait=10' })];
  await sleep(300);
  const over = await post(server, '/api/waiters?sleep=2500', key, '{"a":1}', 'application/json', { prefer: 'wait=10' });
  assertProblem(over, 409, 'too-many-waiters');
  assert.ok(over.headers['retry-after']);
  assert.ok(over.ms < 500, `${over.ms} ms`);
  assert.equal((await holder).status, 201);
  for (const r of await Promise.all(waiting)) assert.equal(r.headers['idempotent-replayed'], 'true');
});

test('no look-alike on the search_path ran', async () => {
  assert.deepEqual(await lookalikeCalls(db, since), []);
});
