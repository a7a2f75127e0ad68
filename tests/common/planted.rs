//! Look-alike operators planted in schema public before an install, and how to tell whether
//! anything of the extension bound or ran them (security/install_path.rs, catalog/upgrade.rs,
//! the pg_tle route in tests/clusters/portable_pg_tle.rs); and a hostile owner's code for
//! what a superuser runs over the owner's install (tests/integration/portable/move_up_hostile.rs, pg_tle).

use super::Client;

/// Run by a superuser in the database: the role `planter`, which may create in schema public
/// (as any role could before Postgres 15).
pub const PLANTER: &str = "
    DO $$ BEGIN
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'planter') THEN
            CREATE ROLE planter LOGIN;
        END IF;
    END $$;
    GRANT CREATE ON SCHEMA public TO planter;";

/// Run by `planter` in schema public: look-alikes of the comparisons the tables' DDL uses,
/// on an enum against text (what an untyped literal prefers). Each one counts its calls in
/// `public.planted_calls` (a sequence: a rolled-back call still counts) and answers as the
/// real operator would, and claims to be IMMUTABLE (an index predicate needs it), as a careful
/// attacker's does.
pub const PLANT: &str = "
    CREATE SEQUENCE public.planted_calls;
    GRANT USAGE, UPDATE, SELECT ON SEQUENCE public.planted_calls TO PUBLIC;
    CREATE FUNCTION public.planted_eq(anyenum, text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE
        AS $$ BEGIN PERFORM pg_catalog.nextval('public.planted_calls'); RETURN $1::text = $2; END $$;
    CREATE FUNCTION public.planted_ne(anyenum, text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE
        AS $$ BEGIN PERFORM pg_catalog.nextval('public.planted_calls'); RETURN $1::text <> $2; END $$;
    CREATE OPERATOR public.= (LEFTARG = anyenum, RIGHTARG = text, FUNCTION = public.planted_eq);
    CREATE OPERATOR public.<> (LEFTARG = anyenum, RIGHTARG = text, FUNCTION = public.planted_ne);";

/// Every object whose expression is bound to one of the planted operators.
pub fn bound_to_planted(db: &mut Client) -> Vec<String> {
    db.query(
        "SELECT pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid)
           FROM pg_catalog.pg_depend AS d
           JOIN pg_catalog.pg_operator AS o ON o.oid OPERATOR(pg_catalog.=) d.refobjid
          WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_operator'::pg_catalog.regclass
            AND o.oprnamespace OPERATOR(pg_catalog.=) 'public'::pg_catalog.regnamespace
          ORDER BY 1",
        &[],
    )
    .expect("dependencies on the planted operators")
    .iter()
    .map(|r| r.get(0))
    .collect()
}

/// How many times a planted operator ran.
pub fn planted_calls(db: &mut Client) -> i64 {
    db.query_one(
        "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM public.planted_calls",
        &[],
    )
    .expect("planted_calls")
    .get(0)
}

/// Every table's writes and the upkeep, through the functions.
pub fn exercise(db: &mut Client) {
    db.batch_execute(
        "SELECT idem_claim('install_path', 'k1', 'h');
         SELECT idem_checkpoint('install_path', 'k1', 'p');
         SELECT idem_complete('install_path', 'k1', '{\"ok\": true}');
         SELECT idem_claim('install_path', 'k1', 'h');
         SELECT idem_claim('install_path', 'k2', 'h');
         SELECT idem_fail('install_path', 'k2', true, 'E', 'boom');
         SELECT idem_claim('install_path', 'k3', 'h', lease => '1 millisecond', retention => '1 millisecond');
         SELECT pg_catalog.pg_sleep(0.01);
         SELECT idem_reclaim();
         SELECT idem_purge();
         SELECT idem_forget('install_path', 'k2');
         SELECT idem_inbox_accept('c', 'm1', 'h');
         SELECT idem_advance('s', 'e', 1);
         SELECT idem_outbox_put('t', '{\"n\": 1}', 'dk');
         SELECT idem_outbox_ack(ARRAY(SELECT id FROM idem_outbox_take(10, '1 hour')));
         SELECT idem_outbox_purge();
         SELECT count(*) FROM idempotency.stats;",
    )
    .expect("the functions run");
}

/// Run by the owner of a portable install: `public.marks` notes every run of its code, and
/// whether it ran as a superuser.
pub const MARK: &str = "CREATE TABLE public.marks (who text, su bool);
    GRANT INSERT ON public.marks TO PUBLIC;
    CREATE FUNCTION public.mark() RETURNS boolean LANGUAGE sql AS $$
      INSERT INTO public.marks SELECT current_user, r.rolsuper FROM pg_roles r WHERE r.rolname = current_user
      RETURNING true $$;
    CREATE FUNCTION public.mark_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM public.mark(); RETURN NULL; END $$;";

/// Run by the owner of a portable install, after [`MARK`]: look-alikes of the edition's
/// functions (a text overload of `idem_hash`, of the helpers), a cast of its enum, triggers on
/// every table and rules (the CDC secret's too), for an update a superuser runs.
pub const UPDATE_PLANTS: &str = "CREATE FUNCTION public.idem_hash(t text) RETURNS text LANGUAGE sql
           AS $$ SELECT CASE WHEN public.mark() THEN 'x' END $$;
         CREATE FUNCTION idempotency.portable_quote(t text, u text) RETURNS text LANGUAGE sql
           AS $$ SELECT CASE WHEN public.mark() THEN 'x' END $$;
         CREATE FUNCTION public.evil(s public.idem_status) RETURNS text LANGUAGE plpgsql AS $$
           BEGIN PERFORM public.mark(); RETURN pg_catalog.enum_out(s)::text; END $$;
         CREATE CAST (public.idem_status AS text) WITH FUNCTION public.evil(public.idem_status);
         CREATE TRIGGER t BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON idempotency.requests
           FOR EACH STATEMENT EXECUTE FUNCTION public.mark_trigger();
         CREATE TRIGGER t BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON idempotency.outbox
           FOR EACH STATEMENT EXECUTE FUNCTION public.mark_trigger();
         CREATE RULE r AS ON INSERT TO idempotency.versions DO ALSO SELECT public.mark();
         CREATE TRIGGER t BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON idempotency.cdc_secret
           FOR EACH STATEMENT EXECUTE FUNCTION public.mark_trigger();
         CREATE RULE r AS ON INSERT TO idempotency.cdc_secret DO ALSO SELECT public.mark();";
