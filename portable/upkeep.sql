-- Portable edition of the upkeep (src/entry/maintenance.rs, src/entry/metrics.rs, src/lib.rs). There is no
-- background worker and no shared memory: idem_schedule_upkeep() asks pg_cron to run the
-- reclaim and the purges, and idem_metrics() raises 55000, as the native edition does when its
-- library was not preloaded (docs/managed.md says why there are no table-backed counters).

-- A setting the native library defines (idempotency.reclaim_grace in ms,
-- idempotency.outbox_retention in s); here a plain placeholder: a number in `unit`, or an
-- interval ('10s'). Unset: `fallback`.
CREATE FUNCTION idempotency.portable_setting(name pg_catalog.text, fallback pg_catalog.interval, unit pg_catalog.interval)
RETURNS pg_catalog.interval
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    raw pg_catalog.text := pg_catalog.current_setting(name, true);
BEGIN
    IF raw IS NULL OR raw OPERATOR(pg_catalog.=) '' THEN
        RETURN fallback;
    END IF;
    IF raw OPERATOR(pg_catalog.~) '^[0-9]+$'::pg_catalog.text THEN
        RETURN unit OPERATOR(pg_catalog.*) raw::pg_catalog.float8;
    END IF;
    RETURN raw::pg_catalog.interval;
END
$fn$;

CREATE FUNCTION idempotency.portable_check_batch(batch pg_catalog.int4)
RETURNS pg_catalog.int4
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF batch IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'batch must not be null';
    END IF;
    IF batch OPERATOR(pg_catalog.<=) 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = pg_catalog.format('batch must be positive, not %s', batch);
    END IF;
    RETURN batch;
END
$fn$;

-- How a batch statement names the rows `pick` picks (its FROM ... FOR UPDATE SKIP LOCKED, the
-- table as q): the table, a WITH clause, and the match on r. A ctid names a row only within
-- one table: in the generations layout (sql/layout.sql) a picked row is its table and its
-- ctid, picked across the generations through the table in one order, with the table's
-- privileges. As src/entry/maintenance.rs's batch! pairs.
CREATE FUNCTION idempotency.portable_batch_parts(pick pg_catalog.text)
RETURNS pg_catalog.text[]
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF NOT pg_catalog.has_table_privilege('idempotency.requests'::pg_catalog.regclass,
                                          'SELECT, INSERT, UPDATE, DELETE'::pg_catalog.text) THEN
        PERFORM idempotency.portable_access('requests');
    END IF;
    IF pg_catalog.to_regclass('idempotency.layout'::pg_catalog.text) IS NULL THEN
        RETURN ARRAY['ONLY idempotency.requests'::pg_catalog.text, ''::pg_catalog.text,
            pg_catalog.format('r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT q.ctid FROM ONLY idempotency.requests AS q %s))', pick)];
    END IF;
    -- Not on generations that carry code or policies this layout does not take yet: decided
    -- under the table's lock, which a CREATE TRIGGER or CREATE POLICY still open elsewhere
    -- holds until it commits (a generation's are the owner's alone: sql/rotate.sql).
    LOCK TABLE ONLY idempotency.requests IN ROW EXCLUSIVE MODE;
    PERFORM idempotency.layout_refuse(idempotency.layout_refusal(true));
    RETURN ARRAY['idempotency.requests'::pg_catalog.text,
        pg_catalog.format('WITH picked AS MATERIALIZED (SELECT q.tableoid AS t, q.ctid AS c FROM idempotency.requests AS q %s)', pick),
        'r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT p.c FROM picked AS p)) AND EXISTS (SELECT FROM picked AS p '
        'WHERE p.t OPERATOR(pg_catalog.=) r.tableoid AND p.c OPERATOR(pg_catalog.=) r.ctid)'::pg_catalog.text];
END
$fn$;

-- The body of idem_reclaim (sql/maintenance.sql declares it).
BODY idem_reclaim_wrapper LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    done pg_catalog.int8;
    cutoff pg_catalog.timestamptz;
    parts pg_catalog.text[];
BEGIN
    PERFORM idempotency.portable_check_batch(batch);
    cutoff := pg_catalog.now() OPERATOR(pg_catalog.-)
        idempotency.portable_setting('idempotency.reclaim_grace', '0'::pg_catalog.interval, '1 millisecond');
    parts := idempotency.portable_batch_parts($q$
        WHERE q.status OPERATOR(pg_catalog.=) 'processing' AND q.locked_until OPERATOR(pg_catalog.<) $1
        ORDER BY q.locked_until LIMIT $2 FOR UPDATE SKIP LOCKED$q$);
    EXECUTE pg_catalog.format($q$%2$s
        UPDATE %1$s AS r
           SET status = 'failed_retryable', failure_code = 'lease_expired',
               failure_message = pg_catalog.format('the lease of attempt %%s%%s ended at %%s', r.attempt,
                   CASE WHEN r.claimed_by IS NULL THEN ''
                        ELSE pg_catalog.format(' (claimed by %%s)', r.claimed_by) END, r.locked_until),
               locked_until = NULL, updated_at = pg_catalog.now(),
               expires_at = GREATEST(r.expires_at, pg_catalog.now() OPERATOR(pg_catalog.+)
                   LEAST(r.retention, '100 years'::pg_catalog.interval))
         WHERE %3$s
           AND r.status OPERATOR(pg_catalog.=) 'processing'
           AND r.locked_until OPERATOR(pg_catalog.<) $1$q$, parts[1], parts[2], parts[3])
        USING cutoff, batch;
    GET DIAGNOSTICS done = ROW_COUNT;
    RETURN done;
END
$fn$;

-- The body of idem_purge (sql/maintenance.sql declares it).
BODY idem_purge_wrapper LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    done pg_catalog.int8;
    parts pg_catalog.text[];
BEGIN
    PERFORM idempotency.portable_check_batch(batch);
    parts := idempotency.portable_batch_parts($q$
        WHERE q.status OPERATOR(pg_catalog.<>) 'processing' AND q.expires_at OPERATOR(pg_catalog.<) pg_catalog.now()
        ORDER BY q.expires_at LIMIT $1 FOR UPDATE SKIP LOCKED$q$);
    EXECUTE pg_catalog.format($q$%2$s
        DELETE FROM %1$s AS r
         WHERE %3$s
           AND r.status OPERATOR(pg_catalog.<>) 'processing'
           AND r.expires_at OPERATOR(pg_catalog.<) pg_catalog.now()$q$, parts[1], parts[2], parts[3])
        USING batch;
    GET DIAGNOSTICS done = ROW_COUNT;
    RETURN done;
END
$fn$;

-- The body of idem_metrics (sql/metrics.sql declares it).
BODY idem_metrics_wrapper LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '55000',
        MESSAGE = 'idempotency metrics are not available in the portable edition',
        DETAIL = 'The counters live in shared memory, which only the native extension''s preloaded library can reserve.',
        HINT = 'Read idempotency.stats, or move up to the native extension (docs/managed.md).';
END
$fn$;
COMMENT ON FUNCTION @extschema@.idem_metrics() IS
    'Portable edition: always 55000 (no shared memory); see idempotency.stats';

-- The body of idem_version (sql/metrics.sql declares it).
BODY idem_version_wrapper LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $fn$
SELECT '@PORTABLE_VERSION@'::pg_catalog.text
$fn$;

-- Why the upkeep must not write `tab` (NULL: it may): an enabled trigger that could run code
-- the table's owner did not write, as src/entry/as_owner.rs decides for the native worker.
CREATE FUNCTION idempotency.portable_foreign_trigger(tab pg_catalog.regclass)
RETURNS pg_catalog.text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
SELECT pg_catalog.format('trigger "%s" %s', t.tgname, CASE
         WHEN p.proowner OPERATOR(pg_catalog.<>) c.relowner
           THEN pg_catalog.format('runs %s, which the table''s owner does not own', t.tgfoid::pg_catalog.regprocedure)
         WHEN p.pronamespace OPERATOR(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace OR d.objid IS NOT NULL
           THEN pg_catalog.format('runs %s, a built-in or extension function the owner did not write', t.tgfoid::pg_catalog.regprocedure)
         WHEN t.tgqual IS NOT NULL THEN 'has a WHEN condition, which can call any function'
         ELSE 'passes arguments to its function, which can steer it' END)
  FROM pg_catalog.pg_trigger AS t
  JOIN pg_catalog.pg_class AS c ON c.oid OPERATOR(pg_catalog.=) t.tgrelid
  JOIN pg_catalog.pg_proc AS p ON p.oid OPERATOR(pg_catalog.=) t.tgfoid
  LEFT JOIN pg_catalog.pg_depend AS d ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
        AND d.objid OPERATOR(pg_catalog.=) t.tgfoid AND d.deptype OPERATOR(pg_catalog.=) 'e'
 WHERE t.tgrelid OPERATOR(pg_catalog.=) tab AND NOT t.tgisinternal AND t.tgenabled OPERATOR(pg_catalog.<>) 'D'
   AND (p.proowner OPERATOR(pg_catalog.<>) c.relowner
        OR p.pronamespace OPERATOR(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace OR d.objid IS NOT NULL
        OR t.tgqual IS NOT NULL OR t.tgnargs OPERATOR(pg_catalog.>) 0)
 ORDER BY t.tgname LIMIT 1
$fn$;

-- The worker's round, from pg_cron: one batch of each (in the generations layout, one rotation
-- step instead of the purge), as the role that runs the job (schedule it as the tables' owner).
-- A table with a trigger the owner did not write is left alone with a WARNING, as the native
-- worker does (its column is NULL). Each table is locked before its triggers are read: a
-- CREATE TRIGGER still open elsewhere holds a lock this one waits for, so a trigger committed
-- while the upkeep waits is seen, never run. Returns what each did.
CREATE FUNCTION @extschema@.idem_upkeep(batch pg_catalog.int4 DEFAULT 10000)
RETURNS TABLE (reclaimed pg_catalog.int8, purged pg_catalog.int8, inbox_purged pg_catalog.int8, outbox_purged pg_catalog.int8)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    why pg_catalog.text;
BEGIN
    LOCK TABLE ONLY idempotency.requests IN ROW EXCLUSIVE MODE;
    why := idempotency.portable_foreign_trigger('idempotency.requests'::pg_catalog.regclass);
    IF why IS NULL THEN
        BEGIN
            reclaimed := @extschema@.idem_reclaim(batch);
            -- In the generations layout, one rotation step instead of a DELETE, as the native
            -- worker does (docs/retention.md): what it moved or emptied is not counted here.
            IF pg_catalog.to_regclass('idempotency.layout'::pg_catalog.text) IS NULL THEN
                purged := @extschema@.idem_purge(batch);
            ELSE
                PERFORM idempotency.layout_bounded('100 ms'::pg_catalog.interval, 'rotate'::pg_catalog.text,
                    'rotate'::pg_catalog.text, NULL::pg_catalog.text, false, batch);
                purged := 0;
            END IF;
        EXCEPTION WHEN feature_not_supported THEN
            -- What the generations layout refuses (0A000) stops this table's upkeep, not the
            -- inbox's and the outbox's, as a failed step of the native worker does.
            RAISE WARNING 'idempotency: the upkeep does not touch idempotency.requests: %', SQLERRM;
            reclaimed := NULL;
            purged := NULL;
        END;
    ELSE
        RAISE WARNING 'idempotency: the upkeep does not touch idempotency.requests: %', why;
    END IF;
    LOCK TABLE ONLY idempotency.inbox IN ROW EXCLUSIVE MODE;
    why := idempotency.portable_foreign_trigger('idempotency.inbox'::pg_catalog.regclass);
    IF why IS NULL THEN
        inbox_purged := @extschema@.idem_inbox_purge(batch);
    ELSE
        RAISE WARNING 'idempotency: the upkeep does not touch idempotency.inbox: %', why;
    END IF;
    LOCK TABLE ONLY idempotency.outbox IN ROW EXCLUSIVE MODE;
    why := idempotency.portable_foreign_trigger('idempotency.outbox'::pg_catalog.regclass);
    IF why IS NULL THEN
        outbox_purged := @extschema@.idem_outbox_purge(batch);
    ELSE
        RAISE WARNING 'idempotency: the upkeep does not touch idempotency.outbox: %', why;
    END IF;
    RETURN NEXT;
END
$fn$;
COMMENT ON FUNCTION @extschema@.idem_upkeep(pg_catalog.int4) IS
    'Portable edition: one upkeep round (reclaim, purge, inbox and outbox purges), for pg_cron';

-- Ask pg_cron to run idem_upkeep in this database every `schedule` (cron syntax or
-- '10 seconds' on pg_cron >= 1.5). Run it as the owner of the idempotency tables: pg_cron runs
-- a job as the role that scheduled it. Returns the job id; scheduling again replaces the job.
CREATE FUNCTION @extschema@.idem_schedule_upkeep(schedule pg_catalog.text DEFAULT '* * * * *')
RETURNS pg_catalog.int8
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    owner_ pg_catalog.name := (SELECT r.rolname FROM pg_catalog.pg_class AS c
                                 JOIN pg_catalog.pg_roles AS r ON r.oid OPERATOR(pg_catalog.=) c.relowner
                               WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency.requests'::pg_catalog.regclass);
    job pg_catalog.int8;
    cron_ pg_catalog.name;
    name_ constant pg_catalog.text := 'idempotency-upkeep-'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.current_database();
    command_ constant pg_catalog.text := 'SELECT * FROM '::pg_catalog.text
        OPERATOR(pg_catalog.||) pg_catalog.quote_ident('@extschema@'::pg_catalog.text) OPERATOR(pg_catalog.||) '.idem_upkeep()'::pg_catalog.text;
BEGIN
    -- pg_cron's own cron.schedule(text, text, text): the function its extension row owns (in
    -- whatever schema), never one found by name (a schema merely named cron may be anyone's).
    SELECT n.nspname INTO cron_ FROM pg_catalog.pg_extension AS e
      JOIN pg_catalog.pg_depend AS d ON d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
       AND d.refobjid OPERATOR(pg_catalog.=) e.oid AND d.deptype OPERATOR(pg_catalog.=) 'e'::pg_catalog."char"
       AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
      JOIN pg_catalog.pg_proc AS p ON p.oid OPERATOR(pg_catalog.=) d.objid
      JOIN pg_catalog.pg_namespace AS n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
     WHERE e.extname OPERATOR(pg_catalog.=) 'pg_cron'::pg_catalog.name
       AND p.proname OPERATOR(pg_catalog.=) 'schedule'::pg_catalog.name
       AND p.proargtypes OPERATOR(pg_catalog.=) '25 25 25'::pg_catalog.oidvector
     LIMIT 1;
    IF cron_ IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = 'idem_schedule_upkeep needs the pg_cron extension',
            HINT = 'CREATE EXTENSION pg_cron (in cron.database_name), or call idem_upkeep() from your own scheduler.';
    END IF;
    IF owner_ OPERATOR(pg_catalog.<>) CURRENT_USER THEN
        RAISE EXCEPTION USING ERRCODE = '42501',
            MESSAGE = pg_catalog.format('idem_schedule_upkeep must be run by %s, the owner of the idempotency tables', owner_),
            HINT = 'pg_cron runs a job as the role that scheduled it; upkeep runs as the tables'' owner.';
    END IF;
    -- pg_cron's extension is only in its own database (cron.database_name), so this is it: cron.schedule
    -- runs the job here, and pg_cron lets any role with USAGE on schema cron call it
    -- (cron.schedule_in_database it keeps to superusers).
    EXECUTE pg_catalog.format('SELECT %I.schedule($1::pg_catalog.text, $2::pg_catalog.text, $3::pg_catalog.text)', cron_)
       INTO job USING name_, schedule, command_;
    RETURN job;
END
$fn$;
COMMENT ON FUNCTION @extschema@.idem_schedule_upkeep(pg_catalog.text) IS
    'Portable edition: schedule idem_upkeep() with pg_cron in this database, as the tables'' owner; returns the job id';
