// Header parsing (no server needed).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseKey, parsePreferWait, IdempotencyKeyError } from '../index.js';

test('an sf-string key', () => {
  assert.equal(parseKey('"8e03978e-40d5-43e8-bc93-6894a57f9324"'), '8e03978e-40d5-43e8-bc93-6894a57f9324');
  assert.equal(parseKey('"a \\"quoted\\" key"'), 'a "quoted" key');
});

test('bad keys', () => {
  for (const value of [undefined, '', 'token', '"unterminated', '""', ':Ynl0ZXM=:', '1', `"${'x'.repeat(256)}"`]) {
    assert.throws(() => parseKey(value), IdempotencyKeyError, String(value));
  }
});

test('Prefer: wait', () => {
  assert.equal(parsePreferWait('wait=5'), 5);
  assert.equal(parsePreferWait('respond-async, wait=10'), 10);
  assert.equal(parsePreferWait('return=minimal'), null);
  assert.equal(parsePreferWait(undefined), null);
});
