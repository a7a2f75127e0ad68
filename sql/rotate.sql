-- The rotation of the generations layout (sql/layout.sql, docs/retention.md), in both editions,
-- and the generations' grants, which every step keeps in line.

-- A claim inserts a new record into a generation by name, with a bare ON CONFLICT DO NOTHING
-- (no arbiter, so that it reads no column there; layout_refusal refuses the other unique
-- indexes it would also cover): that takes INSERT, so each role with INSERT on the table
-- gets INSERT on the generations, without grant option, and nothing else. Reads, updates and
-- deletes go through the table, which checks its own grants: nobody but the owner reads a
-- generation by name, so a SELECT revoked on the table hides the records at once. A TRIGGER
-- or REFERENCES right there would let a role attach code or a foreign key to a generation.
-- Called by the switch, every rotation step that gets the layout row, idem_grant and
-- idem_revoke, one at a time (the layout row's lock); it writes the catalog only for a
-- generation whose grants differ. Column grants on the table are not carried.
CREATE FUNCTION idempotency.layout_sync_grants()
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    child pg_catalog.regclass;
    who pg_catalog.text;
    inserters pg_catalog.text[];
    holders pg_catalog.text[];
    want pg_catalog.text;
    have pg_catalog.text;
BEGIN
    IF pg_catalog.to_regclass('idempotency.layout'::pg_catalog.text) IS NULL THEN
        RETURN;
    END IF;
    -- Two syncs at once would both rewrite a generation's pg_class row ("tuple concurrently
    -- updated"): a rotation step holds this lock already.
    PERFORM FROM idempotency.layout AS l FOR NO KEY UPDATE;
    -- The roles but the owner with INSERT on the table, as GRANT names them; and what a
    -- generation that grants them that and nothing else reads as below.
    SELECT pg_catalog.array_agg(DISTINCT CASE WHEN x.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid
                                              THEN 'PUBLIC'::pg_catalog.text
                                              ELSE x.grantee::pg_catalog.regrole::pg_catalog.text END)
      INTO inserters
      FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS x
     WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency.requests'::pg_catalog.regclass
       AND x.grantee OPERATOR(pg_catalog.<>) c.relowner
       AND x.privilege_type OPERATOR(pg_catalog.=) 'INSERT'::pg_catalog.text;
    SELECT pg_catalog.string_agg(w.e, ',' ORDER BY w.e) INTO want FROM (
        SELECT pg_catalog.concat_ws('|'::pg_catalog.text, ''::pg_catalog.text, r, 'INSERT'::pg_catalog.text) AS e
          FROM pg_catalog.unnest(inserters) AS r) AS w;
    FOR child IN SELECT i.inhrelid::pg_catalog.regclass FROM pg_catalog.pg_inherits AS i
                  WHERE i.inhparent OPERATOR(pg_catalog.=) 'idempotency.requests'::pg_catalog.regclass LOOP
        -- Who the generation grants anything now (on it or a column), and what, in that form
        -- (a grant option, a column grant: a difference).
        SELECT pg_catalog.array_agg(DISTINCT h.who), pg_catalog.string_agg(DISTINCT h.e, ',' ORDER BY h.e)
          INTO holders, have FROM (
            SELECT g.who, pg_catalog.concat_ws('|'::pg_catalog.text, a.col, g.who, a.privilege_type,
                       CASE WHEN a.is_grantable THEN 'grantable'::pg_catalog.text END) AS e
              FROM (SELECT ''::pg_catalog.text AS col, x.grantee, x.privilege_type, x.is_grantable
                      FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS x
                     WHERE c.oid OPERATOR(pg_catalog.=) child AND x.grantee OPERATOR(pg_catalog.<>) c.relowner
                    UNION ALL
                    SELECT t.attname::pg_catalog.text, x.grantee, x.privilege_type, x.is_grantable
                      FROM pg_catalog.pg_class AS c, pg_catalog.pg_attribute AS t, pg_catalog.aclexplode(t.attacl) AS x
                     WHERE c.oid OPERATOR(pg_catalog.=) child AND t.attrelid OPERATOR(pg_catalog.=) child
                       AND t.attnum OPERATOR(pg_catalog.>) 0::pg_catalog.int2 AND NOT t.attisdropped
                       AND x.grantee OPERATOR(pg_catalog.<>) c.relowner) AS a,
                   LATERAL (SELECT CASE WHEN a.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid
                                        THEN 'PUBLIC'::pg_catalog.text
                                        ELSE a.grantee::pg_catalog.regrole::pg_catalog.text END AS who) AS g) AS h;
        IF have IS NOT DISTINCT FROM want THEN
            CONTINUE;
        END IF;
        -- CASCADE: only the owner grants here now, but a grant option given before may have
        -- been passed on.
        FOREACH who IN ARRAY COALESCE(holders, '{}'::pg_catalog.text[]) LOOP
            EXECUTE pg_catalog.format('REVOKE ALL ON %s FROM %s CASCADE', child, who);
        END LOOP;
        FOREACH who IN ARRAY COALESCE(inserters, '{}'::pg_catalog.text[]) LOOP
            EXECUTE pg_catalog.format('GRANT INSERT ON %s TO %s', child, who);
        END LOOP;
    END LOOP;
END
$fn$;


-- One step of the rotation; what it did:
--   moved N   N survivors (processing, or expiring later) of the oldest generation moved to the
--             current one, each under its row lock (one someone holds: next round)
--   busy      the oldest generation's lock was not had within lock_wait, or another rotation runs
--   switched  the oldest generation, holding no survivor, was emptied (TRUNCATE) and made current
--   emptied   the same for the table's own rows (from before the switch), which never become current
--   idle      the current generation is younger than its window (force => true rotates anyway)
-- The ACCESS EXCLUSIVE lock makes the switch safe: every claim past its look holds a lock on each
-- generation, so none that read the old current generation is still in flight when the switch
-- commits, and a claim whose look waited behind it reads the new one.
CREATE FUNCTION idempotency.layout_rotate(force pg_catalog.bool, batch pg_catalog.int4)
RETURNS pg_catalog.text
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    lay record;
    oldest pg_catalog.int2;
    survivor record;
    moved pg_catalog.int8 := 0;
    n pg_catalog.int8;
    left_ pg_catalog.bool;
    cols pg_catalog.text;
BEGIN
    IF force IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'force must not be null';
    END IF;
    IF batch IS NULL OR batch OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'batch must be at least 1';
    END IF;
    IF pg_catalog.to_regclass('idempotency.layout'::pg_catalog.text) IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = 'idempotency.requests is not in the generations layout',
            HINT = 'SELECT idem_set_layout(''generations'') first.';
    END IF;
    -- One rotation at a time.
    BEGIN
        SELECT * INTO lay FROM idempotency.layout AS l FOR NO KEY UPDATE NOWAIT;
        -- Decided under the tables' locks, which a CREATE TRIGGER or CREATE POLICY still open
        -- elsewhere holds until it commits: what it adds is refused, never run.
        LOCK TABLE ONLY idempotency.requests, idempotency.requests_g1, idempotency.requests_g2,
            idempotency.requests_g3 IN ROW EXCLUSIVE MODE;
    EXCEPTION WHEN lock_not_available THEN
        RETURN 'busy';
    END;
    PERFORM idempotency.layout_refuse(idempotency.layout_refusal(true));
    -- Every step, so that a grant changed on the table by hand reaches the generations
    -- within one round of the upkeep (sql/layout.sql).
    PERFORM idempotency.layout_sync_grants();
    IF NOT force AND pg_catalog.now() OPERATOR(pg_catalog.<) (lay.switched_at OPERATOR(pg_catalog.+) lay.generation_window) THEN
        RETURN 'idle';
    END IF;
    -- The table's own rows (from before the switch) go first, once; then the generations in turn.
    IF EXISTS (SELECT FROM ONLY idempotency.requests AS r) THEN
        oldest := 0;
    ELSE
        oldest := (lay.current_generation OPERATOR(pg_catalog.%) 3::pg_catalog.int2) OPERATOR(pg_catalog.+) 1::pg_catalog.int2;
    END IF;
    -- Survivors move under their row lock, taken without waiting (a record someone is changing
    -- waits for the next round). No claim inserts a key that has a record, and none inserts
    -- into this generation any more: the switch that made it old waited for every claim past
    -- its look.
    -- Each branch has a partial index (processing: the lease index; finished: the expiry one).
    FOR survivor IN EXECUTE pg_catalog.format(
        'SELECT r.scope, r.key FROM %1$s AS r WHERE r.status OPERATOR(pg_catalog.=) $1 '
        'UNION ALL SELECT r.scope, r.key FROM %1$s AS r WHERE r.status OPERATOR(pg_catalog.<>) $1 '
        'AND r.expires_at OPERATOR(pg_catalog.>=) pg_catalog.now() LIMIT $2', idempotency.layout_table(oldest, true))
        USING 'processing'::@extschema@.idem_status, batch LOOP
        -- Read once the survivor pass holds the oldest generation's lock, which an ALTER TABLE
        -- of the columns waits for.
        IF cols IS NULL THEN
            cols := idempotency.layout_columns();
        END IF;
        EXECUTE pg_catalog.format(
            'WITH gone AS (DELETE FROM %1$s AS r WHERE r.ctid OPERATOR(pg_catalog.=) (SELECT q.ctid FROM %1$s AS q '
            'WHERE q.scope OPERATOR(pg_catalog.=) $1 AND q.key OPERATOR(pg_catalog.=) $2 FOR UPDATE SKIP LOCKED) '
            'RETURNING %3$s) INSERT INTO %2$s (%3$s) SELECT %3$s FROM gone',
            idempotency.layout_table(oldest, true), idempotency.layout_table(lay.current_generation, false), cols)
            USING survivor.scope, survivor.key;
        GET DIAGNOSTICS n = ROW_COUNT;
        moved := moved OPERATOR(pg_catalog.+) n;
    END LOOP;
    IF moved OPERATOR(pg_catalog.>) 0 THEN
        RETURN pg_catalog.format('moved %s', moved);
    END IF;
    -- The check that counts is the one under the lock: nothing can revive a record after it.
    BEGIN
        EXECUTE pg_catalog.format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', idempotency.layout_table(oldest, true));
    EXCEPTION WHEN lock_not_available THEN
        RETURN 'busy';
    END;
    -- Under the lock every claim waits for: two index probes, no scan.
    EXECUTE pg_catalog.format('SELECT EXISTS (SELECT FROM %1$s AS r WHERE r.status OPERATOR(pg_catalog.=) $1) '
        'OR EXISTS (SELECT FROM %1$s AS r WHERE r.status OPERATOR(pg_catalog.<>) $1 '
        'AND r.expires_at OPERATOR(pg_catalog.>=) pg_catalog.now())', idempotency.layout_table(oldest, true))
        INTO left_ USING 'processing'::@extschema@.idem_status;
    IF left_ THEN
        RETURN 'moved 0';
    END IF;
    EXECUTE pg_catalog.format('TRUNCATE %s', idempotency.layout_table(oldest, true));
    IF oldest OPERATOR(pg_catalog.=) 0::pg_catalog.int2 THEN
        RETURN 'emptied';
    END IF;
    PERFORM pg_catalog.set_config('idempotency_layout.rotating'::pg_catalog.text, 'on'::pg_catalog.text, true);
    UPDATE idempotency.layout AS l SET current_generation = oldest, switched_at = pg_catalog.now();
    PERFORM pg_catalog.set_config('idempotency_layout.rotating'::pg_catalog.text, ''::pg_catalog.text, true);
    RETURN 'switched';
END
$fn$;

CREATE FUNCTION @extschema@.idem_rotate(force pg_catalog.bool DEFAULT false,
    lock_wait pg_catalog.interval DEFAULT '100ms', batch pg_catalog.int4 DEFAULT 1000)
RETURNS pg_catalog.text
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN idempotency.layout_bounded(lock_wait, 'rotate'::pg_catalog.text, 'rotate'::pg_catalog.text,
        NULL::pg_catalog.text, force, batch);
END
$fn$;
COMMENT ON FUNCTION @extschema@.idem_rotate(pg_catalog.bool, pg_catalog.interval, pg_catalog.int4) IS
    'One step of the generations layout''s rotation: moved N, busy, switched, emptied or idle';

-- A step of idem_rotate, the table owner's (layout_bounded checks it at the door).
REVOKE ALL ON FUNCTION idempotency.layout_rotate(pg_catalog.bool, pg_catalog.int4) FROM PUBLIC;
REVOKE ALL ON FUNCTION idempotency.layout_sync_grants() FROM PUBLIC;
