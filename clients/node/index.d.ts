// Types for idempotency-http. Framework types are structural (any Express 4 or 5 app, or plain
// node:http) so that no @types/express is needed; node-postgres is described the same way.
import type { IncomingMessage, ServerResponse } from 'node:http';

/** The part of a pg.PoolClient the adapter uses (a real pg.PoolClient fits). */
export interface PgClientLike {
  query(text: string, values?: unknown[]): Promise<{ rows: any[] }>;
  release(err?: Error | boolean): void;
}

/** The part of a pg.Pool the adapter uses (a real pg.Pool fits). */
export interface PgPoolLike {
  connect(): Promise<PgClientLike>;
}

export type StatusAction = 'complete' | 'fail' | 'retry';
export type Outcome = 'new_claim' | 'retryable_failure' | 'processing_stale';
export type FingerprintKind = 'empty' | 'json' | 'form' | 'bytes';

export interface IdempotencyOptions<Req = IncomingMessage> {
  /** The pg.Pool; the handler writes through req.idempotency.client, in the claim's transaction. */
  pool: PgPoolLike;
  /** The extension's schema (default "idempotency"); every call is qualified with it. */
  schema?: string;
  /** The methods that are claimed (default ["POST", "PATCH"]); others pass straight through. */
  methods?: string[];
  /**
   * The claim's scope, replacing the default whole. Default: a JSON array of the service, the
   * principal, the method, the route pattern with its parameters' values and the query string.
   */
  scope?: string | ((req: Req) => string | Promise<string>);
  /** Part of the default scope; default $IDEMPOTENCY_SERVICE, else the app's package name. */
  service?: string;
  /** Part of the default scope; default the authenticated req.user (its id, sub, username or email). */
  principal?: (req: Req) => string | null | undefined | Promise<string | null | undefined>;
  /** Lease and retention in seconds (default 300, 86400). */
  lease?: number;
  retention?: number;
  /** Seconds a duplicate waits without a `Prefer: wait` header (default 0). */
  wait?: number;
  /** The most a client may ask for with `Prefer: wait=N`, in seconds (default 10). */
  maxWait?: number;
  /** Waiting requests per pool in this process (default 64); past it: 409 too-many-waiters. */
  maxWaiters?: number;
  /** The Retry-After of the 409s, in seconds (default 1). */
  retryAfter?: number;
  /** Request body limit (default 1 MiB); past it: 413 and nothing is claimed. */
  maxBodyBytes?: number;
  /** Stored document limit for 2xx/3xx (default 1 MiB); past it the body is not stored. */
  maxStoredBytes?: number;
  /** Stored document limit for final 4xx failures (default and maximum 8000). */
  maxStoredErrorBytes?: number;
  /** Prefix of the problem documents' `type` (default: the draft's URL with a `#`). */
  problemBase?: string;
  /** Extra response headers to replay (besides idem_http_headers()); never-replayed names throw. */
  replayHeaders?: string[];
  /** Which statuses are stored as success, final failure or retryable failure. */
  statusAction?: (status: number) => StatusAction;
  /** Where errors are logged (default console.error). */
  log?: (message: string, err?: unknown) => void;
}

/** What the adapter puts on req.idempotency for the handler. */
export interface IdempotencyContext {
  client: PgClientLike;
  scope: string;
  key: string;
  /** The request body as read (parsed JSON or form fields, or a Buffer). */
  body: unknown;
  kind: FingerprintKind;
  outcome: Outcome;
  attempt: number;
  recoveryPoint: string | null;
}

export type IdempotentRequest<Req = IncomingMessage> = Req & { idempotency: IdempotencyContext };
export type Next = (err?: unknown) => void;
export type Middleware<Req, Res> = (req: Req, res: Res, next: Next) => void;

/** Middleware form: the route's handler follows it and reads req.idempotency. */
export function idempotency<Req extends IncomingMessage = IncomingMessage, Res extends ServerResponse = ServerResponse>(
  options: IdempotencyOptions<Req>,
): Middleware<Req, Res>;
/** Wrapper form: runs `handler` and turns its thrown or rejected errors into a 500 problem (Express 4 and 5). */
export function idempotency<Req extends IncomingMessage = IncomingMessage, Res extends ServerResponse = ServerResponse>(
  options: IdempotencyOptions<Req>,
  handler: (req: IdempotentRequest<Req>, res: Res, next: Next) => unknown,
): Middleware<Req, Res>;

/** An Express error handler that answers RFC 9457 problem documents without the error's text. */
export function idempotencyErrorHandler(
  options?: Pick<IdempotencyOptions, 'problemBase' | 'log'>,
): (err: unknown, req: IncomingMessage, res: ServerResponse, next: Next) => void;

export class IdempotencyKeyError extends Error {
  slug: 'key-required' | 'key-malformed';
}
export class BodyError extends Error {
  slug: 'body-not-json' | 'body-too-large';
}

/** The key from the header's field line(s); throws IdempotencyKeyError. */
export function parseKey(lines: string | string[] | undefined): string;
/** Seconds of `Prefer: wait=N`, or null. */
export function parsePreferWait(value: string | undefined): number | null;
export function defaultStatusAction(status: number): StatusAction;
/** How many requests of this process are waiting (Prefer: wait) for their key on this pool now. */
export function waiters(pool: PgPoolLike): number;
export function essenceOf(contentType: string | undefined): string;

export const PROBLEM: 'application/problem+json';
export const PROBLEM_BASE: string;
export const EMPTY_HASH: string;
export const NEVER_REPLAYED: ReadonlySet<string>;

// The framework-neutral core (src/core.js), for other frameworks.
export interface CoreResponse { status: number; headers: Record<string, string>; body: Buffer }
export interface Fingerprint { kind: FingerprintKind; param: string; body: unknown }
export type ProblemSlug = 'key-required' | 'key-malformed' | 'body-not-json' | 'body-too-large' | 'in-flight'
  | 'payload-mismatch' | 'too-many-waiters' | 'internal-error';
export interface NormalizedOptions { readonly pool: PgPoolLike; readonly methods: ReadonlySet<string>; readonly maxBodyBytes: number }
export function normalizeOptions(options: IdempotencyOptions<any>): NormalizedOptions;
export function problem(opts: NormalizedOptions, slug: ProblemSlug, detail?: string, headers?: Record<string, string>): CoreResponse;
export function claim(opts: NormalizedOptions, scope: string, key: string, print: Fingerprint, waitSeconds: number):
  Promise<{ response: CoreResponse; attempt?: undefined } | { attempt: Attempt; response?: undefined }>;
export class Attempt {
  readonly client: PgClientLike;
  readonly scope: string;
  readonly key: string;
  readonly outcome: Outcome;
  readonly attempt: number;
  readonly recoveryPoint: string | null;
  /** Records the handler's response and commits; returns what to send. */
  finish(response: CoreResponse): Promise<CoreResponse>;
  /** The handler raised: records a retryable failure; returns the 500 problem to send. */
  error(err: unknown): Promise<CoreResponse>;
}
export function fingerprintBytes(essence: string, bytes: Buffer): Fingerprint;
export function fingerprintRequest(req: IncomingMessage, maxBytes: number): Promise<Fingerprint>;
export function formFields(bytes: Buffer): Record<string, string[]>;
export function keyLines(req: IncomingMessage): string[] | undefined;
