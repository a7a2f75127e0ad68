-- Portable edition: argument rules shared by every function (src/steps/input.rs), in PL/pgSQL.
-- Each helper raises the native edition's SQLSTATE, message and DETAIL; the hot functions test
-- the common case inline and call these only to raise.

-- A value as Rust's {:?} prints it in the native messages: "key", with \" \\ \t \n \r escaped
-- and other ASCII control characters as \u{..}.
CREATE FUNCTION idempotency.portable_quote(value pg_catalog.text)
RETURNS pg_catalog.text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    quoted pg_catalog.text := pg_catalog.replace(pg_catalog.replace(value, E'\\'::pg_catalog.text, E'\\\\'::pg_catalog.text),
                                                 '"'::pg_catalog.text, E'\\"'::pg_catalog.text);
    out_ pg_catalog.text := '';
    ch pg_catalog.text;
BEGIN
    quoted := pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(quoted,
        pg_catalog.chr(9), E'\\t'::pg_catalog.text), pg_catalog.chr(10), E'\\n'::pg_catalog.text),
        pg_catalog.chr(13), E'\\r'::pg_catalog.text);
    IF quoted OPERATOR(pg_catalog.~) E'[\\x01-\\x1f\\x7f]'::pg_catalog.text THEN
        FOREACH ch IN ARRAY pg_catalog.regexp_split_to_array(quoted, ''::pg_catalog.text) LOOP
            IF ch OPERATOR(pg_catalog.~) E'[\\x01-\\x1f\\x7f]'::pg_catalog.text THEN
                ch := pg_catalog.format(E'\\u{%s}', pg_catalog.to_hex(pg_catalog.ascii(ch)));
            END IF;
            out_ := out_ OPERATOR(pg_catalog.||) ch;
        END LOOP;
        quoted := out_;
    END IF;
    RETURN '"'::pg_catalog.text OPERATOR(pg_catalog.||) quoted OPERATOR(pg_catalog.||) '"'::pg_catalog.text;
END
$fn$;

-- A required identifier (scope, key, hash, consumer, ...): not NULL, at most 255 bytes, not
-- blank (only ASCII white space). Raises `code` or P4004; returns the value when it is fine.
CREATE FUNCTION idempotency.portable_name(what pg_catalog.text, code pg_catalog.text, value pg_catalog.text)
RETURNS pg_catalog.text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF value IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = code, MESSAGE = what OPERATOR(pg_catalog.||) ' must not be null';
    END IF;
    IF pg_catalog.octet_length(value) OPERATOR(pg_catalog.>) 255 THEN
        RAISE EXCEPTION USING ERRCODE = 'P4004', MESSAGE = what OPERATOR(pg_catalog.||) ' is too long',
            DETAIL = pg_catalog.format('%s is %s bytes; the limit is 255 bytes.', what, pg_catalog.octet_length(value));
    END IF;
    IF pg_catalog.btrim(value, E' \t\n\f\r'::pg_catalog.text) OPERATOR(pg_catalog.=) ''::pg_catalog.text THEN
        RAISE EXCEPTION USING ERRCODE = code, MESSAGE = what OPERATOR(pg_catalog.||) ' must not be blank';
    END IF;
    RETURN value;
END
$fn$;

-- Before a function names idempotency.<tbl>, which locks it even to plan: some privilege on
-- it, as the native edition checks (src/base/access.rs), so that a role without rights gets
-- 42501 at once rather than queueing behind another session's lock. The functions test
-- has_table_privilege inline (a call of this costs a replay a third more) and call this to
-- raise; calling it needs USAGE on schema idempotency, which is that check.
CREATE FUNCTION idempotency.portable_access(tbl pg_catalog.text)
RETURNS pg_catalog.void
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF NOT pg_catalog.has_table_privilege(('idempotency.'::pg_catalog.text OPERATOR(pg_catalog.||) tbl)::pg_catalog.regclass,
                                          'SELECT, INSERT, UPDATE, DELETE'::pg_catalog.text) THEN
        RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = 'permission denied for table ' OPERATOR(pg_catalog.||) tbl,
            HINT = pg_catalog.format('SELECT idem_grant(''<role>'', ''app'') gives the calling role what it needs on idempotency.%s.', tbl);
    END IF;
END
$fn$;

-- An optional text of at most `max_bytes`: P4004 past it.
CREATE FUNCTION idempotency.portable_optional(what pg_catalog.text, value pg_catalog.text, max_bytes pg_catalog.int4)
RETURNS pg_catalog.text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF pg_catalog.octet_length(value) OPERATOR(pg_catalog.>) max_bytes THEN
        RAISE EXCEPTION USING ERRCODE = 'P4004', MESSAGE = what OPERATOR(pg_catalog.||) ' is too long',
            DETAIL = pg_catalog.format('%s is %s bytes; the limit is %s bytes.', what, pg_catalog.octet_length(value), max_bytes);
    END IF;
    RETURN value;
END
$fn$;

-- An interval that must be present and positive and at most 100 years (lease, retention), or
-- not negative (delays).
CREATE FUNCTION idempotency.portable_interval(what pg_catalog.text, value pg_catalog.interval, zero_ok pg_catalog.bool)
RETURNS pg_catalog.interval
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF value IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = what OPERATOR(pg_catalog.||) ' must not be null';
    END IF;
    IF zero_ok AND value OPERATOR(pg_catalog.<) '0'::pg_catalog.interval THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = what OPERATOR(pg_catalog.||) ' must not be negative',
            DETAIL = pg_catalog.format('%s was %s.', what, idempotency.portable_interval_debug(value));
    END IF;
    IF NOT zero_ok AND value OPERATOR(pg_catalog.<=) '0'::pg_catalog.interval THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = what OPERATOR(pg_catalog.||) ' must be positive',
            DETAIL = pg_catalog.format('%s was %s.', what, idempotency.portable_interval_debug(value));
    END IF;
    -- At most 100 years, as the tables' CHECKs: now() + retention stays in the timestamp range.
    IF NOT zero_ok AND value OPERATOR(pg_catalog.>) '100 years'::pg_catalog.interval THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = what OPERATOR(pg_catalog.||) ' must be at most 100 years',
            DETAIL = pg_catalog.format('%s was %s.', what, idempotency.portable_interval_debug(value));
    END IF;
    RETURN value;
END
$fn$;

-- A batch size: present and at least 1 (src/steps/input.rs `batch`).
CREATE FUNCTION idempotency.portable_batch(value pg_catalog.int4)
RETURNS pg_catalog.int4
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF value IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'batch must not be null';
    END IF;
    IF value OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'batch must be at least 1',
            DETAIL = pg_catalog.format('batch was %s.', value);
    END IF;
    RETURN value;
END
$fn$;

-- An interval as the native edition's DETAIL prints it (Rust's {:?} of pgrx's Interval:
-- its three fields, microseconds, days and months).
CREATE FUNCTION idempotency.portable_interval_debug(value pg_catalog.interval)
RETURNS pg_catalog.text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
SELECT pg_catalog.format('Interval(Interval { time: %s, day: %s, month: %s })',
    -- Every product in parentheses: OPERATOR(...) has one precedence for all operators.
    ((pg_catalog.date_part('hour'::pg_catalog.text, value) OPERATOR(pg_catalog.*) 3600000000::pg_catalog.float8)
     OPERATOR(pg_catalog.+) (pg_catalog.date_part('minute'::pg_catalog.text, value) OPERATOR(pg_catalog.*) 60000000::pg_catalog.float8)
     OPERATOR(pg_catalog.+) pg_catalog.date_part('microseconds'::pg_catalog.text, value))::pg_catalog.int8,
    pg_catalog.date_part('day'::pg_catalog.text, value)::pg_catalog.int4,
    ((pg_catalog.date_part('year'::pg_catalog.text, value) OPERATOR(pg_catalog.*) 12::pg_catalog.float8)
     OPERATOR(pg_catalog.+) pg_catalog.date_part('month'::pg_catalog.text, value))::pg_catalog.int4)
$fn$;
