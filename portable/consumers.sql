-- Portable edition of the consumers (src/entry/inbox.rs, src/entry/versions.rs, src/entry/outbox.rs, src/entry/call.rs):
-- the same SQL statements as the C functions run, with their argument rules and messages.

-- The body of idem_inbox_accept (sql/inbox.sql declares it).
BODY idem_inbox_accept LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
#variable_conflict use_column
DECLARE
    c constant pg_catalog.text := idempotency.portable_name('consumer', 'P4000', idem_inbox_accept.consumer);
    m constant pg_catalog.text := idempotency.portable_name('message_id', 'P4001', idem_inbox_accept.message_id);
    h constant pg_catalog.text := idempotency.portable_name('message_hash', 'P4003', idem_inbox_accept.message_hash);
    keep constant pg_catalog.interval := idempotency.portable_interval('retention', idem_inbox_accept.retention, false);
    stored pg_catalog.text;
    expired pg_catalog.bool;
BEGIN
    IF NOT pg_catalog.has_table_privilege('idempotency.inbox'::pg_catalog.regclass,
                                          'SELECT, INSERT, UPDATE, DELETE'::pg_catalog.text) THEN
        PERFORM idempotency.portable_access('inbox');
    END IF;
    -- Each pass either answers or saw the row vanish (purged) under it; three are plenty.
    FOR pass IN 1..3 LOOP
        INSERT INTO idempotency.inbox AS i (consumer, message_id, message_hash, processed_at, expires_at)
        VALUES (c, m, h, pg_catalog.now(), pg_catalog.now() OPERATOR(pg_catalog.+) keep)
        ON CONFLICT (consumer, message_id) DO NOTHING;
        IF FOUND THEN
            RETURN true;
        END IF;
        SELECT i.message_hash, i.expires_at OPERATOR(pg_catalog.<) pg_catalog.now() INTO stored, expired
          FROM idempotency.inbox AS i
         WHERE i.consumer OPERATOR(pg_catalog.=) c AND i.message_id OPERATOR(pg_catalog.=) m;
        CONTINUE WHEN NOT FOUND;
        IF expired THEN
            UPDATE idempotency.inbox AS i
               SET message_hash = h, processed_at = pg_catalog.now(),
                   expires_at = pg_catalog.now() OPERATOR(pg_catalog.+) keep
             WHERE i.consumer OPERATOR(pg_catalog.=) c AND i.message_id OPERATOR(pg_catalog.=) m
               AND i.expires_at OPERATOR(pg_catalog.<) pg_catalog.now();
            IF FOUND THEN
                RETURN true;
            END IF;
            CONTINUE;
        END IF;
        IF stored OPERATOR(pg_catalog.=) h THEN
            RETURN false;
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'P4050',
            MESSAGE = pg_catalog.format('message %s of consumer %s was delivered before with different content',
                idempotency.portable_quote(m), idempotency.portable_quote(c)),
            DETAIL = pg_catalog.format('Stored message hash: %s. This delivery''s hash: %s.', stored, h),
            HINT = 'A message id must name one message: give changed content a new message id.';
    END LOOP;
    RAISE EXCEPTION USING ERRCODE = 'XX000', MESSAGE = 'the inbox row kept changing under idem_inbox_accept';
END
$fn$;

-- The body of idem_inbox_purge (sql/inbox.sql declares it).
BODY idem_inbox_purge LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    n pg_catalog.int8;
BEGIN
    PERFORM idempotency.portable_batch(batch);
    IF NOT pg_catalog.has_table_privilege('idempotency.inbox'::pg_catalog.regclass,
                                          'SELECT, INSERT, UPDATE, DELETE'::pg_catalog.text) THEN
        PERFORM idempotency.portable_access('inbox');
    END IF;
    WITH doomed AS (SELECT consumer, message_id FROM idempotency.inbox
                     WHERE expires_at OPERATOR(pg_catalog.<) pg_catalog.now()
                     ORDER BY expires_at LIMIT batch FOR UPDATE SKIP LOCKED)
    DELETE FROM idempotency.inbox AS i USING doomed
     WHERE i.consumer OPERATOR(pg_catalog.=) doomed.consumer
       AND i.message_id OPERATOR(pg_catalog.=) doomed.message_id;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$fn$;

-- The body of idem_advance (sql/inbox.sql declares it).
BODY idem_advance LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
#variable_conflict use_column
BEGIN
    PERFORM idempotency.portable_name('stream', 'P4000', idem_advance.stream);
    PERFORM idempotency.portable_name('entity', 'P4001', idem_advance.entity);
    IF idem_advance.version IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'version must not be null';
    END IF;
    IF NOT pg_catalog.has_table_privilege('idempotency.versions'::pg_catalog.regclass,
                                          'SELECT, INSERT, UPDATE, DELETE'::pg_catalog.text) THEN
        PERFORM idempotency.portable_access('versions');
    END IF;
    INSERT INTO idempotency.versions AS v (stream, entity, version, updated_at)
    VALUES (idem_advance.stream, idem_advance.entity, idem_advance.version, pg_catalog.now())
    ON CONFLICT (stream, entity) DO UPDATE
       SET version = excluded.version, updated_at = excluded.updated_at
     WHERE v.version OPERATOR(pg_catalog.<) excluded.version;
    RETURN FOUND;
END
$fn$;

-- 54000 when payload and headers as JSON text are longer than idempotency.outbox_max_bytes (a
-- placeholder setting here: bytes, or a number with B, kB, MB or GB; default 1000000).
CREATE FUNCTION idempotency.portable_outbox_size(payload pg_catalog.jsonb, headers pg_catalog.jsonb)
RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    raw pg_catalog.text := pg_catalog.btrim(pg_catalog.current_setting('idempotency.outbox_max_bytes'::pg_catalog.text, true));
    parts pg_catalog.text[];
    limit_ pg_catalog.int8 := 1000000;
    total pg_catalog.int8;
BEGIN
    IF raw IS NOT NULL AND raw OPERATOR(pg_catalog.<>) ''::pg_catalog.text THEN
        parts := pg_catalog.regexp_match(raw, E'^([0-9]{1,10})\\s*(B|kB|MB|GB)?$'::pg_catalog.text);
        IF parts IS NOT NULL THEN
            -- numeric, so that no size overflows before the range check below.
            limit_ := LEAST(parts[1]::pg_catalog.numeric OPERATOR(pg_catalog.*) CASE
                WHEN parts[2] OPERATOR(pg_catalog.=) 'kB'::pg_catalog.text THEN 1024::pg_catalog.numeric
                WHEN parts[2] OPERATOR(pg_catalog.=) 'MB'::pg_catalog.text THEN 1048576::pg_catalog.numeric
                WHEN parts[2] OPERATOR(pg_catalog.=) 'GB'::pg_catalog.text THEN 1073741824::pg_catalog.numeric
                ELSE 1::pg_catalog.numeric END,
                1073741824::pg_catalog.numeric)::pg_catalog.int8;
        END IF;
        IF parts IS NULL OR limit_ OPERATOR(pg_catalog.<) 1 OR limit_ OPERATOR(pg_catalog.>) 1073741823 THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = pg_catalog.format('invalid value for parameter "idempotency.outbox_max_bytes": "%s"', raw),
                HINT = 'Bytes from 1 to 1073741823, or with a unit: B, kB, MB, GB.';
        END IF;
    END IF;
    total := pg_catalog.octet_length(payload::pg_catalog.text) OPERATOR(pg_catalog.+)
             COALESCE(pg_catalog.octet_length(headers::pg_catalog.text), 0);
    IF total OPERATOR(pg_catalog.>) limit_ THEN
        RAISE EXCEPTION USING ERRCODE = '54000',
            MESSAGE = pg_catalog.format('the outbox message is %s bytes of JSON (payload and headers), more than idempotency.outbox_max_bytes (%s)', total, limit_),
            HINT = 'A CDC pipeline refuses messages past its limits: put a reference to the data in the message, or raise idempotency.outbox_max_bytes together with the pipeline''s limits.';
    END IF;
END
$fn$;

-- The body of idem_outbox_put (sql/outbox.sql declares it).
BODY idem_outbox_put LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
#variable_conflict use_column
DECLARE
    new_id pg_catalog.int8;
    -- A placeholder setting here (no library defines it): checked at put, not at SET.
    delivery pg_catalog.text := pg_catalog.current_setting('idempotency.outbox_delivery'::pg_catalog.text, true);
BEGIN
    -- Its arguments' checks, shared with cdc_message (portable/cdc.sql).
    PERFORM idempotency.outbox_put_check(idem_outbox_put.topic, idem_outbox_put.payload,
                                         idem_outbox_put.dedupe_key, idem_outbox_put.headers);
    -- The CDC deliveries (docs/cdc.md), as src/entry/outbox_cdc.rs. Unset (NULL) or reset (''): poll.
    delivery := pg_catalog.lower(pg_catalog.btrim(delivery));
    IF delivery IS NULL OR delivery OPERATOR(pg_catalog.=) ''::pg_catalog.text THEN
        delivery := 'poll'::pg_catalog.text;
    END IF;
    IF delivery OPERATOR(pg_catalog.<>) 'poll'::pg_catalog.text THEN
        IF NOT delivery OPERATOR(pg_catalog.=) ANY (ARRAY['cdc_table', 'cdc_message']::pg_catalog.text[]) THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = pg_catalog.format('invalid value for parameter "idempotency.outbox_delivery": "%s"', delivery),
                HINT = 'Available values: poll, cdc_table, cdc_message.';
        END IF;
        -- INSERT on the outbox, as a polled put needs (the cast checks USAGE on the schema).
        IF NOT pg_catalog.has_table_privilege('idempotency.outbox'::pg_catalog.regclass,
                                              'INSERT'::pg_catalog.text) THEN
            RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = 'permission denied for table outbox',
                HINT = 'SELECT idem_grant(''<role>'', ''app'') gives the calling role what it needs on idempotency.outbox.';
        END IF;
        IF pg_catalog.current_setting('wal_level'::pg_catalog.text) OPERATOR(pg_catalog.<>) 'logical'::pg_catalog.text THEN
            RAISE EXCEPTION USING ERRCODE = '55000',
                MESSAGE = 'idempotency.outbox_delivery streams through logical decoding, but wal_level is not logical',
                HINT = 'Set wal_level = logical and restart, or set idempotency.outbox_delivery = poll.';
        END IF;
        IF idem_outbox_put.available_at OPERATOR(pg_catalog.>) pg_catalog.now() THEN
            RAISE EXCEPTION USING ERRCODE = '0A000',
                MESSAGE = 'a message for later (available_at after now()) cannot be streamed',
                HINT = 'Put it with idempotency.outbox_delivery = poll, or send it when it is due.';
        END IF;
        IF delivery OPERATOR(pg_catalog.=) 'cdc_message'::pg_catalog.text THEN
            -- No row for the outbox's row-level security policies to check.
            IF pg_catalog.row_security_active('idempotency.outbox'::pg_catalog.regclass) THEN
                RAISE EXCEPTION USING ERRCODE = '0A000',
                    MESSAGE = 'idempotency.outbox_delivery = cdc_message cannot apply idempotency.outbox''s row-level security policies',
                    HINT = 'Use idempotency.outbox_delivery = cdc_table: its rows are checked by the policies.';
            END IF;
            -- The signed content, its id keyed by the owner's secret (sql/cdc.sql).
            RETURN pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_logical_emit_message(true,
                'idempotency.outbox'::pg_catalog.text, idempotency.cdc_message(idem_outbox_put.topic,
                  idem_outbox_put.dedupe_key, idem_outbox_put.payload, idem_outbox_put.headers)),
                '0/0'::pg_catalog.pg_lsn)::pg_catalog.int8;
        END IF;
    END IF;
    IF NOT pg_catalog.has_table_privilege('idempotency.outbox'::pg_catalog.regclass,
                                          'SELECT, INSERT, UPDATE, DELETE'::pg_catalog.text) THEN
        PERFORM idempotency.portable_access('outbox');
    END IF;
    -- Each pass inserts, or finds the row its dedupe key names, or saw that row purged.
    FOR pass IN 1..3 LOOP
        -- cdc_table: the row is written already published, for a CDC connector.
        INSERT INTO idempotency.outbox AS o (topic, dedupe_key, payload, headers, available_at, created_at,
                                             status, published_at)
        VALUES (idem_outbox_put.topic, idem_outbox_put.dedupe_key, idem_outbox_put.payload,
                idem_outbox_put.headers, COALESCE(idem_outbox_put.available_at, pg_catalog.now()), pg_catalog.now(),
                CASE WHEN delivery OPERATOR(pg_catalog.=) 'cdc_table'::pg_catalog.text
                     THEN 'published'::pg_catalog.text ELSE 'pending'::pg_catalog.text END,
                CASE WHEN delivery OPERATOR(pg_catalog.=) 'cdc_table'::pg_catalog.text
                     THEN pg_catalog.now() END)
        ON CONFLICT (topic, dedupe_key) DO NOTHING
        RETURNING o.id INTO new_id;
        IF FOUND THEN
            RETURN new_id;
        END IF;
        EXIT WHEN idem_outbox_put.dedupe_key IS NULL;
        SELECT o.id INTO new_id FROM idempotency.outbox AS o
         WHERE o.topic OPERATOR(pg_catalog.=) idem_outbox_put.topic
           AND o.dedupe_key OPERATOR(pg_catalog.=) idem_outbox_put.dedupe_key;
        IF FOUND THEN
            RETURN new_id;
        END IF;
    END LOOP;
    RAISE EXCEPTION USING ERRCODE = 'XX000', MESSAGE = 'idem_outbox_put neither inserted nor found the message';
END
$fn$;

-- The take, in PL/pgSQL so that the rights are checked before the statement locks the outbox
-- (idempotency.portable_access); its own parameter names, as PL/pgSQL refuses an OUT column
-- named like a parameter (topic).
CREATE FUNCTION idempotency.portable_outbox_take(n pg_catalog.int4, lease_for pg_catalog.interval, only_topic pg_catalog.text)
RETURNS TABLE (
    id pg_catalog.int8,
    message_id pg_catalog.uuid,
    topic pg_catalog.text,
    payload pg_catalog.jsonb,
    headers pg_catalog.jsonb,
    attempts pg_catalog.int4
)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 100
SET search_path = pg_catalog, pg_temp
AS $fn$
#variable_conflict use_column
BEGIN
    -- batch, then lease, then the rights, as the native function checks them.
    PERFORM idempotency.portable_batch(n);
    PERFORM idempotency.portable_interval('lease'::pg_catalog.text, lease_for, false);
    IF NOT pg_catalog.has_table_privilege('idempotency.outbox'::pg_catalog.regclass,
                                          'SELECT, INSERT, UPDATE, DELETE'::pg_catalog.text) THEN
        PERFORM idempotency.portable_access('outbox');
    END IF;
    RETURN QUERY
    WITH picked AS (
        SELECT o.id FROM idempotency.outbox AS o
         WHERE o.status OPERATOR(pg_catalog.=) 'pending'::pg_catalog.text
           AND o.available_at OPERATOR(pg_catalog.<=) pg_catalog.now()
           AND (o.leased_until IS NULL OR o.leased_until OPERATOR(pg_catalog.<=) pg_catalog.now())
           AND (only_topic IS NULL OR o.topic OPERATOR(pg_catalog.=) only_topic)
         ORDER BY o.id
         LIMIT n
         FOR UPDATE SKIP LOCKED),
    taken AS (
        UPDATE idempotency.outbox AS o
           SET leased_until = pg_catalog.now() OPERATOR(pg_catalog.+) lease_for,
               attempts = CASE WHEN o.attempts OPERATOR(pg_catalog.<) 2147483647
                               THEN o.attempts OPERATOR(pg_catalog.+) 1 ELSE o.attempts END
          FROM picked WHERE o.id OPERATOR(pg_catalog.=) picked.id
        RETURNING o.id, o.message_id, o.topic, o.payload, o.headers, o.attempts)
    SELECT taken.id, taken.message_id, taken.topic, taken.payload, taken.headers, taken.attempts
      FROM taken ORDER BY taken.id;
END
$fn$;

-- The body of idem_outbox_take (sql/outbox.sql declares it).
BODY idem_outbox_take LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $fn$
SELECT t.id, t.message_id, t.topic, t.payload, t.headers, t.attempts
  FROM idempotency.portable_outbox_take($1, $2, $3) AS t
$fn$;

-- The body of idem_outbox_ack (sql/outbox.sql declares it).
BODY idem_outbox_ack LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    n pg_catalog.int8;
BEGIN
    IF NOT pg_catalog.has_table_privilege('idempotency.outbox'::pg_catalog.regclass,
                                          'SELECT, INSERT, UPDATE, DELETE'::pg_catalog.text) THEN
        PERFORM idempotency.portable_access('outbox');
    END IF;
    UPDATE idempotency.outbox AS o
       SET status = 'published', published_at = pg_catalog.now(), leased_until = NULL
     WHERE o.id OPERATOR(pg_catalog.=) ANY (ids) AND o.status OPERATOR(pg_catalog.=) 'pending';
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$fn$;

-- The body of idem_outbox_nack (sql/outbox.sql declares it).
BODY idem_outbox_nack LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
#variable_conflict use_column
DECLARE
    err pg_catalog.text := idem_outbox_nack.error;
BEGIN
    IF idem_outbox_nack.id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'id must not be null';
    END IF;
    PERFORM idempotency.portable_interval('retry_after', retry_after, true);
    -- Cut to 8192 bytes without splitting a character, as pg_mbcliplen does.
    WHILE pg_catalog.octet_length(err) OPERATOR(pg_catalog.>) 8192 LOOP
        err := pg_catalog.left(err, LEAST(pg_catalog.length(err) OPERATOR(pg_catalog.-) 1,
            pg_catalog.length(err) OPERATOR(pg_catalog.-) ((pg_catalog.octet_length(err) OPERATOR(pg_catalog.-) 8192) OPERATOR(pg_catalog./) 4)));
    END LOOP;
    IF NOT pg_catalog.has_table_privilege('idempotency.outbox'::pg_catalog.regclass,
                                          'SELECT, INSERT, UPDATE, DELETE'::pg_catalog.text) THEN
        PERFORM idempotency.portable_access('outbox');
    END IF;
    -- A row that is published (another publisher acked it) or gone is left alone.
    UPDATE idempotency.outbox AS o
       SET last_error = err, leased_until = NULL,
           available_at = pg_catalog.now() OPERATOR(pg_catalog.+) retry_after
     WHERE o.id OPERATOR(pg_catalog.=) idem_outbox_nack.id AND o.status OPERATOR(pg_catalog.=) 'pending';
END
$fn$;

-- The body of idem_outbox_purge (sql/outbox.sql declares it).
BODY idem_outbox_purge LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    n pg_catalog.int8;
    cutoff pg_catalog.timestamptz := pg_catalog.now() OPERATOR(pg_catalog.-)
        idempotency.portable_setting('idempotency.outbox_retention', '7 days', '1 second');
BEGIN
    PERFORM idempotency.portable_batch(batch);
    IF NOT pg_catalog.has_table_privilege('idempotency.outbox'::pg_catalog.regclass,
                                          'SELECT, INSERT, UPDATE, DELETE'::pg_catalog.text) THEN
        PERFORM idempotency.portable_access('outbox');
    END IF;
    WITH doomed AS (SELECT o.id FROM idempotency.outbox AS o
                     WHERE o.status OPERATOR(pg_catalog.=) 'published'
                       AND o.published_at OPERATOR(pg_catalog.<) cutoff
                     ORDER BY o.published_at LIMIT batch FOR UPDATE SKIP LOCKED)
    DELETE FROM idempotency.outbox AS o USING doomed WHERE o.id OPERATOR(pg_catalog.=) doomed.id;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$fn$;
