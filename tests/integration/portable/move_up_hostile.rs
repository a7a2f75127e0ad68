//! `scripts/portable.sh --move-up` with a hostile database owner (issue 32, finding 2): the
//! superuser who runs it never runs code the tables' owner planted. A trigger is never reached
//! (the rows are read as the owner, the enum through its output function); a cast of the
//! edition's enum, a view in place of a table, a rule, row-level security, an operator in the
//! functions' schema and a domain column (on the CDC secret too) are refused with 55000 and
//! nothing changes. `--update` run by a superuser over such an install runs none of
//! it either. `public.marks` notes every run of the owner's code, and whether it ran as a
//! superuser.

use crate::common;

use common::planted::{MARK, UPDATE_PLANTS};
use common::{answer, count};

/// (what is planted, the owner's SQL, whether the move-up goes through)
const PLANTS: &[(&str, &str, bool)] = &[
    (
        "a cast of the enum to text",
        "CREATE FUNCTION public.evil(s public.idem_status) RETURNS text LANGUAGE plpgsql AS $$
           BEGIN PERFORM public.mark(); RETURN pg_catalog.enum_out(s)::text; END $$;
         CREATE CAST (public.idem_status AS text) WITH FUNCTION public.evil(public.idem_status);",
        false,
    ),
    (
        "a trigger on every table",
        "CREATE TRIGGER t BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON idempotency.requests
           FOR EACH STATEMENT EXECUTE FUNCTION public.mark_trigger();
         CREATE TRIGGER t BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON idempotency.outbox
           FOR EACH STATEMENT EXECUTE FUNCTION public.mark_trigger();",
        true,
    ),
    (
        "a view in place of a table",
        "ALTER TABLE idempotency.inbox RENAME TO inbox_real;
         CREATE VIEW idempotency.inbox AS SELECT i.* FROM idempotency.inbox_real i WHERE public.mark();",
        false,
    ),
    (
        "a rule",
        "CREATE RULE r AS ON INSERT TO idempotency.versions DO ALSO SELECT public.mark();",
        false,
    ),
    (
        "row-level security and a policy on a table",
        "ALTER TABLE idempotency.inbox ENABLE ROW LEVEL SECURITY;
         CREATE POLICY p ON idempotency.inbox USING (public.mark());",
        false,
    ),
    (
        "an operator in the functions' schema, for CREATE EXTENSION's DDL",
        "CREATE FUNCTION public.evil_eq(a anyenum, b text) RETURNS bool IMMUTABLE LANGUAGE plpgsql AS $$
           BEGIN PERFORM public.mark(); RETURN a::text = b; END $$;
         CREATE OPERATOR public.= (LEFTARG = anyenum, RIGHTARG = text, FUNCTION = public.evil_eq);",
        false,
    ),
    (
        "a domain column",
        "CREATE DOMAIN public.d AS text CHECK (public.mark());
         ALTER TABLE idempotency.requests ALTER COLUMN claimed_by TYPE public.d;",
        false,
    ),
    // The CDC secret moves too (docs/cdc.md): it is read the same way.
    (
        "a trigger on the CDC secret",
        "CREATE TRIGGER t BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON idempotency.cdc_secret
           FOR EACH STATEMENT EXECUTE FUNCTION public.mark_trigger();",
        true,
    ),
    (
        "a view in place of the CDC secret",
        "ALTER TABLE idempotency.cdc_secret RENAME TO cdc_secret_real;
         CREATE VIEW idempotency.cdc_secret AS SELECT s.* FROM idempotency.cdc_secret_real s WHERE public.mark();",
        false,
    ),
    (
        "row-level security on the CDC secret",
        "ALTER TABLE idempotency.cdc_secret ENABLE ROW LEVEL SECURITY;
         CREATE POLICY p ON idempotency.cdc_secret USING (public.mark());",
        false,
    ),
    (
        "a domain column in the CDC secret",
        "CREATE DOMAIN public.dd AS bytea CHECK (public.mark());
         ALTER TABLE idempotency.cdc_secret ALTER COLUMN secret TYPE public.dd;",
        false,
    ),
];

#[test]
fn a_hostile_owner_never_runs_code_as_the_superuser_moving_up() {
    let c = common::cluster();
    for (i, (what, plant, goes)) in PLANTS.iter().enumerate() {
        let name = format!("portable_up_hostile{i}");
        let mut o = super::owned_database(c, &name);
        o.batch_execute(&common::portable_script(&[]))
            .expect("portable edition");
        o.batch_execute(
            "SELECT idem_claim('pay', 'done', 'h1'); SELECT idem_complete('pay', 'done', '{}');
             SELECT idem_inbox_accept('c', 'm1', 'h'); SELECT idem_advance('s', 'e', 5);
             SELECT idem_outbox_put('t', '{}');",
        )
        .expect("state");
        o.batch_execute(MARK).expect("marks");
        o.batch_execute(plant)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        drop(o);
        let mut su = c.connect(&name);
        let moved = su.batch_execute(&common::portable_script(&["--move-up"]));
        match (&moved, goes) {
            (Ok(()), true) => assert_eq!(
                answer(
                    &mut su,
                    "SELECT (idem_claim('pay', 'done', 'h1')).outcome::text"
                ),
                "replay_success",
                "{what}"
            ),
            (Err(e), false) => {
                assert_eq!(common::sqlstate(e), "55000", "{what}: {e}");
                su.batch_execute("ROLLBACK").expect("rollback");
                assert_eq!(
                    count(
                        &mut su,
                        "SELECT count(*) FROM pg_extension WHERE extname = 'idempotency'"
                    ),
                    0,
                    "{what}: nothing changed"
                );
            }
            _ => panic!("{what}: the move-up answered {moved:?}"),
        }
        assert_eq!(
            count(&mut su, "SELECT count(*) FROM public.marks WHERE su"),
            0,
            "{what}: the owner's code ran as a superuser"
        );
    }
}

/// `scripts/portable.sh --update` run by a superuser over a hostile owner's install: the
/// owner's look-alikes of the edition's functions (a text overload of `idem_hash`, of the
/// helpers), a cast of its enum, triggers on every table and a rule are never run, and the
/// update goes through.
#[test]
fn a_hostile_owner_never_runs_code_as_the_superuser_updating() {
    let c = common::cluster();
    let name = "portable_update_hostile";
    let mut o = super::owned_database(c, name);
    o.batch_execute(&common::portable_script(&[]))
        .expect("portable edition");
    o.batch_execute(MARK).expect("marks");
    o.batch_execute(UPDATE_PLANTS).expect("the owner's plants");
    drop(o);
    let mut su = c.connect(name);
    su.batch_execute(&common::portable_script(&["--update"]))
        .expect("the update goes through");
    assert_eq!(
        count(&mut su, "SELECT count(*) FROM public.marks"),
        0,
        "the owner's code ran during the update"
    );
    assert_eq!(
        answer(
            &mut su,
            "SELECT (idem_claim('pay', 'k', idem_hash('{}'::jsonb))).outcome::text"
        ),
        "new_claim"
    );
}
