// Express (4 and 5) on the core: a middleware, or a wrapper around one handler that also turns
// its thrown or rejected errors into a 500 problem (Express 4 does not catch async errors).
import { STATUS_CODES } from 'node:http';
import { PROBLEM, claim, normalizeOptions, problem, problemFor } from './core.js';
import { fingerprintRequest } from './fingerprint.js';
import { keyLines, parseKey, parsePreferWait } from './key.js';
import { defaultScope, identityOf, serviceName } from './scope.js';

/**
 * idempotency(options)           -> middleware; the route's handler comes after it.
 * idempotency(options, handler)  -> one handler: claim, run `handler`, record; errors become problems.
 */
export function idempotency(options, handler) {
  const opts = normalizeOptions(options);
  if (handler !== undefined && typeof handler !== 'function') throw new TypeError('idempotency(): handler must be a function');

  return function idempotencyMiddleware(req, res, next) {
    begin(opts, req, res, handler !== undefined).then((attempt) => {
      if (!attempt) return undefined;
      if (!handler) return next();
      if (attempt === PASS) return Promise.resolve().then(() => handler(req, res, next)).catch(next);
      let result;
      try {
        result = handler(req, res, next);
      } catch (err) {
        return failed(opts, attempt, res, err);
      }
      return Promise.resolve(result).catch((err) => failed(opts, attempt, res, err));
    }).catch((err) => {
      opts.log('the claim failed', err);
      if (!res.headersSent) send(res, res.end, problem(opts, 'internal-error'));
    });
  };
}

/** An Express error handler that answers problem documents (for the middleware form on Express 5). */
export function idempotencyErrorHandler(options = {}) {
  const base = normalizeOptions({ pool: { connect() {} }, ...options });
  return function idempotencyErrors(err, req, res, next) {
    if (res.headersSent) return next(err);
    // body-parser's own refusals (a global express.json() before the adapter) keep their status.
    if (err?.type === 'entity.parse.failed') return send(res, res.end, problem(base, 'body-not-json', 'The body could not be parsed.'));
    if (err?.type === 'entity.too.large') return send(res, res.end, problem(base, 'body-too-large', `The limit is ${err.limit} bytes.`));
    const status = Number(err?.status ?? err?.statusCode);
    if (status >= 400 && status < 500) {
      const body = Buffer.from(JSON.stringify({ type: 'about:blank', title: STATUS_CODES[status] ?? 'Client Error', status }));
      return send(res, res.end, { status, headers: { 'content-type': PROBLEM }, body });
    }
    base.log(`${req.method} ${req.originalUrl ?? req.url} failed`, err);
    return send(res, res.end, problem(base, 'internal-error'));
  };
}

async function failed(opts, attempt, res, err) {
  const response = await attempt.error(err);
  restore(res);
  if (!res.headersSent) send(res, res.end, response);
  else res.destroy(err);
}

const PASS = 'pass';

// Claims; returns PASS for a method that is not claimed, the attempt when the handler should run, null when the response is settled.
async function begin(opts, req, res, endpoint) {
  if (!opts.methods.has(req.method)) return PASS; // GET, HEAD, OPTIONS...: the key is ignored
  let key;
  let print;
  try {
    key = parseKey(keyLines(req));
    print = await fingerprintRequest(req, opts.maxBodyBytes);
  } catch (err) {
    const p = problemFor(opts, err);
    if (!p) throw err;
    send(res, res.end, p);
    return null;
  }
  const scope = typeof opts.scope === 'function' ? await opts.scope(req)
    : opts.scope ?? defaultScope(serviceName(opts.service), await principalOf(opts, req), req);
  if (typeof scope !== 'string' || scope === '') throw new TypeError('idempotency(): scope must be a non-empty string');
  const asked = parsePreferWait(req.headers.prefer);
  const waitFor = Math.min(asked ?? opts.wait, Math.max(opts.maxWait, opts.wait));

  const { response, attempt } = await claim(opts, scope, key, print, waitFor);
  if (response) {
    send(res, res.end, response);
    return null;
  }
  if (!req._body) {
    req.body = print.body;
    req._body = true; // body-parser mounted after this skips a body already read
  }
  req.idempotency = {
    client: attempt.client, scope, key, body: print.body, kind: print.kind,
    outcome: attempt.outcome, attempt: attempt.attempt, recoveryPoint: attempt.recoveryPoint,
  };
  intercept(opts, req, res, attempt, endpoint || Boolean(req.route)); // the handler form is the endpoint itself
  return attempt;
}

// opts.principal(req), else the authenticated req.user (Passport); never a client header.
async function principalOf(opts, req) {
  if (opts.principal) {
    const p = await opts.principal(req);
    return p === undefined || p === null ? null : String(p);
  }
  return identityOf(req, req.user);
}

function send(res, end, { status, headers, body }) {
  res.statusCode = status;
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  res.setHeader('Content-Length', body.length);
  end.call(res, body);
}

const ORIGINAL = Symbol('idempotency original methods');

function restore(res) {
  const orig = res[ORIGINAL];
  if (orig) Object.assign(res, orig);
}

// Buffers what the handler writes; on end, records it, commits, and only then sends it.
// A request that no route handled (app-wide middleware, then Express's 404) leaves no record:
// its claim is rolled back.
function intercept(opts, req, res, attempt, routed) {
  const chunks = [];
  const orig = { write: res.write, end: res.end, writeHead: res.writeHead };
  res[ORIGINAL] = orig;
  const toBuffer = (chunk, encoding) =>
    Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk, typeof encoding === 'string' ? encoding : 'utf8');
  res.writeHead = function (status, ...rest) {
    res.statusCode = status;
    const headers = rest.find((a) => a && typeof a === 'object');
    if (Array.isArray(headers)) for (let i = 0; i + 1 < headers.length; i += 2) res.setHeader(headers[i], headers[i + 1]);
    else if (headers) for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
    return res;
  };
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
    const body = Buffer.concat(chunks);
    const headers = {};
    for (const [name, value] of Object.entries(res.getHeaders())) {
      headers[name] = Array.isArray(value) ? value.join(', ') : String(value);
    }
    const done = routed || req.route ? attempt.finish({ status: res.statusCode, headers, body })
      : attempt.abandon().then(() => ({ body }));
    done.then((response) => {
      restore(res);
      if (response.body === body) {
        res.setHeader('Content-Length', body.length);
        orig.end.call(res, body);
      } else {
        for (const name of res.getHeaderNames()) res.removeHeader(name);
        send(res, orig.end, response);
      }
    });
    return res;
  };
}
