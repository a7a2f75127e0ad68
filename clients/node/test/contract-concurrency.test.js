// Contract v2 under concurrency, through the real test server: 20 duplicates -> one effect,
// `Prefer: wait` polling without holding a pooled connection (unrelated keys answered with a pool
// of 4 while 5 and 20 duplicates wait), max_waiters. A slow handler waits for an advisory lock the
// test holds, and the tests wait on what they can observe (the lock wait in pg_locks, the app's
// count of waiting duplicates), not on sleeps: a loaded machine (CI's 2 busy cores) only slows them.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  MAJOR, advisoryGate, assertProblem, calls, connectDb, effects, json, lookalikeCalls, newKey,
  plantLookalikes, post, request, startServer, stopServer, until,
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

const stats = async () => json(await request('GET', server, '/stats'));
const body = '{"a":1}';

test('wait runs out: 409 in-flight after about the asked time', async () => {
  const key = newKey();
  const gate = await advisoryGate(db);
  try {
    const holder = post(server, `/plain/echo?lock=${gate.id}`, key);
    await until('the holder to wait for the lock', async () => (await gate.waiting()) === 1);
    // The same request (the query string is part of the scope), sent while the first is held.
    const r = await post(server, `/plain/echo?lock=${gate.id}`, key, body, 'application/json', { prefer: 'wait=1' });
    assertProblem(r, 409, 'in-flight');
    assert.ok(r.ms >= 900, `${r.ms} ms`); // it waited; no upper bound but the failsafe (load only delays)
    await gate.release();
    assert.equal((await holder).status, 201);
  } finally {
    await gate.release().catch(() => {});
  }
});

for (const waiters of [5, 20]) {
  test(`pool of 4: unrelated keys are answered while ${waiters} duplicates of a held key wait`, async () => {
    const slow = newKey();
    const gate = await advisoryGate(db);
    try {
      const path = `/pool/slow?lock=${gate.id}`;
      const holder = post(server, path, slow);
      await until('the holder to wait for the lock', async () => (await gate.waiting()) === 1);
      const dups = Array.from({ length: waiters }, () =>
        post(server, path, slow, body, 'application/json', { prefer: 'wait=120' }));
      // Registered as waiting, and holding no connection: only the holder's is in use.
      await until(`${waiters} duplicates to wait`, async () => {
        const s = await stats();
        return s.smallWaiters === waiters && s.smallInUse === 1 && s.smallQueued === 0;
      });
      const samples = [];
      for (let i = 0; i < 5; i++) {
        const r = await post(server, '/pool/fast', newKey());
        assert.equal(r.status, 201);
        samples.push(r.ms);
      }
      // All answered while the slow key is still held and its duplicates still wait.
      assert.equal(await gate.waiting(), 1);
      assert.equal((await stats()).smallWaiters, waiters);
      await gate.release();
      const results = await Promise.all([holder, ...dups]);
      assert.ok(results.every((r) => r.status === 201), results.map((r) => r.status).join(','));
      assert.equal(results.filter((r) => r.headers['idempotent-replayed'] === 'true').length, waiters);
      samples.sort((x, y) => x - y);
      console.log(`# Express ${MAJOR}, pool of 4, ${waiters} waiting duplicates: unrelated key latency `
        + `median ${samples[2].toFixed(1)} ms, max ${samples[4].toFixed(1)} ms (${samples.map((x) => x.toFixed(0)).join(', ')})`);
      assert.equal(await effects(db, slow), 1);
    } finally {
      await gate.release().catch(() => {});
    }
  });
}

test('max_waiters: past the bound, 409 too-many-waiters at once', async () => {
  const key = newKey();
  const gate = await advisoryGate(db);
  try {
    const path = `/api/waiters?lock=${gate.id}`;
    const holder = post(server, path, key);
    await until('the holder to wait for the lock', async () => (await gate.waiting()) === 1);
    const before = (await stats()).waiters;
    const waiting = [post(server, path, key, body, 'application/json', { prefer: 'wait=10' }),
      post(server, path, key, body, 'application/json', { prefer: 'wait=10' })];
    await until('2 duplicates to wait', async () => (await stats()).waiters === before + 2);
    const over = await post(server, path, key, body, 'application/json', { prefer: 'wait=10' });
    assertProblem(over, 409, 'too-many-waiters'); // at once: it never waited, or it would count
    assert.ok(over.headers['retry-after']);
    assert.equal(await gate.waiting(), 1);
    await gate.release();
    assert.equal((await holder).status, 201);
    for (const r of await Promise.all(waiting)) assert.equal(r.headers['idempotent-replayed'], 'true');
  } finally {
    await gate.release().catch(() => {});
  }
});

test('no look-alike on the search_path ran', async () => {
  assert.deepEqual(await lookalikeCalls(db, since), []);
});
