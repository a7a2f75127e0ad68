// Header parsing and options (no server needed).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { idempotency, parseKey, parsePreferWait, IdempotencyKeyError } from '../index.js';

test('sf-string and bare keys', () => {
  assert.equal(parseKey('"8e03978e-40d5-43e8-bc93-6894a57f9324"'), '8e03978e-40d5-43e8-bc93-6894a57f9324');
  assert.equal(parseKey('8e03978e-40d5-43e8-bc93-6894a57f9324'), '8e03978e-40d5-43e8-bc93-6894a57f9324');
  assert.equal(parseKey('"a \\"quoted\\" key"'), 'a "quoted" key');
  assert.equal(parseKey(['token']), 'token');
  assert.equal(parseKey(`"${'x'.repeat(255)}"`), 'x'.repeat(255));
});

test('absent and malformed keys', () => {
  for (const value of [undefined, []]) {
    assert.throws(() => parseKey(value), (e) => e instanceof IdempotencyKeyError && e.slug === 'key-required');
  }
  for (const value of ['', ' ', '"unterminated', '""', '"   "', 'a b', 'a,b', '"a", "b"', ['a', 'b'], `"${'x'.repeat(256)}"`, 'x'.repeat(256), '\u00e9']) {
    assert.throws(() => parseKey(value), (e) => e instanceof IdempotencyKeyError && e.slug === 'key-malformed', String(value));
  }
});

test('Prefer: wait', () => {
  assert.equal(parsePreferWait('wait=5'), 5);
  assert.equal(parsePreferWait('respond-async, wait=10'), 10);
  assert.equal(parsePreferWait('return=minimal'), null);
  assert.equal(parsePreferWait(undefined), null);
});

test('a never-replayed header in replayHeaders is refused at setup', () => {
  const pool = { connect() {} };
  for (const h of ['Set-Cookie', 'authorization', 'content-length', 'date']) {
    assert.throws(() => idempotency({ pool, replayHeaders: [h] }), /can never be replayed/);
  }
  assert.throws(() => idempotency({}), /pool/);
  assert.equal(typeof idempotency({ pool, replayHeaders: ['x-request-id'] }), 'function');
});
