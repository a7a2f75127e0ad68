-- The signed content of cdc_message puts and its check (docs/cdc.md), over the secret of
-- sql/cdc.sql. Re-runnable: scripts/portable.sh --update runs it again.

-- HMAC-SHA256 (RFC 2104) of message under key.
CREATE FUNCTION idempotency.cdc_hmac(key pg_catalog.bytea, message pg_catalog.bytea)
RETURNS pg_catalog.bytea
LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'cdc_hmac_wrapper';

-- HMAC-SHA256 of message under this database's secret, read inside it, so that the secret is
-- never an argument or a parameter a log could show (auto_explain); NULL without a secret.
-- Reads as its caller: the definer functions below, as the tables' owner.
CREATE FUNCTION idempotency.cdc_sign(message pg_catalog.bytea)
RETURNS pg_catalog.bytea
LANGUAGE c STABLE STRICT PARALLEL SAFE
AS 'MODULE_PATHNAME', 'cdc_sign_wrapper';
REVOKE ALL ON FUNCTION idempotency.cdc_sign(pg_catalog.bytea) FROM PUBLIC;

-- idem_outbox_put's checks of its arguments (names, payload, headers, the size cap), raised as
-- the put raises them: cdc_message runs them too, so that calling it directly signs nothing a
-- put would refuse. Executable by anyone: it reads nothing.
CREATE FUNCTION idempotency.outbox_put_check(
    topic pg_catalog.text,
    payload pg_catalog.jsonb,
    dedupe_key pg_catalog.text,
    headers pg_catalog.jsonb
) RETURNS void
LANGUAGE c STABLE PARALLEL SAFE
AS 'MODULE_PATHNAME', 'outbox_put_check_wrapper';

-- The content of a cdc_message put: message_id is HMAC(secret, topic || 0x00 || dedupe_key)
-- as a uuid (random without a dedupe key), and signature the hex HMAC of the rest as jsonb
-- text, which idem_cdc_verify recomputes. SECURITY DEFINER to read the secret: EXECUTE goes
-- with the outbox's INSERT (idem_grant's app profile), never to PUBLIC. A direct call gets the
-- put's checks: its arguments', and no message while the outbox has row-level security (a
-- definer cannot tell whether the policies would apply to its caller).
CREATE FUNCTION idempotency.cdc_message(
    topic pg_catalog.text,
    dedupe_key pg_catalog.text,
    payload pg_catalog.jsonb,
    headers pg_catalog.jsonb
) RETURNS pg_catalog.text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    id_ pg_catalog.uuid;
    doc pg_catalog.jsonb;
    sig pg_catalog.bytea;
BEGIN
    IF (SELECT c.relrowsecurity FROM pg_catalog.pg_class AS c
         WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency.outbox'::pg_catalog.regclass) THEN
        RAISE EXCEPTION USING ERRCODE = '0A000',
            MESSAGE = 'idempotency.outbox_delivery = cdc_message cannot apply idempotency.outbox''s row-level security policies',
            HINT = 'Use idempotency.outbox_delivery = cdc_table: its rows are checked by the policies.';
    END IF;
    PERFORM idempotency.outbox_put_check(topic, payload, dedupe_key, headers);
    id_ := CASE WHEN dedupe_key IS NULL THEN pg_catalog.gen_random_uuid()
        ELSE pg_catalog.substr(pg_catalog.encode(idempotency.cdc_sign(
                 pg_catalog.convert_to(topic, 'UTF8'::pg_catalog.name) OPERATOR(pg_catalog.||) pg_catalog.decode('00'::pg_catalog.text, 'hex'::pg_catalog.text)
                 OPERATOR(pg_catalog.||) pg_catalog.convert_to(dedupe_key, 'UTF8'::pg_catalog.name)),
             'hex'::pg_catalog.text), 1, 32)::pg_catalog.uuid END;
    doc := pg_catalog.jsonb_build_object(
        'message_id'::pg_catalog.text, id_,
        'topic'::pg_catalog.text, topic, 'dedupe_key'::pg_catalog.text, dedupe_key,
        'payload'::pg_catalog.text, payload, 'headers'::pg_catalog.text, headers,
        'created_at'::pg_catalog.text, pg_catalog.now());
    sig := idempotency.cdc_sign(pg_catalog.convert_to(doc::pg_catalog.text, 'UTF8'::pg_catalog.name));
    IF id_ IS NULL OR sig IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '55000', MESSAGE = 'idempotency.cdc_secret holds no secret',
            HINT = 'Restore its row from a dump, or have the tables'' owner insert 32 new random bytes (message ids change).';
    END IF;
    RETURN (doc OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object('signature'::pg_catalog.text,
        pg_catalog.encode(sig, 'hex'::pg_catalog.text)))::pg_catalog.text;
END
$fn$;
REVOKE ALL ON FUNCTION idempotency.cdc_message(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.jsonb) FROM PUBLIC;
COMMENT ON FUNCTION idempotency.cdc_message(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.jsonb) IS
    'Internal: the signed content of a cdc_message put, its message_id keyed by this database''s secret';

-- true when the message (a cdc_message put's content, parsed) carries this database's
-- signature: a consumer checks it before idem_inbox_accept, so a forged message is dropped
-- without taking the id of the genuine one.
CREATE FUNCTION @extschema@.idem_cdc_verify(message pg_catalog.jsonb)
RETURNS pg_catalog.bool
LANGUAGE plpgsql STABLE STRICT SECURITY DEFINER PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    sig pg_catalog.text;
BEGIN
    IF pg_catalog.jsonb_typeof(message) OPERATOR(pg_catalog.<>) 'object'::pg_catalog.text THEN
        RETURN false;
    END IF;
    sig := message OPERATOR(pg_catalog.->>) 'signature'::pg_catalog.text;
    IF sig IS NULL OR sig OPERATOR(pg_catalog.!~) '^[0-9a-f]{64}$'::pg_catalog.text THEN
        RETURN false;
    END IF;
    -- Compared through SHA-256, so that the comparison's time says nothing of the HMAC; no
    -- secret: NULL, false.
    RETURN COALESCE(pg_catalog.sha256(idempotency.cdc_sign(pg_catalog.convert_to(
               (message OPERATOR(pg_catalog.-) 'signature'::pg_catalog.text)::pg_catalog.text, 'UTF8'::pg_catalog.name)))
           OPERATOR(pg_catalog.=) pg_catalog.sha256(pg_catalog.decode(sig, 'hex'::pg_catalog.text)), false);
END
$fn$;
REVOKE ALL ON FUNCTION @extschema@.idem_cdc_verify(pg_catalog.jsonb) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.idem_cdc_verify(pg_catalog.jsonb) IS
    'true when a cdc_message put''s content carries this database''s signature: drop a message for which it is false before idem_inbox_accept';

-- The message (a cdc_message put's content, as the text emitted) parsed, when it carries this
-- database's signature; NULL otherwise, also for text that is not JSON: anyone may emit junk
-- with the prefix, and a consumer that raised on it would stop there for good.
CREATE FUNCTION @extschema@.idem_cdc_verified(message pg_catalog.text)
RETURNS pg_catalog.jsonb
LANGUAGE plpgsql STABLE STRICT PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    doc pg_catalog.jsonb;
BEGIN
    BEGIN
        doc := message::pg_catalog.jsonb;
    EXCEPTION WHEN data_exception OR program_limit_exceeded THEN
        RETURN NULL;
    END;
    IF @extschema@.idem_cdc_verify(doc) THEN
        RETURN doc;
    END IF;
    RETURN NULL;
END
$fn$;
REVOKE ALL ON FUNCTION @extschema@.idem_cdc_verified(pg_catalog.text) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.idem_cdc_verified(pg_catalog.text) IS
    'A cdc_message put''s content parsed when it carries this database''s signature, NULL otherwise (not JSON included): what a consumer applies';

-- Whoever may already put into the outbox keeps putting cdc_message and verifying after an
-- update (a fresh install has no such role yet).
DO $grant$
DECLARE
    r pg_catalog.regrole;
BEGIN
    FOR r IN SELECT DISTINCT a.grantee::pg_catalog.regrole
               FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
              WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency.outbox'::pg_catalog.regclass
                AND a.privilege_type OPERATOR(pg_catalog.=) 'INSERT'::pg_catalog.text
                AND a.grantee OPERATOR(pg_catalog.<>) 0::pg_catalog.oid
                AND a.grantee OPERATOR(pg_catalog.<>) c.relowner LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION idempotency.cdc_message(pg_catalog.text, pg_catalog.text, '
            'pg_catalog.jsonb, pg_catalog.jsonb), @extschema@.idem_cdc_verify(pg_catalog.jsonb), '
            '@extschema@.idem_cdc_verified(pg_catalog.text) TO %s', r);
    END LOOP;
END
$grant$;

-- The definer functions belong to the secret's owner, the tables' owner, even when another
-- role (a superuser's portable.sh --update) created them.
DO $owner$
DECLARE
    owner_ constant pg_catalog.regrole := (SELECT c.relowner::pg_catalog.regrole FROM pg_catalog.pg_class AS c
                                           WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency.cdc_secret'::pg_catalog.regclass);
BEGIN
    EXECUTE pg_catalog.format('ALTER FUNCTION idempotency.cdc_message(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, '
        'pg_catalog.jsonb) OWNER TO %s', owner_);
    EXECUTE pg_catalog.format('ALTER FUNCTION @extschema@.idem_cdc_verify(pg_catalog.jsonb) OWNER TO %s', owner_);
END
$owner$;

-- Only the owner reads the secret or writes it: row-level security with no policy binds every
-- other role (pg_read_all_data and pg_write_all_data too; the owner is exempt without FORCE),
-- and no grant survives, not even one from default privileges. Run at install and update.
DO $lock$
DECLARE
    r pg_catalog.regrole;
BEGIN
    IF (SELECT c.relkind FROM pg_catalog.pg_class AS c
         WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency.cdc_secret'::pg_catalog.regclass)
       OPERATOR(pg_catalog.<>) 'r'::pg_catalog."char" THEN
        RETURN;
    END IF;
    ALTER TABLE idempotency.cdc_secret ENABLE ROW LEVEL SECURITY;
    REVOKE ALL ON idempotency.cdc_secret FROM PUBLIC;
    FOR r IN SELECT DISTINCT a.grantee::pg_catalog.regrole
               FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
              WHERE c.oid OPERATOR(pg_catalog.=) 'idempotency.cdc_secret'::pg_catalog.regclass
                AND a.grantee OPERATOR(pg_catalog.<>) 0::pg_catalog.oid
                AND a.grantee OPERATOR(pg_catalog.<>) c.relowner LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON idempotency.cdc_secret FROM %s', r);
    END LOOP;
END
$lock$;
