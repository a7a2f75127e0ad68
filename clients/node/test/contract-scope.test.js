// The default scope through real servers: a stored response never answers another resource
// (path parameters, query string), another service (a second server with another
// IDEMPOTENCY_SERVICE) or another principal (req.user, never a client header); one resource
// spelled /payments, /Payments, /payments/ or /PAYMENTS/ is one; a POST no route handles leaves no record.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { connectDb, effects, json, newKey, post, request, startServer, stopServer, stored } from './helpers.js';

let server;
let other;
let db;
before(async () => {
  db = await connectDb();
  [server, other] = await Promise.all([startServer(), startServer({ IDEMPOTENCY_SERVICE: 'billing' })]);
});
after(async () => {
  await Promise.all([stopServer(server), stopServer(other)]);
  await db?.end();
});

const alice = { authorization: 'Bearer alice-token' };
const bob = { authorization: 'Bearer bob-token' };
const send = (srv, path, key, headers = alice, body = '{"amount":5}') => post(srv, path, key, body, 'application/json', headers);
const fresh = (r) => r.status === 201 && r.headers['idempotent-replayed'] === undefined;
const replay = (r) => r.status === 201 && r.headers['idempotent-replayed'] === 'true';

for (const form of ['transfer', 'mw-transfer']) {
  test(`another resource (${form}): the key of /accounts/1 runs anew on /accounts/2`, async () => {
    const key = newKey();
    assert.ok(fresh(await send(server, `/api/accounts/1/${form}`, key)));
    const two = await send(server, `/api/accounts/2/${form}`, key);
    assert.ok(fresh(two), `${two.status} ${two.headers['idempotent-replayed']}`);
    assert.ok(replay(await send(server, `/api/accounts/1/${form}`, key)));
    assert.ok(replay(await send(server, `/api/accounts/2/${form}`, key)));
    assert.equal(await effects(db, key), 2);
    const scopes = (await stored(db, key)).map((r) => JSON.parse(r.scope));
    assert.deepEqual(scopes.map((s) => s[4].id).sort(), ['1', '2']);
    assert.deepEqual(scopes[0].slice(0, 4), ['idem-express' + process.env.EXPRESS_MAJOR + '-test', 'alice', 'POST', `/api/accounts/:id/${form}`]);
  });
}

test('another query string is another resource; the order of its parameters is not', async () => {
  const key = newKey();
  assert.ok(fresh(await send(server, '/api/payments?account=1&x=a', key)));
  assert.ok(replay(await send(server, '/api/payments?x=a&account=1', key)));
  assert.ok(fresh(await send(server, '/api/payments?account=2&x=a', key)));
  assert.equal(await effects(db, key), 2);
});

test('another service: one database, one key, two services, two effects', async () => {
  const key = newKey();
  assert.ok(fresh(await send(server, '/api/payments', key)));
  const b = await send(other, '/api/payments', key);
  assert.ok(fresh(b), `${b.status} ${b.headers['idempotent-replayed']}`);
  assert.ok(replay(await send(other, '/api/payments', key)));
  assert.equal(await effects(db, key), 2);
  assert.deepEqual((await stored(db, key)).map((r) => JSON.parse(r.scope)[0]).sort(), ['billing', 'idem-express' + process.env.EXPRESS_MAJOR + '-test']);
});

test('another principal: req.user decides, an X-Tenant header does not', async () => {
  const key = newKey();
  const a = await send(server, '/api/payments', key, { ...alice, 'x-tenant': 'acme' });
  assert.ok(fresh(a));
  const b = await send(server, '/api/payments', key, { ...bob, 'x-tenant': 'acme' });
  assert.ok(fresh(b), 'bob must not get alice\'s response');
  const anon = await send(server, '/api/payments', key, { 'x-tenant': 'acme' });
  assert.ok(fresh(anon), 'an anonymous caller must not get alice\'s response');
  const a2 = await send(server, '/api/payments', key, { ...alice, 'x-tenant': 'globex' });
  assert.ok(replay(a2));
  assert.deepEqual(a2.body, a.body);
  assert.equal(await effects(db, key), 3);
  assert.deepEqual((await stored(db, key)).map((r) => JSON.parse(r.scope)[1]).sort(), ['alice', 'bob', null].sort());
});

for (const [label, base] of [['route form', '/api'], ['app-wide middleware', '/wide']]) {
  test(`${label}: /payments, /Payments, /payments/ and /PAYMENTS/ are one resource`, async () => {
    const key = newKey();
    const all = [];
    for (const p of ['/payments', '/Payments', '/payments/', '/PAYMENTS/']) all.push(await send(server, `${base}${p}`, key));
    assert.ok(fresh(all[0]));
    for (const r of all.slice(1)) assert.ok(replay(r), `${r.status} ${r.headers['idempotent-replayed']}`);
    assert.equal(await effects(db, key), 1);
  });
}

test('app-wide middleware: a POST that no route handles is answered 404 and leaves no record', async () => {
  const key = newKey();
  for (let i = 0; i < 2; i++) {
    const r = await send(server, '/wide/nowhere', key);
    assert.equal(r.status, 404);
    assert.equal(r.headers['idempotent-replayed'], undefined);
  }
  assert.equal(await stored(db, key), undefined);
  // The same key then works on a route.
  assert.ok(fresh(await send(server, '/wide/accounts/9', key)));
  assert.equal(JSON.parse((await stored(db, key)).scope)[3], '/wide/accounts/9');
});

test('the handler form mounted with app.use (no route) stores its answer', async () => {
  const key = newKey();
  assert.ok(fresh(await send(server, '/mounted-handler', key)));
  assert.ok(replay(await send(server, '/mounted-handler', key)));
  assert.equal(await effects(db, key), 1);
});

test('a health check answers (the second server is up)', async () => {
  assert.equal(json(await request('GET', other, '/health')).service, 'billing');
});
