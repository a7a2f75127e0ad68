// Compiled with tsc --strict by test/types.test.js inside the clean project (the package's own
// index.d.ts from its tarball, with @types/express of the project's Express major).
import express from 'express';
import type { Request, Response } from 'express';
import pg from 'pg';
import { idempotency, idempotencyErrorHandler, parseKey, type IdempotencyOptions, type IdempotentRequest } from 'idempotency-http';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 4 });
const app = express();
app.use(express.json());

const options: IdempotencyOptions<Request> = {
  pool,
  service: 'payments-api',
  principal: (req) => (req.ip === undefined ? null : 'user-of-this-request'),
  replayHeaders: ['x-request-id'],
  statusAction: (status) => (status < 400 ? 'complete' : 'retry'),
};

app.post('/payments', idempotency(options, async (req: IdempotentRequest<Request>, res: Response) => {
  const { client, key, attempt } = req.idempotency;
  const { rows } = await client.query('SELECT $1::pg_catalog.text AS k', [key]);
  const n: number = attempt;
  res.status(201).json({ k: rows[0].k, n });
}));
app.post('/orders', idempotency({ pool, maxWait: 5 }), (req: Request, res: Response) => {
  res.status(201).json({ body: req.body as unknown });
});
// The README's TypeScript example.
app.post('/readme', idempotency<Request, Response>({ pool, service: 'payments-api' },
  async (req: IdempotentRequest<Request>, res: Response) => {
    const { key } = req.idempotency;
    res.status(201).json({ key });
  }));
app.post('/own-scope', idempotency<Request, Response>({ pool, scope: (req) => `orders:${req.path}` },
  async (req: IdempotentRequest<Request>, res: Response) => {
    const { key } = req.idempotency;
    res.status(201).json({ key });
  }));
app.use(idempotencyErrorHandler());
const k: string = parseKey('"abc"');
console.log(k);
