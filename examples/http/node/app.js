// Example service: POST /payments and POST /receipts (a multer upload), idempotent through idempotency-http (Express + node-postgres),
// behind a global express.json(). The default scope keeps services, users and resources apart:
// the service is IDEMPOTENCY_SERVICE (else this package's name), the user is req.user.
// Environment: PORT, DATABASE_URL; IDEM_EXAMPLE_TEST_HOOKS=1 enables the test-only header
// X-Test-Sleep-After-Insert: <seconds> (sleep between the insert and the commit).
import express from 'express';
import pg from 'pg';
import multer from 'multer';
import { idempotency, idempotencyErrorHandler } from 'idempotency-http';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 20 });
const testHooks = process.env.IDEM_EXAMPLE_TEST_HOOKS === '1';
const app = express();
app.use(express.json());

app.get('/health', (_req, res) => res.json({ ok: true }));

// Authentication is the app's own (Passport, a JWT middleware, ...): it sets req.user, and the
// adapter scopes keys by it. Here a demo token table; never trust a client's X-Tenant header.
const USERS = { 'demo-token-alice': { id: 'alice' }, 'demo-token-bob': { id: 'bob' } };
app.use((req, _res, next) => {
  req.user = USERS[/^Bearer (.+)$/.exec(req.get('authorization') ?? '')?.[1]];
  next();
});

app.post('/payments', idempotency({ pool, maxWait: 30 }, async (req, res) => {
  const { client, key } = req.idempotency;
  const { order_id: orderId, amount } = req.body ?? {};
  if (orderId === undefined || amount === undefined) {
    res.status(400).type('application/problem+json')
      .send(JSON.stringify({ type: 'about:blank', title: 'order_id and amount are required', status: 400 }));
    return;
  }
  const { rows } = await client.query(
    'INSERT INTO payments (idem_key, order_id, amount) VALUES ($1::pg_catalog.text, $2::pg_catalog.text, $3::pg_catalog.numeric) RETURNING id, amount',
    [key, String(orderId), String(amount)],
  );
  const sleep = testHooks && Number(req.get('x-test-sleep-after-insert'));
  if (sleep) await new Promise((resolve) => setTimeout(resolve, sleep * 1000));
  res.status(201).location(`/payments/${rows[0].id}`)
    .json({ payment_id: Number(rows[0].id), order_id: String(orderId), amount: rows[0].amount });
}));

// The same insert without the adapter, in its own transaction (bench/http-roundtrips.sh).
app.post('/plain/payments', async (req, res) => {
  const { order_id: orderId, amount } = req.body;
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query(
      'INSERT INTO payments (idem_key, order_id, amount) VALUES ($1::pg_catalog.text, $2::pg_catalog.text, $3::pg_catalog.numeric) RETURNING id, amount',
      [null, String(orderId), String(amount)],
    );
    await client.query('COMMIT');
    res.status(201).location(`/payments/${rows[0].id}`)
      .json({ payment_id: Number(rows[0].id), order_id: String(orderId), amount: rows[0].amount });
  } finally {
    client.release();
  }
});

// Uploads with multer: idempotency() first (it reads the multipart bytes, up to maxBodyBytes, and
// fingerprints them exactly), then multer, fed those bytes by streamHandler (the stream is read).
// The file is written in the claim's transaction: one row per key, replayed after.
const upload = multer({
  storage: multer.memoryStorage(),
  limits: { fileSize: 256 * 1024 },
  streamHandler: (req, busboy) => busboy.end(req.idempotency.body),
});
app.post('/receipts', idempotency({ pool, maxBodyBytes: 512 * 1024 }), upload.single('file'), async (req, res) => {
  if (!req.file) {
    res.status(400).type('application/problem+json')
      .send(JSON.stringify({ type: 'about:blank', title: 'a file field is required', status: 400 }));
    return;
  }
  const { rows } = await req.idempotency.client.query(
    `INSERT INTO receipts (idem_key, note, filename, bytes) VALUES ($1::pg_catalog.text, $2::pg_catalog.text,
       $3::pg_catalog.text, $4::pg_catalog.bytea) RETURNING id`,
    [req.idempotency.key, req.body.note ?? null, req.file.originalname, req.file.buffer],
  );
  res.status(201).json({ receipt_id: Number(rows[0].id), filename: req.file.originalname, size: req.file.size });
});

app.use(idempotencyErrorHandler());
app.listen(Number(process.env.PORT), '127.0.0.1');
