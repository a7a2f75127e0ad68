-- The generations layout of idempotency.requests (docs/retention.md), in both editions; its
-- rotation and the generations' grants are sql/rotate.sql.
--
-- 'flat' is the one table. 'generations' adds three child tables that inherit from it,
-- idempotency.requests_g1 .. _g3 (each with its primary key), and idempotency.layout, which
-- names the current one. The table's own rows ("generation 0") are those from before the
-- switch: the first rotation after a window empties it, and it stays empty (a lookup through
-- an empty parent costs nothing). Reads, updates and deletes go through the table; only a
-- claim inserts, into the current generation, under the key's lock after a look through every
-- generation, so a key has one record across them. idem_rotate() empties the oldest
-- generation whole (TRUNCATE: no WAL per record). Inheritance, not partitioning: the
-- extension's table stays what it is, so pg_dump, pg_upgrade and ALTER EXTENSION keep working,
-- and the generations (not members of the extension) are dumped with their rows.

-- The table of generation `gen`: for a read, a delete, a lock or a TRUNCATE (`only`), its rows
-- alone; for an insert, the table itself.
CREATE FUNCTION idempotency.layout_table(gen pg_catalog.int2, only_ pg_catalog.bool)
RETURNS pg_catalog.text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
SELECT CASE WHEN gen OPERATOR(pg_catalog.=) 0::pg_catalog.int2
            THEN CASE WHEN only_ THEN 'ONLY idempotency.requests' ELSE 'idempotency.requests' END
            ELSE 'idempotency.requests_g' OPERATOR(pg_catalog.||) gen::pg_catalog.text END
$fn$;

-- Was a table of the layout emptied (a rotation's TRUNCATE) after this transaction's snapshot?
-- Its pg_class row as the snapshot sees it names another file than pg_relation_filenode (the
-- catalog now). Such a snapshot misses the survivors moved before: a look may miss a record.
-- No lock, so nothing holds a rotation back with it.
CREATE FUNCTION idempotency.layout_truncated_since_snapshot()
RETURNS pg_catalog.bool
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
SELECT EXISTS (
    SELECT FROM pg_catalog.pg_class AS c
     WHERE (c.oid OPERATOR(pg_catalog.=) 'idempotency.requests'::pg_catalog.regclass
            OR c.oid OPERATOR(pg_catalog.=) ANY (SELECT i.inhrelid FROM pg_catalog.pg_inherits AS i
                 WHERE i.inhparent OPERATOR(pg_catalog.=) 'idempotency.requests'::pg_catalog.regclass))
       AND c.relfilenode OPERATOR(pg_catalog.<>) pg_catalog.pg_relation_filenode(c.oid::pg_catalog.regclass))
$fn$;

-- The columns a move carries: all of the table's, those an owner added too (a generated column
-- is computed again; identity columns are refused, layout_refusal).
CREATE FUNCTION idempotency.layout_columns()
RETURNS pg_catalog.text
LANGUAGE sql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.attname::pg_catalog.text), ', '::pg_catalog.text ORDER BY a.attnum)
  FROM pg_catalog.pg_attribute AS a
 WHERE a.attrelid OPERATOR(pg_catalog.=) 'idempotency.requests'::pg_catalog.regclass
   AND a.attnum OPERATOR(pg_catalog.>) 0::pg_catalog.int2 AND NOT a.attisdropped
   AND a.attgenerated OPERATOR(pg_catalog.=) ''::pg_catalog."char"
$fn$;

-- The generation a new record of a claim goes into, read under the key's lock after the look
-- (NULL: the flat layout). A switch of the current generation commits only once every claim
-- past its look has ended (it locks the oldest generation, which each look reads), so this is
-- where every rival of the key inserts.
CREATE FUNCTION idempotency.layout_claim_generation()
RETURNS pg_catalog.int2
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    gen pg_catalog.int2;
BEGIN
    -- From the catalog as it is now, not as this snapshot saw it.
    IF pg_catalog.to_regclass('idempotency.layout'::pg_catalog.text) IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT l.current_generation INTO gen FROM idempotency.layout AS l;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '40001',
            MESSAGE = 'the layout of idempotency.requests changed after this transaction''s snapshot',
            HINT = 'Retry the transaction.';
    END IF;
    -- A READ COMMITTED statement sees every rotation committed before it (Postgres runs READ
    -- UNCOMMITTED as READ COMMITTED); a transaction snapshot may not.
    IF pg_catalog.current_setting('transaction_isolation'::pg_catalog.text)
       OPERATOR(pg_catalog.<>) ALL ('{read committed,read uncommitted}'::pg_catalog.text[])
       AND idempotency.layout_truncated_since_snapshot() THEN
        RAISE EXCEPTION USING ERRCODE = '40001',
            MESSAGE = 'idempotency.requests was rotated after this transaction''s snapshot',
            HINT = 'Retry the transaction.';
    END IF;
    -- The insert into a generation by name checks the generation's grants, which follow the
    -- table's at the next rotation step: the table's own INSERT right counts at once.
    IF NOT pg_catalog.has_table_privilege('idempotency.requests'::pg_catalog.regclass::pg_catalog.oid,
                                          'INSERT'::pg_catalog.text) THEN
        RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = 'permission denied for table requests',
            HINT = 'GRANT SELECT, INSERT, UPDATE, DELETE ON idempotency.requests TO the calling role.';
    END IF;
    -- Policies or triggers added after the switch would not apply to an insert into a
    -- generation by name: refused rather than bypassed.
    PERFORM idempotency.layout_refuse(idempotency.layout_refusal(true));
    RETURN gen;
END
$fn$;

-- Only a rotation changes the current generation, under the oldest generation's lock: by hand
-- (an UPDATE of it, a DELETE or TRUNCATE of the row) it would break the one-record-per-key
-- rule, so it is refused (55000). The window and switched_at may be changed.
CREATE FUNCTION idempotency.layout_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF TG_OP OPERATOR(pg_catalog.=) 'UPDATE'::pg_catalog.text
       AND (NEW.current_generation OPERATOR(pg_catalog.=) OLD.current_generation
            OR pg_catalog.current_setting('idempotency_layout.rotating'::pg_catalog.text, true)
               OPERATOR(pg_catalog.=) 'on'::pg_catalog.text) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION USING ERRCODE = '55000',
        MESSAGE = 'only idem_rotate changes the current generation of idempotency.requests',
        HINT = 'Change generation_window, or go back to the flat layout: SELECT idem_set_layout(''flat'').';
END
$fn$;

-- The switch and the rotation are the table owner's (42501 for anyone else), checked before
-- any lock. Returns the lock_timeout that bounds their lock waits, and so how long claims
-- queue behind them (layout_bounded sets it for one step).
CREATE FUNCTION idempotency.layout_begin(what pg_catalog.text, lock_wait pg_catalog.interval)
RETURNS pg_catalog.text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF NOT pg_catalog.pg_has_role((SELECT c.relowner FROM pg_catalog.pg_class AS c
             WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency.requests'::pg_catalog.regclass), 'USAGE') THEN
        RAISE EXCEPTION USING ERRCODE = '42501',
            MESSAGE = pg_catalog.format('permission denied to %s idempotency.requests'::pg_catalog.text, what),
            HINT = 'Run it as the owner of idempotency.requests.';
    END IF;
    IF lock_wait IS NULL OR lock_wait OPERATOR(pg_catalog.<=) '0'::pg_catalog.interval
       OR lock_wait OPERATOR(pg_catalog.>) '1 hour'::pg_catalog.interval THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'lock_wait must be longer than zero and at most 1 hour';
    END IF;
    RETURN pg_catalog.format('%sms', pg_catalog.ceil(pg_catalog.date_part('epoch'::pg_catalog.text, lock_wait)
                                     OPERATOR(pg_catalog.*) 1000::pg_catalog.float8));
END
$fn$;

-- Is idempotency.requests or one of its children a Citus table (distributed, reference or
-- Citus-managed)? Citus keeps no inheritance with its tables. With Citus installed and the
-- table left local, the layout works as without it. Dynamic SQL: pg_dist_partition exists
-- only with Citus.
CREATE FUNCTION idempotency.layout_on_citus()
RETURNS pg_catalog.bool
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    found_ pg_catalog.bool;
BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition'::pg_catalog.text) IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition AS d '
            'WHERE d.logicalrelid::pg_catalog.oid OPERATOR(pg_catalog.=) '
            '''idempotency.requests''::pg_catalog.regclass::pg_catalog.oid '
            'OR d.logicalrelid::pg_catalog.oid OPERATOR(pg_catalog.=) ANY (SELECT i.inhrelid '
            'FROM pg_catalog.pg_inherits AS i WHERE i.inhparent OPERATOR(pg_catalog.=) '
            '''idempotency.requests''::pg_catalog.regclass::pg_catalog.oid))'
        INTO found_;
    RETURN found_;
END
$fn$;

-- What the generations layout does not carry yet: refused (0A000) rather than lost.
-- Row-level security and triggers: a claim inserts into a generation by name, where the
-- table's policies and triggers do not apply. An identity column: its values would repeat
-- across generations. A Citus table: Citus keeps no inheritance with its tables.
CREATE FUNCTION idempotency.layout_refusal(children_ok pg_catalog.bool)
RETURNS pg_catalog.text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
SELECT CASE
    WHEN c.relrowsecurity OR EXISTS (SELECT FROM pg_catalog.pg_policy AS p WHERE p.polrelid OPERATOR(pg_catalog.=) c.oid)
        THEN 'idempotency.requests has row-level security'
    WHEN EXISTS (SELECT FROM pg_catalog.pg_trigger AS t
                  WHERE t.tgrelid OPERATOR(pg_catalog.=) c.oid AND NOT t.tgisinternal)
        THEN 'idempotency.requests has triggers'
    WHEN EXISTS (SELECT FROM pg_catalog.pg_inherits AS i
                   JOIN pg_catalog.pg_class AS g ON g.oid OPERATOR(pg_catalog.=) i.inhrelid
                  WHERE i.inhparent OPERATOR(pg_catalog.=) c.oid
                    AND (g.relrowsecurity
                         OR EXISTS (SELECT FROM pg_catalog.pg_trigger AS t
                                     WHERE t.tgrelid OPERATOR(pg_catalog.=) g.oid AND NOT t.tgisinternal)
                         OR EXISTS (SELECT FROM pg_catalog.pg_constraint AS k
                                     WHERE k.confrelid OPERATOR(pg_catalog.=) g.oid)))
        THEN 'a generation of idempotency.requests has row-level security, triggers or a foreign key to it'
    -- LIKE does not copy a foreign key onto the generations; one that refers to the table
    -- sees only its own rows; and the rotation's TRUNCATE of those rows fails on either.
    WHEN EXISTS (SELECT FROM pg_catalog.pg_constraint AS k
                  WHERE k.contype OPERATOR(pg_catalog.=) 'f'::pg_catalog."char"
                    AND (k.conrelid OPERATOR(pg_catalog.=) c.oid OR k.confrelid OPERATOR(pg_catalog.=) c.oid))
        THEN 'idempotency.requests has a foreign key, or one refers to it'
    -- Each generation would draw from a sequence of its own (LIKE copies the identity).
    WHEN EXISTS (SELECT FROM pg_catalog.pg_attribute AS a
                  WHERE a.attrelid OPERATOR(pg_catalog.=) c.oid AND NOT a.attisdropped
                    AND a.attidentity OPERATOR(pg_catalog.<>) ''::pg_catalog."char")
        THEN 'idempotency.requests has an identity column'
    -- A claim inserts into a generation with a bare ON CONFLICT DO NOTHING, which would also
    -- swallow another unique index's or an exclusion constraint's violation.
    WHEN EXISTS (SELECT FROM pg_catalog.pg_index AS x
                  WHERE (x.indrelid OPERATOR(pg_catalog.=) c.oid
                         OR x.indrelid OPERATOR(pg_catalog.=) ANY (SELECT i.inhrelid FROM pg_catalog.pg_inherits AS i
                                WHERE i.inhparent OPERATOR(pg_catalog.=) c.oid))
                    AND (x.indisunique OR x.indisexclusion) AND NOT x.indisprimary)
        THEN 'idempotency.requests or a generation has a unique index or an exclusion constraint besides its primary key'
    WHEN idempotency.layout_on_citus()
        THEN 'idempotency.requests is a Citus table'
    WHEN NOT children_ok AND EXISTS (SELECT FROM pg_catalog.pg_inherits AS i
                                      WHERE i.inhparent OPERATOR(pg_catalog.=) c.oid)
        THEN 'idempotency.requests has child tables'
END
  FROM pg_catalog.pg_class AS c
 WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency.requests'::pg_catalog.regclass
$fn$;

-- Refused (0A000) in the generations layout, with `why`.
CREATE FUNCTION idempotency.layout_refuse(why pg_catalog.text)
RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF why IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '0A000',
            MESSAGE = pg_catalog.format('the generations layout does not support this yet: %s', why),
            HINT = 'Remove it, or go back to the flat layout: SELECT idem_set_layout(''flat'').';
    END IF;
END
$fn$;

-- The switch of idem_set_layout. To generations: nothing is copied or scanned; the table's ACCESS EXCLUSIVE lock (for at most
-- lock_wait) only waits out the transactions that read it before, so every later one sees the
-- children. Back to flat: the live records of the generations are moved into the table and the
-- expired ones go with the generations, under their locks (claims queue behind the move).
CREATE FUNCTION idempotency.layout_switch(kind pg_catalog.text)
RETURNS pg_catalog.text
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    cols pg_catalog.text;
    managed pg_catalog.text;
BEGIN
    IF kind IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'kind must not be null';
    END IF;
    IF kind OPERATOR(pg_catalog.<>) ALL ('{flat,generations}'::pg_catalog.text[]) THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = pg_catalog.format('unknown layout %s', pg_catalog.quote_literal(kind)),
            HINT = 'The layouts are flat and generations.';
    END IF;
    LOCK TABLE ONLY idempotency.requests IN ACCESS EXCLUSIVE MODE;
    IF (pg_catalog.to_regclass('idempotency.layout'::pg_catalog.text) IS NOT NULL)
       OPERATOR(pg_catalog.=) (kind OPERATOR(pg_catalog.=) 'generations'::pg_catalog.text) THEN
        RETURN kind;
    END IF;

    IF kind OPERATOR(pg_catalog.=) 'flat'::pg_catalog.text THEN
        LOCK TABLE idempotency.layout, idempotency.requests_g1, idempotency.requests_g2, idempotency.requests_g3
            IN ACCESS EXCLUSIVE MODE;
        -- Read under the locks, which an ALTER TABLE of the columns waits for.
        cols := idempotency.layout_columns();
        FOR gen IN 1..3 LOOP
            EXECUTE pg_catalog.format('INSERT INTO idempotency.requests (%1$s) SELECT %1$s FROM %2$s AS r '
                'WHERE r.status OPERATOR(pg_catalog.=) $1 OR r.expires_at OPERATOR(pg_catalog.>=) pg_catalog.now()',
                cols, idempotency.layout_table(gen::pg_catalog.int2, true))
                USING 'processing'::@extschema@.idem_status;
        END LOOP;
        DROP TABLE idempotency.requests_g1, idempotency.requests_g2, idempotency.requests_g3, idempotency.layout;
        RETURN kind;
    END IF;

    PERFORM idempotency.layout_refuse(idempotency.layout_refusal(false));
    -- With citus.use_citus_managed_tables on, Citus would take each new table into its
    -- metadata as it is created, then refuse the inheritance: not for these (nor the layout
    -- row's table).
    managed := pg_catalog.current_setting('citus.use_citus_managed_tables'::pg_catalog.text, true);
    IF managed IS NOT NULL THEN
        PERFORM pg_catalog.set_config('citus.use_citus_managed_tables'::pg_catalog.text, 'off'::pg_catalog.text, true);
    END IF;
    CREATE TABLE idempotency.requests_g1 (LIKE idempotency.requests INCLUDING ALL);
    ALTER TABLE idempotency.requests_g1 INHERIT idempotency.requests;
    CREATE TABLE idempotency.requests_g2 (LIKE idempotency.requests INCLUDING ALL);
    ALTER TABLE idempotency.requests_g2 INHERIT idempotency.requests;
    CREATE TABLE idempotency.requests_g3 (LIKE idempotency.requests INCLUDING ALL);
    ALTER TABLE idempotency.requests_g3 INHERIT idempotency.requests;
    COMMENT ON TABLE idempotency.requests_g1 IS 'Generation 1 of idempotency.requests (idem_set_layout)';
    COMMENT ON TABLE idempotency.requests_g2 IS 'Generation 2 of idempotency.requests (idem_set_layout)';
    COMMENT ON TABLE idempotency.requests_g3 IS 'Generation 3 of idempotency.requests (idem_set_layout)';
    CREATE TABLE idempotency.layout (
        one                pg_catalog.bool        PRIMARY KEY DEFAULT true CHECK (one),
        current_generation pg_catalog.int2        NOT NULL DEFAULT 1
            CHECK (current_generation OPERATOR(pg_catalog.>=) 1::pg_catalog.int2
                   AND current_generation OPERATOR(pg_catalog.<=) 3::pg_catalog.int2),
        switched_at        pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now(),
        generation_window  pg_catalog.interval    NOT NULL DEFAULT '1 day'::pg_catalog.interval
            CHECK (generation_window OPERATOR(pg_catalog.>) '0'::pg_catalog.interval)
    );
    INSERT INTO idempotency.layout (one) VALUES (true);
    CREATE TRIGGER layout_guard BEFORE UPDATE OR DELETE ON idempotency.layout
        FOR EACH ROW EXECUTE FUNCTION idempotency.layout_guard();
    CREATE TRIGGER layout_guard_truncate BEFORE TRUNCATE ON idempotency.layout
        FOR EACH STATEMENT EXECUTE FUNCTION idempotency.layout_guard();
    COMMENT ON TABLE idempotency.layout IS
        'The generations layout of idempotency.requests: the current generation (1 to 3), for claims and idem_rotate';
    -- Every claim of a new key reads it; it holds nothing secret.
    GRANT SELECT ON idempotency.layout TO PUBLIC;
    -- The table's owner owns them (the worker works as that role), whoever switched.
    EXECUTE pg_catalog.format('ALTER TABLE idempotency.requests_g1 OWNER TO %1$s; '
        'ALTER TABLE idempotency.requests_g2 OWNER TO %1$s; ALTER TABLE idempotency.requests_g3 OWNER TO %1$s; '
        'ALTER TABLE idempotency.layout OWNER TO %1$s',
        (SELECT c.relowner::pg_catalog.regrole FROM pg_catalog.pg_class AS c
          WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency.requests'::pg_catalog.regclass));
    IF managed IS NOT NULL THEN
        PERFORM pg_catalog.set_config('citus.use_citus_managed_tables'::pg_catalog.text, managed, true);
    END IF;
    PERFORM idempotency.layout_sync_grants();
    RETURN kind;
END
$fn$;

-- `step`, run with lock_wait as its lock_timeout; the caller's own comes back after it (after
-- an error, the transaction's end restores it). A function's SET clause would not do: it
-- restores only the settings it names, at the value it was created with.
CREATE FUNCTION idempotency.layout_bounded(lock_wait pg_catalog.interval, what pg_catalog.text,
    step pg_catalog.text, kind pg_catalog.text, force pg_catalog.bool, batch pg_catalog.int4)
RETURNS pg_catalog.text
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    prev constant pg_catalog.text := pg_catalog.current_setting('lock_timeout'::pg_catalog.text);
    done pg_catalog.text;
BEGIN
    IF step IS NULL OR step OPERATOR(pg_catalog.<>) ALL ('{switch,rotate}'::pg_catalog.text[]) THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'step must be switch or rotate';
    END IF;
    PERFORM pg_catalog.set_config('lock_timeout'::pg_catalog.text, idempotency.layout_begin(what, lock_wait), true);
    IF step OPERATOR(pg_catalog.=) 'switch'::pg_catalog.text THEN
        done := idempotency.layout_switch(kind);
    ELSE
        done := idempotency.layout_rotate(force, batch);
    END IF;
    PERFORM pg_catalog.set_config('lock_timeout'::pg_catalog.text, prev, true);
    RETURN done;
END
$fn$;

-- SELECT idem_set_layout('generations') or ('flat'); the layout it leaves (docs/retention.md).
CREATE FUNCTION @extschema@.idem_set_layout(kind pg_catalog.text, lock_wait pg_catalog.interval DEFAULT '5s')
RETURNS pg_catalog.text
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN idempotency.layout_bounded(lock_wait, 'change the layout of'::pg_catalog.text,
        'switch'::pg_catalog.text, kind, NULL::pg_catalog.bool, NULL::pg_catalog.int4);
END
$fn$;
COMMENT ON FUNCTION @extschema@.idem_set_layout(pg_catalog.text, pg_catalog.interval) IS
    'Switch idempotency.requests between the flat and the generations layout; returns the layout';

-- The steps are the table owner's, through idem_set_layout and idem_rotate (Postgres's own
-- privilege checks would refuse anyone else part way; these say no at the door).
REVOKE ALL ON FUNCTION idempotency.layout_switch(pg_catalog.text) FROM PUBLIC;
