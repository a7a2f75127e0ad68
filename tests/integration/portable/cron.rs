//! The upkeep's schedule: idem_schedule_upkeep with a stand-in of pg_cron, and the trigger rule
//! (every major; real pg_cron: pg_cron.rs).

use super::{cluster, error, install};
use crate::common;

/// idem_schedule_upkeep: 55000 without pg_cron; with it (here a stand-in of pg_cron: its
/// pg_extension row, and a cron.schedule, a member of it, that records its arguments and where it ran: pg_cron itself is not built for
/// every major), one job in this database running idem_upkeep(), scheduled only by the
/// tables' owner, since pg_cron runs a job as the role that scheduled it.
#[test]
fn upkeep_is_scheduled_with_pg_cron_by_the_tables_owner() {
    let mut db = install("portable_cron");
    assert_eq!(error(&mut db, "SELECT idem_schedule_upkeep()"), "55000");
    let mut admin = cluster().connect("portable_cron");
    admin
        .batch_execute(
            "CREATE SCHEMA cron; CREATE TABLE cron.jobs (name text, schedule text, command text, db text, owner text); \
             CREATE FUNCTION cron.schedule(job_name text, schedule text, command text) \
             RETURNS bigint LANGUAGE sql AS $$ INSERT INTO cron.jobs VALUES ($1, $2, $3, current_database(), current_user) RETURNING 7::bigint $$; \
             GRANT USAGE ON SCHEMA cron TO PUBLIC; GRANT INSERT ON cron.jobs TO PUBLIC; \
             INSERT INTO pg_catalog.pg_extension (oid, extname, extowner, extnamespace, extrelocatable, extversion) \
               SELECT (SELECT max(e.oid::int8) + 1 FROM pg_catalog.pg_extension e)::oid, 'pg_cron', 10, \
                      'cron'::regnamespace, false, '1.4'; \
             ALTER EXTENSION pg_cron ADD FUNCTION cron.schedule(text, text, text); \
             DROP ROLE IF EXISTS portable_cron_other; CREATE ROLE portable_cron_other LOGIN",
        )
        .expect("a pg_cron stand-in");
    assert_eq!(
        common::count(&mut db, "SELECT idem_schedule_upkeep('*/5 * * * *')"),
        7
    );
    assert_eq!(
        common::answer(
            &mut admin,
            "SELECT concat_ws('|', name, schedule, command, db, owner) FROM cron.jobs"
        ),
        "idempotency-upkeep-portable_cron|*/5 * * * *|SELECT * FROM public.idem_upkeep()|portable_cron|portable_cron_owner"
    );
    let mut other = cluster().connect_as("portable_cron", "portable_cron_other");
    assert_eq!(error(&mut other, "SELECT idem_schedule_upkeep()"), "42501");
    // A role with only the TRIGGER privilege adds a trigger: the upkeep, running as the owner,
    // leaves that table alone (as the native worker does) and the trigger never runs.
    db.batch_execute(
        "GRANT USAGE ON SCHEMA idempotency TO portable_cron_other; \
         GRANT TRIGGER ON idempotency.requests TO portable_cron_other; \
         SELECT idem_claim('t', 'k', 'h', lease => '1 ms')",
    )
    .expect("grant TRIGGER");
    admin
        .batch_execute("CREATE SCHEMA o AUTHORIZATION portable_cron_other")
        .expect("its schema");
    other
        .batch_execute(
            "CREATE TABLE o.ran (who text); GRANT USAGE ON SCHEMA o TO PUBLIC; GRANT SELECT, INSERT ON o.ran TO PUBLIC; \
             CREATE FUNCTION o.steal() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
               INSERT INTO o.ran VALUES (current_user); RETURN NEW; END $$; \
             CREATE TRIGGER steal BEFORE UPDATE OR DELETE ON idempotency.requests \
               FOR EACH ROW EXECUTE FUNCTION o.steal()",
        )
        .expect("a trigger of another role");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let round = db
        .query_one("SELECT reclaimed, inbox_purged FROM idem_upkeep()", &[])
        .expect("idem_upkeep");
    assert_eq!(round.get::<_, Option<i64>>(0), None, "requests left alone");
    assert_eq!(
        round.get::<_, Option<i64>>(1),
        Some(0),
        "the inbox is upkept"
    );
    assert_eq!(
        common::count(&mut db, "SELECT count(*) FROM o.ran"),
        0,
        "the trigger never ran"
    );
    assert_eq!(
        common::answer(
            &mut db,
            "SELECT status::text FROM idempotency.requests WHERE scope = 't'"
        ),
        "processing"
    );
}

/// docs/managed.md's rule, case by case: idem_upkeep leaves a table alone (NULL in its column)
/// while an enabled trigger there could run code the owner did not write: a built-in or an
/// extension's function, a WHEN condition, arguments (another role's function: above, and
/// pg_cron.rs); a plain trigger of the owner's own function is run, as the
/// owner, and the table is upkept.
#[test]
fn upkeep_leaves_alone_every_trigger_the_owner_did_not_write() {
    let mut db = install("portable_triggers");
    db.batch_execute(
        "CREATE TABLE public.ran (who text); \
         CREATE FUNCTION public.mine() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
           INSERT INTO public.ran VALUES (current_user); RETURN OLD; END $$",
    )
    .expect("the owner's trigger function");
    // contrib's tcn, where this build has it (the PyPI builds of some majors have no contrib).
    let mut admin = cluster().connect("portable_triggers");
    let tcn = common::count(
        &mut admin,
        "SELECT count(*) FROM pg_available_extensions WHERE name = 'tcn'",
    ) == 1;
    if tcn {
        admin
            .batch_execute("CREATE EXTENSION tcn")
            .expect("an extension with a trigger function");
    } else {
        println!("no contrib tcn here: the extension-function case is not run");
    }
    let purged = |db: &mut common::Client| -> Option<i64> {
        db.query_one("SELECT outbox_purged FROM idem_upkeep()", &[])
            .expect("idem_upkeep")
            .get(0)
    };
    for (what, trigger) in [
        (
            "a built-in function",
            "BEFORE UPDATE ON idempotency.outbox FOR EACH ROW EXECUTE FUNCTION pg_catalog.suppress_redundant_updates_trigger()",
        ),
        (
            "an extension's function",
            "AFTER DELETE ON idempotency.outbox FOR EACH ROW EXECUTE FUNCTION public.triggered_change_notification()",
        ),
        (
            "a WHEN condition",
            "BEFORE DELETE ON idempotency.outbox FOR EACH ROW WHEN (OLD.id > 0) EXECUTE FUNCTION public.mine()",
        ),
        (
            "arguments",
            "BEFORE DELETE ON idempotency.outbox FOR EACH ROW EXECUTE FUNCTION public.mine('x')",
        ),
    ] {
        if what == "an extension's function" && !tcn {
            continue;
        }
        db.batch_execute(&format!("CREATE TRIGGER t {trigger}"))
            .expect(what);
        assert_eq!(purged(&mut db), None, "{what}: the outbox is left alone");
        db.batch_execute("DROP TRIGGER t ON idempotency.outbox")
            .expect("drop");
    }
    db.batch_execute(
        "CREATE TRIGGER t BEFORE DELETE ON idempotency.outbox FOR EACH ROW EXECUTE FUNCTION public.mine(); \
         SELECT idem_outbox_ack(ARRAY[idem_outbox_put('t', '{}')]); \
         UPDATE idempotency.outbox SET published_at = now() - interval '30 days'",
    )
    .expect("the owner's own trigger and an old row");
    assert_eq!(
        purged(&mut db),
        Some(1),
        "the owner's own trigger is no bar"
    );
    assert_eq!(
        common::answer(&mut db, "SELECT string_agg(who, ',') FROM public.ran"),
        "portable_triggers_owner"
    );
}
