// Behind a transaction pooler: a real PgBouncer (pool_mode = transaction, two server connections)
// on loopback in front of the test database, and 300 requests through the test server.
// node-postgres prepares only named queries, and the adapter names none, so every request's
// claim, handler and record run as one transaction on whichever server connection it gets.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { DB, connectDb, effects, newKey, post, sleep, startServer, stopServer } from './helpers.js';

const PGBOUNCER = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'].find((p) => fs.existsSync(p));
let bouncer;
let server;
let db;

const freePort = () => new Promise((resolve) => {
  const s = net.createServer().listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
});

before(async () => {
  if (!PGBOUNCER) return;
  const target = new URL(DB);
  const user = target.username || 'postgres';
  const port = await freePort();
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-pgbouncer-'));
  fs.writeFileSync(path.join(work, 'users.txt'), `"${user}" ""\n`);
  fs.writeFileSync(path.join(work, 'pgbouncer.ini'), `[databases]
* = host=${target.hostname} port=${target.port || 5432}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${port}
unix_socket_dir =
auth_type = trust
auth_file = ${work}/users.txt
pool_mode = transaction
default_pool_size = 2
max_client_conn = 200
ignore_startup_parameters = extra_float_digits,options
logfile = ${work}/pgbouncer.log
log_connections = 0
log_disconnections = 0
`);
  const asRoot = process.getuid?.() === 0; // pgbouncer refuses to run as root
  if (asRoot) fs.chownSync(work, Number(spawnId('postgres')), Number(spawnId('postgres', '-g')));
  const cmd = asRoot ? ['runuser', ['-u', 'postgres', '--', PGBOUNCER, `${work}/pgbouncer.ini`]] : [PGBOUNCER, [`${work}/pgbouncer.ini`]];
  bouncer = spawn(cmd[0], cmd[1], { stdio: 'ignore' });
  const url = Object.assign(new URL(DB), { host: `127.0.0.1:${port}` }).toString();
  for (let i = 0; ; i++) {
    const c = new pg.Client({ connectionString: url });
    try {
      await c.connect();
      await c.end();
      break;
    } catch (err) {
      if (i > 100) throw new Error(`pgbouncer did not start: ${err.message}`);
      await sleep(200);
    }
  }
  db = await connectDb(); // creates public.effects, which the test server's handler writes
  server = await startServer({ DATABASE_URL: url });
});
after(async () => {
  await stopServer(server);
  await db?.end();
  bouncer?.kill('SIGTERM');
});

function spawnId(user, flag = '-u') {
  return fs.readFileSync('/etc/passwd', 'utf8').split('\n').map((l) => l.split(':'))
    .find((f) => f[0] === user)[flag === '-u' ? 2 : 3];
}

test('300 requests through PgBouncer in transaction mode: all answered, one effect per key', { skip: !PGBOUNCER && 'pgbouncer is not installed (Debian package pgbouncer)' }, async () => {
  const keys = Array.from({ length: 200 }, newKey);
  const run = async (list) => {
    const out = [];
    for (let i = 0; i < list.length; i += 8) out.push(...await Promise.all(list.slice(i, i + 8).map((k) => post(server, '/plain/echo', k))));
    return out;
  };
  const first = await run(keys);
  const again = await run(keys.slice(0, 100));
  const bad = [...first, ...again].filter((r) => r.status !== 201);
  assert.equal(bad.length, 0, bad[0]?.body.toString());
  assert.ok(again.every((r) => r.headers['idempotent-replayed'] === 'true'));
  const { rows } = await db.query('SELECT count(*)::int AS n FROM public.effects WHERE key = ANY ($1::text[])', [keys]);
  assert.equal(rows[0].n, 200);
  assert.equal(await effects(db, keys[0]), 1);
});
