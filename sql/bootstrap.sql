-- State of the `idempotency` extension: the enums go into the extension's schema (with the
-- functions), the tables into schema `idempotency`, which the extension owns.
-- Everything here is schema-qualified, operators and literals' types too: CREATE EXTENSION runs
-- with search_path set to the extension's schema, where whoever may create could have planted
-- an operator, and a constraint or an index binds its operators once, at creation
-- (tests/integration/security/install_path.rs).

CREATE SCHEMA idempotency;
COMMENT ON SCHEMA idempotency IS 'State of the idempotency extension: request records, inbox, outbox';

CREATE TYPE @extschema@.idem_status AS ENUM ('processing', 'succeeded', 'failed_retryable', 'failed_final');
COMMENT ON TYPE @extschema@.idem_status IS 'State of an idempotency record';

CREATE TYPE @extschema@.idem_outcome AS ENUM (
    'new_claim', 'replay_success', 'processing_active', 'processing_stale', 'retryable_failure', 'final_failure'
);
COMMENT ON TYPE @extschema@.idem_outcome IS 'What idem_claim found and did';

-- What idem_call returns (sql/call.sql).
CREATE TYPE @extschema@.idem_call_result AS (
    outcome         @extschema@.idem_outcome,
    response        pg_catalog.jsonb,
    failure_code    pg_catalog.text,
    failure_message pg_catalog.text,
    attempt         pg_catalog.int4
);
COMMENT ON TYPE @extschema@.idem_call_result IS 'What idem_call returns';

CREATE TABLE idempotency.requests (
    scope           pg_catalog.text        NOT NULL,
    key             pg_catalog.text        NOT NULL,
    request_hash    pg_catalog.text        NOT NULL,
    status          @extschema@.idem_status NOT NULL,
    attempt         pg_catalog.int4        NOT NULL,
    response        pg_catalog.jsonb,
    recovery_point  pg_catalog.text,
    failure_code    pg_catalog.text,
    failure_message pg_catalog.text,
    claimed_by      pg_catalog.text,
    claimed_at      pg_catalog.timestamptz NOT NULL,
    locked_until    pg_catalog.timestamptz,
    lease           pg_catalog.interval    NOT NULL,
    retention       pg_catalog.interval    NOT NULL,
    created_at      pg_catalog.timestamptz NOT NULL,
    updated_at      pg_catalog.timestamptz NOT NULL,
    expires_at      pg_catalog.timestamptz NOT NULL,
    CONSTRAINT requests_pkey PRIMARY KEY (scope, key),
    CONSTRAINT requests_scope_check CHECK (pg_catalog.octet_length(scope) OPERATOR(pg_catalog.>=) 1 AND pg_catalog.octet_length(scope) OPERATOR(pg_catalog.<=) 255),
    CONSTRAINT requests_key_check CHECK (pg_catalog.octet_length(key) OPERATOR(pg_catalog.>=) 1 AND pg_catalog.octet_length(key) OPERATOR(pg_catalog.<=) 255),
    CONSTRAINT requests_request_hash_check CHECK (pg_catalog.octet_length(request_hash) OPERATOR(pg_catalog.>=) 1
                                                  AND pg_catalog.octet_length(request_hash) OPERATOR(pg_catalog.<=) 255),
    CONSTRAINT requests_attempt_check CHECK (attempt OPERATOR(pg_catalog.>=) 1),
    -- a lease exactly while processing
    CONSTRAINT requests_lease_check CHECK ((status OPERATOR(pg_catalog.=) 'processing'::@extschema@.idem_status)
                                          OPERATOR(pg_catalog.=) (locked_until IS NOT NULL)),
    -- a stored response only on success
    CONSTRAINT requests_response_check CHECK (status OPERATOR(pg_catalog.=) 'succeeded'::@extschema@.idem_status OR response IS NULL),
    -- bounded, so that now() + retention (upkeep) can never leave the timestamp range
    CONSTRAINT requests_intervals_check CHECK (lease OPERATOR(pg_catalog.>) '0'::pg_catalog.interval
                                               AND lease OPERATOR(pg_catalog.<=) '100 years'::pg_catalog.interval
                                               AND retention OPERATOR(pg_catalog.>) '0'::pg_catalog.interval
                                               AND retention OPERATOR(pg_catalog.<=) '100 years'::pg_catalog.interval),
    CONSTRAINT requests_times_check CHECK (updated_at OPERATOR(pg_catalog.>=) created_at AND claimed_at OPERATOR(pg_catalog.>=) created_at)
);
COMMENT ON TABLE idempotency.requests IS 'One record per (scope, key): the claim protocol''s state';
COMMENT ON COLUMN idempotency.requests.lease IS 'Lease length of the current attempt; idem_checkpoint renews by it';
COMMENT ON COLUMN idempotency.requests.retention IS 'How long the outcome is kept after it is recorded';

-- For upkeep (idem_reclaim / idem_purge): only the rows each one looks at.
CREATE INDEX requests_lease_idx ON idempotency.requests (locked_until) WHERE status OPERATOR(pg_catalog.=) 'processing'::@extschema@.idem_status;
CREATE INDEX requests_expiry_idx ON idempotency.requests (expires_at) WHERE status OPERATOR(pg_catalog.<>) 'processing'::@extschema@.idem_status;

-- Records are application data: pg_dump keeps them.
SELECT pg_catalog.pg_extension_config_dump('idempotency.requests', '');

REVOKE ALL ON SCHEMA idempotency FROM PUBLIC;
REVOKE ALL ON idempotency.requests FROM PUBLIC;
