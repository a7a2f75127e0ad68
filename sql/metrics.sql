-- What the extension did since the server started (src/entry/metrics.rs), and which version
-- it is (src/lib.rs).

CREATE FUNCTION @extschema@.idem_metrics()
RETURNS TABLE (name pg_catalog.text, value pg_catalog.int8)
LANGUAGE c VOLATILE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'idem_metrics_wrapper';
COMMENT ON FUNCTION @extschema@.idem_metrics() IS
    'Counters since server start: claims by outcome, hash mismatches, completions, failures, reclaimed and purged rows, maintenance rounds, records written directly or through SQL';
REVOKE ALL ON FUNCTION @extschema@.idem_metrics() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.idem_metrics() TO pg_monitor;

CREATE FUNCTION @extschema@.idem_version()
RETURNS pg_catalog.text
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'idem_version_wrapper';
