// The request fingerprint (request_hash) by body, contract v2 (docs/http.md): empty, JSON (RFC 8785
// in SQL), form (canonicalized fields, in SQL), everything else (SHA-256 of essence, "\n", bytes).
import { createHash } from 'node:crypto';

export const EMPTY_HASH = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
/** Deeper JSON is refused (body-not-json): JSON.stringify and Postgres's jsonb recurse per level. */
export const MAX_JSON_DEPTH = 128; // idem_canonical::MAX_DEPTH: deeper JSON would be 54001 in idem_hash
export const FORM = 'application/x-www-form-urlencoded';

export class BodyError extends Error {
  /** @param {'body-not-json'|'body-too-large'} slug */
  constructor(slug, message) {
    super(message);
    this.slug = slug;
  }
}

/** The Content-Type's media type, lower case, without parameters ('' when absent). */
export function essenceOf(contentType) {
  return String(contentType ?? '').split(';')[0].trim().toLowerCase();
}

export function isJson(essence) {
  return essence === 'application/json' || (essence.startsWith('application/') && essence.endsWith('+json'));
}

/**
 * The fingerprint of exact body bytes: { kind, param, body }. `param` goes to the claim as text:
 * the hash itself ('empty', 'bytes'), the JSON text ('json') or the fields object ('form');
 * `body` is what the handler gets as req.body.
 */
export function fingerprintBytes(essence, bytes) {
  if (bytes.length === 0) return { kind: 'empty', param: EMPTY_HASH, body: isJson(essence) || essence === FORM ? {} : bytes };
  if (isJson(essence)) {
    const text = bytes.toString('utf8');
    let body;
    try {
      if (!Buffer.from(text, 'utf8').equals(bytes)) throw new Error('the body is not UTF-8');
      body = JSON.parse(text);
    } catch (err) {
      throw new BodyError('body-not-json', err.message);
    }
    return { kind: 'json', param: shallow(text), body };
  }
  if (essence === FORM) {
    const fields = formFields(bytes);
    return { kind: 'form', param: JSON.stringify(fields), body: formBody(fields) };
  }
  const hash = createHash('sha256').update(`${essence}\n`, 'utf8').update(bytes).digest('hex');
  return { kind: 'bytes', param: hash, body: bytes };
}

/** Form fields decoded (UTF-8, `+` = space): { name: [values in the order sent] }. */
export function formFields(bytes) {
  // The '&' keeps a leading '?' in the first name (URLSearchParams would strip it).
  const params = new URLSearchParams(`&${bytes.toString('utf8')}`);
  const entries = [];
  const index = new Map();
  for (const [name, value] of params) {
    if (!index.has(name)) {
      index.set(name, entries.length);
      entries.push([name, []]);
    }
    entries[index.get(name)][1].push(value);
  }
  return Object.fromEntries(entries);
}

/** As express.urlencoded({ extended: false }) gives it: one value as a string, repeats as an array. */
function formBody(fields) {
  return Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, v.length === 1 ? v[0] : v]));
}

/** The fields object from a body parsed by express.urlencoded (strings, arrays; qs nesting kept as is). */
export function fieldsFromParsed(body) {
  return Object.fromEntries(Object.entries(body).map(([k, v]) => [k, typeof v === 'string' ? [v] : v]));
}

/**
 * The fingerprint of a Node request: the bytes of the body when nothing has read the stream (it
 * reads them, up to maxBytes), or what a body parser left in req.body (express.json, .urlencoded,
 * .raw, .text). Throws BodyError.
 */
export async function fingerprintRequest(req, maxBytes) {
  const essence = essenceOf(req.headers['content-type']);
  const length = req.headers['content-length'];
  if (length !== undefined && Number(length) > maxBytes) {
    throw new BodyError('body-too-large', `the body is ${length} bytes; the limit is ${maxBytes}`);
  }
  // body-parser marks what it read with req._body; any other reader leaves the stream ended.
  const consumed = req._body === true || req.readableEnded;
  if (!consumed) return fingerprintBytes(essence, await readAll(req, maxBytes));
  const body = req.body;
  if (Buffer.isBuffer(body)) return sized(fingerprintBytes(essence, body), body.length, maxBytes);
  if (typeof body === 'string') {
    const bytes = Buffer.from(body, 'utf8');
    return sized(fingerprintBytes(essence, bytes), bytes.length, maxBytes);
  }
  if (length === '0') return fingerprintBytes(essence, Buffer.alloc(0));
  if (isJson(essence) && body !== undefined) {
    // RFC 8785 gives the same hash for the same JSON value, whoever parsed it.
    let text;
    try {
      text = JSON.stringify(body);
    } catch {
      throw new BodyError('body-not-json', `the body is nested deeper than ${MAX_JSON_DEPTH} levels`);
    }
    return sized({ kind: 'json', param: shallow(text), body }, Buffer.byteLength(text), maxBytes);
  }
  if (essence === FORM && body !== null && typeof body === 'object') {
    const param = JSON.stringify(fieldsFromParsed(body));
    return sized({ kind: 'form', param, body }, Buffer.byteLength(param), maxBytes);
  }
  throw new TypeError(
    `a body parser consumed a ${essence || 'typeless'} body that idempotency() cannot fingerprint: mount idempotency() before it`,
  );
}

// The JSON text itself, or BodyError when it nests arrays and objects deeper than MAX_JSON_DEPTH.
function shallow(text) {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92) i++; // backslash: skip the escaped character
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 91 || c === 123) {
      if (++depth > MAX_JSON_DEPTH) throw new BodyError('body-not-json', `the body is nested deeper than ${MAX_JSON_DEPTH} levels`);
    } else if (c === 93 || c === 125) depth--;
  }
  return text;
}

function sized(print, size, maxBytes) {
  if (size > maxBytes) throw new BodyError('body-too-large', `the body is ${size} bytes; the limit is ${maxBytes}`);
  return print;
}

async function readAll(req, maxBytes) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > maxBytes) throw new BodyError('body-too-large', `the body is over the limit of ${maxBytes} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}
