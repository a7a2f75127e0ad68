// The framework-neutral core of contract v2 (docs/http.md): options, the claim (polling for
// `Prefer: wait` without holding a connection), recording the handler's response, problems.
// Every parameter is cast and every function schema-qualified: node-postgres sends parameters
// untyped, so a look-alike on the app's search_path must never be a candidate.
import { BodyError } from './fingerprint.js';
import { IdempotencyKeyError } from './key.js';

export const PROBLEM = 'application/problem+json';
export const PROBLEM_BASE = 'https://datatracker.ietf.org/doc/draft-ietf-httpapi-idempotency-key-header#';
export const NEVER_REPLAYED = new Set(['set-cookie', 'set-cookie2', 'authorization', 'proxy-authorization',
  'www-authenticate', 'proxy-authenticate', 'refresh', 'connection', 'keep-alive', 'transfer-encoding', 'te',
  'trailer', 'upgrade', 'content-length', 'date']);
export const OMITTED = 'idempotent-body-omitted';
const FAILURE_LIMIT = 8000; // idem_fail's failure_message is at most 8,192 bytes

const TITLES = {
  'key-required': [400, 'Idempotency-Key header is required'],
  'key-malformed': [400, 'Idempotency-Key header is malformed'],
  'body-not-json': [400, 'Request body is not valid JSON'],
  'body-too-large': [413, 'Request body is too large'],
  'in-flight': [409, 'A request with this Idempotency-Key is being processed'],
  'payload-mismatch': [422, 'Idempotency-Key was used for a different request'],
  'too-many-waiters': [409, 'Too many requests are waiting for their key'],
  'internal-error': [500, 'Internal Server Error'],
};

/** 2xx/3xx complete; 408, 409, 425, 429 and 5xx retry; other 4xx fail (final). */
export function defaultStatusAction(status) {
  if (status < 400) return 'complete';
  if (status >= 500 || [408, 409, 425, 429].includes(status)) return 'retry';
  return 'fail';
}

const waitersByPool = new WeakMap();

/** How many requests of this process are waiting for their key on `pool` now (a gauge; maxWaiters bounds it). */
export function waiters(pool) {
  return waitersByPool.get(pool)?.n ?? 0;
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const quote = (name) => `"${String(name).replace(/"/g, '""')}"`;
const seconds = (s) => `${Number(s).toFixed(3)} seconds`;

export function normalizeOptions(options) {
  const o = { ...options };
  if (!o.pool || typeof o.pool.connect !== 'function') throw new TypeError('idempotency(): option pool (a pg.Pool) is required');
  const num = (name, dflt) => {
    const v = o[name] ?? dflt;
    if (typeof v !== 'number' || !(v >= 0)) throw new TypeError(`idempotency(): option ${name} must be a number >= 0`);
    return v;
  };
  const replayHeaders = (o.replayHeaders ?? []).map((h) => String(h).toLowerCase());
  for (const h of replayHeaders) {
    if (NEVER_REPLAYED.has(h)) throw new TypeError(`idempotency(): header ${h} can never be replayed`);
  }
  if (o.scope !== undefined && typeof o.scope !== 'string' && typeof o.scope !== 'function') {
    throw new TypeError('idempotency(): option scope must be a string or a function (req) => string');
  }
  if (o.principal !== undefined && typeof o.principal !== 'function') {
    throw new TypeError('idempotency(): option principal must be a function (req) => string or null');
  }
  if (o.service !== undefined && (typeof o.service !== 'string' || o.service === '')) {
    throw new TypeError('idempotency(): option service must be a non-empty string');
  }
  return {
    pool: o.pool,
    schema: o.schema === undefined ? null : quote(o.schema), // null: the extension's own schema
    methods: new Set((o.methods ?? ['POST', 'PATCH']).map((m) => String(m).toUpperCase())),
    scope: o.scope,
    service: o.service,
    principal: o.principal,
    lease: num('lease', 300),
    retention: num('retention', 86400),
    wait: num('wait', 0),
    maxWait: num('maxWait', 10),
    maxWaiters: num('maxWaiters', 64),
    retryAfter: num('retryAfter', 1),
    maxBodyBytes: num('maxBodyBytes', 1 << 20),
    maxStoredBytes: num('maxStoredBytes', 1 << 20),
    maxStoredErrorBytes: Math.min(num('maxStoredErrorBytes', FAILURE_LIMIT), FAILURE_LIMIT),
    problemBase: o.problemBase ?? PROBLEM_BASE,
    keep: [...replayHeaders, OMITTED],
    statusAction: o.statusAction ?? defaultStatusAction,
    log: o.log ?? ((msg, err) => console.error(`idempotency-http: ${msg}`, err)),
  };
}

/** A response as the core hands it to the framework: { status, headers, body (Buffer) }. */
export function problem(opts, slug, detail, headers = {}) {
  const [status, title] = TITLES[slug];
  const doc = { type: opts.problemBase + slug, title, status };
  if (detail) doc.detail = detail;
  return { status, headers: { ...headers, 'content-type': PROBLEM }, body: Buffer.from(JSON.stringify(doc)) };
}

/** The problem for an error thrown before the handler ran (key, body), or null if not ours. */
export function problemFor(opts, err) {
  if (err instanceof IdempotencyKeyError || err instanceof BodyError) return problem(opts, err.slug, err.message);
  return null;
}

function hashSql(s, kind) {
  if (kind === 'json') return `${s}.idem_hash($3::pg_catalog.jsonb)`;
  if (kind === 'form') {
    return `pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to('form:'::pg_catalog.text OPERATOR(pg_catalog.||) `
      + `${s}.idem_canonical($3::pg_catalog.jsonb), 'UTF8'::pg_catalog.name)), 'hex'::pg_catalog.text)`;
  }
  return '$3::pg_catalog.text'; // computed here: the empty-body constant or SHA-256 over the bytes
}

/**
 * Claims (scope, key) for a request with fingerprint `print` ({kind, param}), waiting up to
 * `waitSeconds` by polling. Returns { response } to send at once, or { attempt } to run the handler.
 */
export async function claim(opts, scope, key, print, waitSeconds) {
  const s = opts.schema ?? await extensionSchema(opts);
  const sql = `SELECT c.outcome::pg_catalog.text AS outcome, c.attempt, c.recovery_point,
                      ${s}.idem_http_replay(c, $6::pg_catalog.text[]) AS replay
                 FROM ${s}.idem_claim($1::pg_catalog.text, $2::pg_catalog.text, ${hashSql(s, print.kind)},
                      lease => $4::pg_catalog.interval, retention => $5::pg_catalog.interval) AS c`;
  const params = [scope, key, print.param, seconds(opts.lease), seconds(opts.retention), opts.keep];
  const deadline = Date.now() + waitSeconds * 1000;
  let delay = 50;
  let waiting = null;
  try {
    for (;;) {
      const client = await opts.pool.connect();
      let row;
      try {
        await client.query('BEGIN');
        row = (await client.query(sql, params)).rows[0];
        if (row.replay === null && row.outcome !== 'processing_active') await client.query('SAVEPOINT idem_handler');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        client.release();
        if (err.code === 'P4002') return { response: problem(opts, 'payload-mismatch', 'This Idempotency-Key was used for a request with another body.') };
        if (print.kind === 'json' && (['22P02', '22P05', '54001'].includes(err.code))) {
          return { response: problem(opts, 'body-not-json', 'Postgres does not accept the body as jsonb.') };
        }
        throw err;
      }
      if (row.replay !== null) {
        await client.query('ROLLBACK');
        client.release();
        return { response: replayResponse(row.replay) };
      }
      if (row.outcome !== 'processing_active') {
        return { attempt: new Attempt(opts, s, client, scope, key, row) };
      }
      // In flight elsewhere: give the connection back before sleeping, so waiters never starve the pool.
      await client.query('ROLLBACK').catch(() => {});
      client.release();
      const left = deadline - Date.now();
      const retry = { 'retry-after': String(opts.retryAfter) };
      if (left <= 0) {
        return { response: problem(opts, 'in-flight', 'A request with this Idempotency-Key is being processed; retry later.', retry) };
      }
      if (waiting === null) {
        waiting = waitersByPool.get(opts.pool) ?? { n: 0 };
        waitersByPool.set(opts.pool, waiting);
        if (waiting.n >= opts.maxWaiters) {
          waiting = null;
          return { response: problem(opts, 'too-many-waiters', `More than ${opts.maxWaiters} requests are waiting here; retry later.`, retry) };
        }
        waiting.n += 1;
      }
      await sleep(Math.min(delay, left));
      delay = Math.min(delay * 2, 500);
    }
  } finally {
    if (waiting !== null) waiting.n -= 1;
  }
}

// The schema CREATE EXTENSION (or the plain script) put the functions in (looked up once per options object), and a
// loud warning when roles other than its owner may create functions there (issue 25).
const WRITERS = `(SELECT pg_catalog.string_agg(CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid THEN 'PUBLIC'::pg_catalog.text
                                       ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END, ', '::pg_catalog.text)
       FROM pg_catalog.aclexplode(n.nspacl) AS a
      WHERE a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'::pg_catalog.text
        AND a.grantee OPERATOR(pg_catalog.<>) n.nspowner) AS writers`;
const FIND_SCHEMA = `SELECT pg_catalog.quote_ident(n.nspname) AS s, ${WRITERS}
   FROM pg_catalog.pg_extension AS e JOIN pg_catalog.pg_namespace AS n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
  WHERE e.extname OPERATOR(pg_catalog.=) 'idempotency'::pg_catalog.name`;
// Without the extension (the portable edition's plain script): the schemas with idem_claim and idem_http_replay.
const has = (name) => `EXISTS (SELECT FROM pg_catalog.pg_proc AS p WHERE p.pronamespace OPERATOR(pg_catalog.=) n.oid
    AND p.proname OPERATOR(pg_catalog.=) '${name}'::pg_catalog.name)`;
const FIND_PLAIN = `SELECT pg_catalog.quote_ident(n.nspname) AS s, n.nspname::pg_catalog.text AS name, ${WRITERS}
   FROM pg_catalog.pg_namespace AS n WHERE ${has('idem_claim')} AND ${has('idem_http_replay')} ORDER BY n.nspname`;

async function findSchema(client) {
  const { rows } = await client.query(FIND_SCHEMA);
  if (rows.length) return rows;
  const plain = (await client.query(FIND_PLAIN)).rows;
  if (plain.length > 1) {
    throw new Error(`the idempotency extension is not installed and functions of its names are in several schemas (${
      plain.map((r) => r.name).join(', ')}): give the option schema to name the right one`);
  }
  return plain;
}

function extensionSchema(opts) {
  opts.schemaLookup ??= (async () => {
    const client = await opts.pool.connect();
    const rows = await findSchema(client).finally(() => client.release());
    if (rows.length === 0) {
      throw new Error('the idempotency functions are not in this database (CREATE EXTENSION idempotency, or the portable '
        + 'edition\'s script); if they are in a schema this role cannot see, give the option schema');
    }
    if (rows[0].writers) {
      opts.log(`WARNING: schema ${rows[0].s} of the idempotency extension is writable by ${rows[0].writers}: they can plant `
        + 'look-alike functions there (the adapter\'s calls are typed and qualified, but other SQL may not be); '
        + `REVOKE CREATE ON SCHEMA ${rows[0].s} FROM them`);
    }
    return rows[0].s;
  })().catch((err) => {
    opts.schemaLookup = undefined;
    throw err;
  });
  return opts.schemaLookup;
}

function replayResponse(doc) {
  const headers = { ...(doc.headers ?? {}), 'idempotent-replayed': 'true' };
  return { status: doc.status, headers, body: Buffer.from(doc.body ?? '', 'utf8') };
}

/** A claimed attempt: the open transaction (after SAVEPOINT idem_handler) the handler writes in. */
export class Attempt {
  constructor(opts, schema, client, scope, key, row) {
    this.opts = opts;
    this.schema = schema;
    this.client = client;
    this.scope = scope;
    this.key = key;
    this.outcome = row.outcome;
    this.attempt = row.attempt;
    this.recoveryPoint = row.recovery_point;
    this.done = false;
  }

  /**
   * Records the handler's response ({status, headers (name -> string), body Buffer}) and commits.
   * Returns the response to send: the handler's own, or a 500 problem if nothing could be recorded.
   */
  async finish(response) {
    if (this.done) throw new Error('idempotency-http: the attempt is already finished');
    this.done = true;
    const { opts, client, schema: s } = this;
    try {
      const action = opts.statusAction(response.status);
      if (action === 'complete') {
        await client.query(`SELECT ${s}.idem_complete($1::pg_catalog.text, $2::pg_catalog.text, ${storedSql(s)}, $9::pg_catalog.int4)`,
          this.storedParams(response, opts.maxStoredBytes));
      } else if (action === 'fail') {
        await client.query('ROLLBACK TO SAVEPOINT idem_handler');
        await client.query(`SELECT ${s}.idem_http_fail($1::pg_catalog.text, $2::pg_catalog.text, ${storedSql(s)}, $9::pg_catalog.int4)`,
          this.storedParams(response, opts.maxStoredErrorBytes));
      } else if (action === 'retry') {
        await this.failRetryable(`http_${response.status}`, `the handler answered ${response.status}`);
      } else {
        throw new TypeError(`statusAction returned ${action}, not 'complete', 'fail' or 'retry'`);
      }
      await client.query('COMMIT');
      client.release();
      return response;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      client.release(err);
      opts.log(`the response of ${this.scope} could not be recorded`, err);
      return problem(opts, 'internal-error', 'The response could not be recorded; retry the request.');
    }
  }

  /** Leaves no trace: the claim and the handler's writes are rolled back. */
  async abandon() {
    if (this.done) return;
    this.done = true;
    await this.client.query('ROLLBACK').catch(() => {});
    this.client.release();
  }

  /** The handler raised: undo its writes, record a retryable failure, answer a 500 problem. */
  async error(err) {
    const { opts, client } = this;
    opts.log(`the handler of ${this.scope} failed`, err);
    if (!this.done) {
      this.done = true;
      try {
        await client.query('ROLLBACK TO SAVEPOINT idem_handler');
        await this.failRetryable('handler_error', 'the handler raised an exception');
        await client.query('COMMIT');
        client.release();
      } catch (dbErr) {
        await client.query('ROLLBACK').catch(() => {});
        client.release(dbErr);
      }
    }
    return problem(opts, 'internal-error');
  }

  async failRetryable(code, message) {
    const s = this.schema;
    await this.client.query(
      `SELECT ${s}.idem_fail($1::pg_catalog.text, $2::pg_catalog.text, true, $3::pg_catalog.text, $4::pg_catalog.text, $5::pg_catalog.int4)`,
      [this.scope, this.key, code, message, this.attempt]);
  }

  storedParams({ status, headers, body }, limit) {
    const text = body.length ? body.toString('utf8') : null;
    // A body that is not exact UTF-8 text (or holds NUL) cannot be kept byte for byte: omit it.
    const exact = text === null || (!text.includes('\0') && Buffer.from(text, 'utf8').equals(body));
    return [this.scope, this.key, status, JSON.stringify(headers), exact ? text : null, this.opts.keep,
      exact ? limit : -1, JSON.stringify({ [OMITTED]: 'true' }), this.attempt];
  }
}

// The stored document with its body when it fits $7 bytes, else without it and marked omitted.
function storedSql(s) {
  return `(SELECT CASE WHEN pg_catalog.octet_length(r.doc::pg_catalog.text) OPERATOR(pg_catalog.<=) $7::pg_catalog.int4
                       THEN r.doc
                       ELSE ${s}.idem_http_response($3::pg_catalog.int4,
                            $4::pg_catalog.jsonb OPERATOR(pg_catalog.||) $8::pg_catalog.jsonb,
                            NULL::pg_catalog.text, $6::pg_catalog.text[]) END
             FROM (SELECT ${s}.idem_http_response($3::pg_catalog.int4, $4::pg_catalog.jsonb,
                          $5::pg_catalog.text, $6::pg_catalog.text[]) AS doc) AS r)`;
}
