// Must NOT compile: a numeric scope and an unknown status action.
import pg from 'pg';
import { idempotency } from 'idempotency-http';

const pool = new pg.Pool();
idempotency({ pool, scope: 42 });
idempotency({ pool, statusAction: () => 'store' });
