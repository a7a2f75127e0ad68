-- idem_distribute: idempotency.requests as a Citus distributed table, and the hot functions
-- delegated to the worker that holds the key's shard (docs/scale-out.md). Without Citus it
-- raises P4060; the extension itself never depends on Citus (this body is only parsed, and
-- Citus's functions are looked up when it runs).
CREATE FUNCTION @extschema@.idem_distribute(
    distribution_column pg_catalog.text DEFAULT 'key',
    colocate_with pg_catalog.text DEFAULT NULL,
    shard_count pg_catalog.int4 DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    fn pg_catalog.regprocedure;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension
                   WHERE extname OPERATOR(pg_catalog.=) 'citus') THEN
        RAISE EXCEPTION 'idem_distribute needs the citus extension in this database'
            USING ERRCODE = 'P4060',
                  HINT = 'CREATE EXTENSION citus on the coordinator first (docs/scale-out.md).';
    END IF;
    IF distribution_column IS NULL
       OR (distribution_column OPERATOR(pg_catalog.<>) 'key' AND distribution_column OPERATOR(pg_catalog.<>) 'scope') THEN
        RAISE EXCEPTION 'idem_distribute: distribution_column must be ''key'' or ''scope'', not %',
            COALESCE(pg_catalog.quote_literal(distribution_column), 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF shard_count IS NOT NULL AND shard_count OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION 'idem_distribute: shard_count must be positive, not %', shard_count
            USING ERRCODE = '22023';
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_dist_local_group
               WHERE groupid OPERATOR(pg_catalog.<>) 0) THEN
        RAISE EXCEPTION 'idem_distribute runs on the Citus coordinator, not on a worker'
            USING ERRCODE = 'P4060';
    END IF;
    IF EXISTS (SELECT FROM pg_catalog.pg_dist_partition
               WHERE logicalrelid OPERATOR(pg_catalog.=) 'idempotency.requests'::pg_catalog.regclass) THEN
        RAISE EXCEPTION 'idempotency.requests is already distributed'
            USING ERRCODE = 'P4060',
                  HINT = 'SELECT pg_catalog.undistribute_table(''idempotency.requests'') first to change its shape.';
    END IF;
    -- Citus keeps no inheritance with its tables (docs/retention.md): a clear refusal rather
    -- than Citus's error part way.
    IF pg_catalog.to_regclass('idempotency.layout'::pg_catalog.text) IS NOT NULL THEN
        RAISE EXCEPTION 'idem_distribute: idempotency.requests is in the generations layout, which Citus cannot distribute'
            USING ERRCODE = '0A000',
                  HINT = 'SELECT idem_set_layout(''flat'') first (docs/retention.md).';
    END IF;
    IF shard_count IS NULL THEN
        PERFORM pg_catalog.create_distributed_table('idempotency.requests'::pg_catalog.regclass,
            distribution_column, colocate_with => COALESCE(colocate_with, 'default'));
    ELSE
        PERFORM pg_catalog.create_distributed_table('idempotency.requests'::pg_catalog.regclass,
            distribution_column, colocate_with => COALESCE(colocate_with, 'default'),
            shard_count => shard_count);
    END IF;
    -- A call through the coordinator outside a transaction block runs on the worker with the
    -- shard of its distribution argument, in one round trip.
    FOREACH fn IN ARRAY ARRAY[
        '@extschema@.idem_claim(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.interval, pg_catalog.interval, pg_catalog.text, pg_catalog.interval)',
        '@extschema@.idem_complete(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.int4)',
        '@extschema@.idem_fail(pg_catalog.text, pg_catalog.text, pg_catalog.bool, pg_catalog.text, pg_catalog.text, pg_catalog.int4)',
        '@extschema@.idem_checkpoint(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.int4, pg_catalog.interval)',
        '@extschema@.idem_forget(pg_catalog.text, pg_catalog.text)']::pg_catalog.regprocedure[]
    LOOP
        PERFORM pg_catalog.create_distributed_function(fn, distribution_column,
            colocate_with => 'idempotency.requests');
    END LOOP;
END
$fn$;
COMMENT ON FUNCTION @extschema@.idem_distribute(pg_catalog.text, pg_catalog.text, pg_catalog.int4) IS
    'Citus: distribute idempotency.requests by key or scope and delegate the hot functions to the shard''s worker';
REVOKE ALL ON FUNCTION @extschema@.idem_distribute(pg_catalog.text, pg_catalog.text, pg_catalog.int4) FROM PUBLIC;
