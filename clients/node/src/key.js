// The Idempotency-Key header (contract v2, docs/http.md): an RFC 8941 sf-string or a bare
// visible-ASCII value; `"abc"` and `abc` are the same key.
import { parseItem } from 'structured-headers';

export class IdempotencyKeyError extends Error {
  /** @param {'key-required'|'key-malformed'} slug */
  constructor(slug, message) {
    super(message);
    this.slug = slug;
  }
}

const BARE = /^[\x21-\x7e]+$/;

/**
 * The key from the header's field lines (a string, an array of lines, or undefined when absent).
 * Throws IdempotencyKeyError: 'key-required' when absent, 'key-malformed' otherwise.
 */
export function parseKey(lines) {
  if (lines === undefined || lines === null) {
    throw new IdempotencyKeyError('key-required', 'the Idempotency-Key header is required');
  }
  if (Array.isArray(lines)) {
    if (lines.length === 0) throw new IdempotencyKeyError('key-required', 'the Idempotency-Key header is required');
    if (lines.length > 1) throw malformed('the Idempotency-Key header is given more than once');
    lines = lines[0];
  }
  const value = String(lines).replace(/^[ \t]+|[ \t]+$/g, '');
  if (value === '') throw malformed('the Idempotency-Key value is empty');
  let key;
  if (value.startsWith('"')) {
    let item;
    try {
      item = parseItem(value);
    } catch (err) {
      throw malformed(`the Idempotency-Key value is not a valid sf-string: ${err.message}`);
    }
    if (typeof item[0] !== 'string') throw malformed('the Idempotency-Key value is not a valid sf-string');
    key = item[0];
    if (key.trim() === '') throw malformed('the Idempotency-Key value is empty or only spaces');
  } else {
    if (value.includes(',')) throw malformed('the Idempotency-Key value is a list (it contains a comma)');
    if (!BARE.test(value)) {
      throw malformed('the Idempotency-Key value has a character outside visible ASCII (0x21-0x7E)');
    }
    key = value;
  }
  if (Buffer.byteLength(key) > 255) throw malformed('the Idempotency-Key value is longer than 255 bytes');
  return key;
}

function malformed(detail) {
  return new IdempotencyKeyError('key-malformed', detail);
}

/** The Idempotency-Key field lines of a Node request (undefined when there are none). */
export function keyLines(req) {
  const lines = [];
  const raw = req.rawHeaders ?? [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i].toLowerCase() === 'idempotency-key') lines.push(raw[i + 1]);
  }
  if (lines.length === 0 && req.headers?.['idempotency-key'] !== undefined) lines.push(req.headers['idempotency-key']);
  return lines.length ? lines : undefined;
}

/** Seconds from an RFC 7240 `Prefer: wait=N` header, or null. */
export function parsePreferWait(value) {
  const m = /(?:^|[,;\s])wait\s*=\s*"?(\d+(?:\.\d+)?)"?/i.exec(value ?? '');
  return m ? Number(m[1]) : null;
}
