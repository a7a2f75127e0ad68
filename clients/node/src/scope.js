// The default scope (docs/http.md, "Scope"): who asks (service, principal) and what they act on
// (method, route pattern with its parameters' values, the query string), as a JSON array, so a
// stored response never answers another resource, service or user.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const MAX_BYTES = 255; // idempotency.requests.scope
let appName;

/** `service` option, else $IDEMPOTENCY_SERVICE, else the app's package name, else its main script. */
export function serviceName(configured) {
  const name = configured ?? process.env.IDEMPOTENCY_SERVICE ?? (appName ??= packageName());
  if (typeof name !== 'string' || name === '') throw new TypeError('idempotency(): option service must be a non-empty string');
  return name;
}

function packageName() {
  if (process.env.npm_package_name) return process.env.npm_package_name;
  try {
    const { name } = JSON.parse(fs.readFileSync(path.join(process.cwd(), 'package.json'), 'utf8'));
    if (typeof name === 'string' && name) return name;
  } catch { /* no package.json here */ }
  return path.resolve(process.argv[1] ?? 'node');
}

/** The principal of a user object (Passport's req.user): null when absent or not authenticated. */
export function identityOf(req, user) {
  if (user === undefined || user === null) return null;
  if (typeof req.isAuthenticated === 'function' && !req.isAuthenticated()) return null;
  if (typeof user === 'string' || typeof user === 'number') return String(user);
  for (const field of ['id', 'sub', 'username', 'email']) {
    if (user[field] !== undefined && user[field] !== null && user[field] !== '') return String(user[field]);
  }
  throw new TypeError('idempotency(): cannot tell which principal req.user is: give the option principal: (req) => string');
}

/** The query string with its parameters sorted by name (a name's values keep their order). */
export function canonicalQuery(url) {
  const at = url.indexOf('?');
  if (at < 0) return '';
  const pairs = [...new URLSearchParams(url.slice(at + 1))];
  pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return new URLSearchParams(pairs).toString();
}

// A path as Express routes it: trailing slash ignored unless strict routing, case ignored unless
// case-sensitive routing (both Express defaults).
function routingForm(req, p) {
  let out = p;
  if (!req.app?.get?.('strict routing')) out = out.replace(/\/+$/, '');
  if (!req.app?.get?.('case sensitive routing')) out = out.toLowerCase();
  return out || '/';
}

/**
 * What the request acts on: [METHOD, route, params]. With a route (the handler form, or the
 * middleware in front of a route's handler): its pattern as written, under the mount path, and the
 * parameters' exact values. Without one (app-wide middleware): the concrete path as Express routes it.
 */
export function resourceOf(req) {
  const params = {};
  for (const name of Object.keys(req.params ?? {}).sort()) params[name] = req.params[name];
  if (req.route) {
    const pattern = req.route.path;
    const base = req.baseUrl ? routingForm(req, req.baseUrl) : '';
    return [req.method, `${base === '/' ? '' : base}${typeof pattern === 'string' ? pattern : String(pattern)}`, params];
  }
  // Still percent-encoded, as Express matches it: /a%2Fb and /a/b are not one path.
  return [req.method, routingForm(req, (req.baseUrl ?? '') + (req.path ?? '/')), params];
}

export function defaultScope(service, principal, req) {
  const text = JSON.stringify([service, principal, ...resourceOf(req), canonicalQuery(req.originalUrl ?? req.url ?? '')]);
  const raw = Buffer.from(text, 'utf8');
  if (raw.length <= MAX_BYTES) return text;
  const head = raw.subarray(0, MAX_BYTES - 72).toString('utf8').replace(/\uFFFD+$/, '');
  return `${head}#sha256:${createHash('sha256').update(raw).digest('hex')}`;
}
