// Idempotency-Key for Express on the `idempotency` Postgres extension (node-postgres).
//
// One request runs in one transaction on one pooled client: the claim (idem_claim with
// idem_hash of the payload), the handler's own writes (req.idempotency.client), and the
// stored response (idem_complete with idem_http_response) commit together. See README.md and
// docs/http.md in the repository for the contract.
import { parseItem } from 'structured-headers';

export const PROBLEM = 'application/problem+json';
/** 4xx statuses that end an attempt as a retryable failure (like 5xx). */
export const RETRYABLE_4XX = new Set([408, 409, 425, 429]);
const MAX_BODY = 1 << 20;

export class IdempotencyKeyError extends Error {}

/** The key from an Idempotency-Key header value: an RFC 8941 sf-string such as "abc". */
export function parseKey(value) {
  if (value === undefined || value === null || String(value).trim() === '') {
    throw new IdempotencyKeyError('the Idempotency-Key header is required');
  }
  let item;
  try {
    item = parseItem(String(value));
  } catch (err) {
    throw new IdempotencyKeyError(`Idempotency-Key must be an RFC 8941 string such as "8e03978e": ${err.message}`);
  }
  const key = item[0];
  if (typeof key !== 'string') {
    throw new IdempotencyKeyError('Idempotency-Key must be an RFC 8941 string (in double quotes), such as "8e03978e"');
  }
  if (key === '' || Buffer.byteLength(key) > 255) {
    throw new IdempotencyKeyError('Idempotency-Key must be 1 to 255 bytes long');
  }
  return key;
}

/** Seconds from an RFC 7240 `Prefer: wait=N` header, or null. */
export function parsePreferWait(value) {
  const m = /(?:^|[,;\s])wait\s*=\s*"?(\d+)"?/i.exec(value ?? '');
  return m ? Number(m[1]) : null;
}

function problem(res, status, title, detail, headers = {}) {
  const body = JSON.stringify({ type: 'about:blank', title, status, detail });
  res.status(status);
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  res.setHeader('Content-Type', PROBLEM);
  res.setHeader('Content-Length', Buffer.byteLength(body));
  res.end(body);
}

function sendStored(res, end, stored) {
  res.statusCode = stored.status;
  for (const [k, v] of Object.entries(stored.headers ?? {})) res.setHeader(k, v);
  const body = Buffer.from(stored.body ?? '', 'utf8');
  res.setHeader('Content-Length', body.length);
  res.setHeader('Idempotent-Replayed', 'true');
  end.call(res, body);
}

async function readBody(req) {
  if (Buffer.isBuffer(req.body)) return req.body;
  if (typeof req.body === 'string') return Buffer.from(req.body);
  if (req.body !== undefined && req.readableEnded) {
    throw new TypeError('mount idempotency() before any body parser other than express.raw()');
  }
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > MAX_BODY) throw new RangeError('request body too large');
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function interval(seconds) {
  return `${Number(seconds).toFixed(3)} seconds`;
}

/**
 * Express middleware. Options:
 *  pool        a pg.Pool (required); the handler writes with req.idempotency.client
 *  scope       the claim's scope (default: "<METHOD> <route path>")
 *  tenant      (req) => string|undefined: prefixes the scope ("<tenant>/<scope>")
 *  lease, retention   seconds (default 300, 86400)
 *  wait        seconds a duplicate waits for an in-flight holder by default (0: 409 at once)
 *  maxWait     the most a client may ask for with `Prefer: wait=N` (default: wait)
 *  retryAfter  Retry-After seconds on 409 (default 1)
 *  schema      the extension's schema, if not on the search_path
 */
export function idempotency(options) {
  const { pool, lease = 300, retention = 86400, wait = 0, retryAfter = 1, schema } = options;
  if (!pool) throw new TypeError('idempotency(): option pool is required');
  const maxWait = Math.max(options.maxWait ?? 0, wait);
  const fn = (name) => (schema ? `${escapeIdent(schema)}.${name}` : name);

  return async function idempotencyMiddleware(req, res, next) {
    let key;
    try {
      key = parseKey(req.get('idempotency-key'));
    } catch (err) {
      return problem(res, 400, 'Idempotency-Key required', err.message);
    }
    let raw, payload;
    try {
      raw = await readBody(req);
      payload = raw.toString('utf8').trim() === '' ? null : JSON.parse(raw.toString('utf8'));
    } catch (err) {
      return problem(res, 400, 'Body is not JSON', err.message);
    }
    const routeScope = options.scope ?? `${req.method} ${req.route?.path ?? req.baseUrl + req.path}`;
    const owner = options.tenant ? options.tenant(req) : undefined;
    const scope = owner === undefined || owner === null ? routeScope : `${owner}/${routeScope}`;
    const asked = parsePreferWait(req.get('prefer'));
    const waitFor = asked === null ? wait : Math.min(asked, maxWait);

    const client = await pool.connect();
    let released = false;
    const release = (err) => {
      if (!released) {
        released = true;
        client.release(err);
      }
    };
    let claim;
    try {
      await client.query('BEGIN');
      const params = [scope, key, payload === null ? 'null' : raw.toString('utf8'), interval(lease), interval(retention)];
      let waitSql = '';
      if (waitFor > 0) {
        params.push(interval(waitFor));
        waitSql = ', wait => $6::pg_catalog.interval';
      }
      const { rows } = await client.query(
        `SELECT c.outcome::pg_catalog.text AS outcome, c.attempt, c.recovery_point, ${fn('idem_http_replay')}(c) AS replay
           FROM ${fn('idem_claim')}($1, $2, ${fn('idem_hash')}($3::pg_catalog.jsonb),
                lease => $4::pg_catalog.interval, retention => $5::pg_catalog.interval${waitSql}) AS c`,
        params,
      );
      claim = rows[0];
      if (claim.replay !== null || claim.outcome === 'processing_active') {
        await client.query('COMMIT');
        release();
        if (claim.replay !== null) return sendStored(res, res.end, claim.replay);
        return problem(res, 409, 'Request in progress',
          'A request with this Idempotency-Key is being processed; retry later.',
          { 'Retry-After': String(retryAfter) });
      }
      await client.query('SAVEPOINT idem_handler');
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      release();
      if (err.code === 'P4002') {
        return problem(res, 422, 'Idempotency-Key reused',
          'This Idempotency-Key was used for a request with a different payload.');
      }
      return next(err);
    }

    // New attempt: buffer the handler's response, record it, commit, then send it.
    const chunks = [];
    const origWrite = res.write;
    const origEnd = res.end;
    const toBuffer = (chunk, encoding) =>
      Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk, typeof encoding === 'string' ? encoding : 'utf8');
    res.write = function (chunk, encoding, cb) {
      if (chunk !== undefined && chunk !== null && typeof chunk !== 'function') chunks.push(toBuffer(chunk, encoding));
      const done = [encoding, cb].find((a) => typeof a === 'function');
      if (done) process.nextTick(done);
      return true;
    };
    let ending = false;
    res.end = function (chunk, encoding, cb) {
      if (ending) return res;
      ending = true;
      if (chunk !== undefined && chunk !== null && typeof chunk !== 'function') chunks.push(toBuffer(chunk, encoding));
      finish().catch((err) => {
        // Nothing could be recorded: the transaction is gone, the client learns it failed.
        release(err);
        res.write = origWrite;
        res.end = origEnd;
        if (!res.headersSent) {
          for (const name of res.getHeaderNames()) res.removeHeader(name);
          problem(res, 500, 'Request not recorded', 'The response could not be stored; retry the request.');
        } else {
          res.destroy(err);
        }
      });
      return res;
    };

    async function finish() {
      const body = Buffer.concat(chunks);
      const status = res.statusCode;
      const headers = {};
      for (const [name, value] of Object.entries(res.getHeaders())) {
        headers[name] = Array.isArray(value) ? value.join(', ') : String(value);
      }
      const text = body.length ? body.toString('utf8') : null;
      const respSql = `${fn('idem_http_response')}($3, $4::pg_catalog.jsonb, $5)`;
      if (status < 400) {
        await client.query(`SELECT ${fn('idem_complete')}($1, $2, ${respSql}, $6)`,
          [scope, key, status, JSON.stringify(headers), text, claim.attempt]);
      } else {
        await client.query('ROLLBACK TO SAVEPOINT idem_handler');
        if (status >= 500 || RETRYABLE_4XX.has(status)) {
          await client.query(`SELECT ${fn('idem_fail')}($1, $2, true, $3, $4, $5)`,
            [scope, key, `http_${status}`, `the handler answered ${status}`, claim.attempt]);
        } else {
          await client.query(`SELECT ${fn('idem_http_fail')}($1, $2, ${respSql}, $6)`,
            [scope, key, status, JSON.stringify(headers), text, claim.attempt]);
        }
      }
      await client.query('COMMIT');
      release();
      res.write = origWrite;
      res.end = origEnd;
      res.setHeader('Content-Length', body.length);
      origEnd.call(res, body);
    }

    req.body = payload;
    req.idempotency = {
      client, scope, key, payload,
      outcome: claim.outcome, attempt: claim.attempt, recoveryPoint: claim.recovery_point,
    };
    next();
  };
}

function escapeIdent(name) {
  return `"${String(name).replace(/"/g, '""')}"`;
}
