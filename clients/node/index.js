// idempotency-http: Idempotency-Key (contract v2, docs/http.md in the repository) for Express 4
// and 5 on the `idempotency` Postgres extension, with node-postgres. src/core.js is the
// framework-neutral part; src/express.js the Express adapter.
export { idempotency, idempotencyErrorHandler } from './src/express.js';
export {
  Attempt, claim, defaultStatusAction, normalizeOptions, problem, waiters, NEVER_REPLAYED, PROBLEM, PROBLEM_BASE,
} from './src/core.js';
export { BodyError, EMPTY_HASH, essenceOf, fingerprintBytes, fingerprintRequest, formFields } from './src/fingerprint.js';
export { IdempotencyKeyError, keyLines, parseKey, parsePreferWait } from './src/key.js';
