//! The upkeep from real pg_cron (Debian's postgresql-15-cron, which pgrx-config/setup.sh
//! installs): a server of the Postgres under test with shared_preload_libraries = 'pg_cron',
//! the portable edition installed by a non-superuser owner, idem_schedule_upkeep(), and then,
//! by effect, that pg_cron ran idem_upkeep as that owner: a stale lease reclaimed, an expired
//! record and an outbox row purged, the owner's own trigger run as the owner; and that the
//! job never ran another role's trigger: the inbox, which carries one, is left alone.
//! Ignored where that Postgres has no pg_cron (build.rs, `idem_no_pg_cron`).

use std::path::Path;
use std::time::Duration;

use crate::common::{self, Client, NoTls};

/// A server with pg_cron preloaded (jobs in background workers, in database `db`), stopped
/// when this process ends. Returns its port.
fn start(bindir: &Path, db: &str) -> u16 {
    let conf = format!(
        "shared_preload_libraries = 'pg_cron'\ncron.database_name = '{db}'\n\
         cron.use_background_workers = on\nfsync = off\n"
    );
    common::start_server(bindir, "idem-cron", &conf).0
}

fn connect(port: u16, db: &str, user: &str) -> Client {
    Client::connect(
        &format!("host=127.0.0.1 port={port} user={user} dbname={db}"),
        NoTls,
    )
    .unwrap_or_else(|e| panic!("connect {db} as {user}: {e}"))
}

#[test]
#[cfg_attr(
    idem_no_pg_cron,
    ignore = "no pg_cron for this Postgres (pgrx-config/setup.sh: Debian's 15)"
)]
fn real_pg_cron_runs_the_upkeep_as_the_tables_owner() {
    let dir = common::pg_config_dir;
    let port = start(&dir("--bindir"), "cron_app");
    let mut admin = connect(port, "postgres", "postgres");
    for sql in [
        "CREATE ROLE cron_owner LOGIN NOSUPERUSER",
        "CREATE ROLE cron_other LOGIN NOSUPERUSER",
        "CREATE DATABASE cron_app OWNER cron_owner",
    ] {
        admin.batch_execute(sql).expect(sql);
    }
    let mut su = connect(port, "cron_app", "postgres");
    su.batch_execute(
        "CREATE EXTENSION pg_cron; GRANT USAGE ON SCHEMA cron TO cron_owner; \
         CREATE SCHEMA o AUTHORIZATION cron_other",
    )
    .expect("pg_cron");
    let mut owner = connect(port, "cron_app", "cron_owner");
    owner
        .batch_execute(super::portable_sql())
        .expect("the portable edition, by its owner");
    // The owner's own trigger (allowed: the owner wrote it) records who runs the upkeep.
    owner
        .batch_execute(
            "CREATE TABLE public.ran (who text, tab text); \
             CREATE FUNCTION public.mine() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
               INSERT INTO public.ran VALUES (current_user, TG_TABLE_NAME); RETURN NULL; END $$; \
             CREATE TRIGGER mine AFTER UPDATE OR DELETE ON idempotency.requests \
               FOR EACH ROW EXECUTE FUNCTION public.mine(); \
             GRANT USAGE ON SCHEMA idempotency TO cron_other; \
             GRANT TRIGGER ON idempotency.inbox TO cron_other; \
             SELECT idem_claim('cron', 'stale', 'h', lease => '1 ms', retention => '1 hour'); \
             SELECT idem_claim('cron', 'expired', 'h', retention => '1 ms'); \
             SELECT idem_complete('cron', 'expired', '{}'); \
             SELECT idem_inbox_accept('cron', 'm', 'h', retention => '1 ms'); \
             SELECT idem_outbox_ack(ARRAY[idem_outbox_put('t', '{}')]); \
             UPDATE idempotency.outbox SET published_at = now() - interval '30 days'; \
             DELETE FROM public.ran",
        )
        .expect("records to upkeep");
    // Another role, with only TRIGGER on the inbox, adds a trigger of its own there.
    let mut other = connect(port, "cron_app", "cron_other");
    other
        .batch_execute(
            "CREATE TABLE o.ran (who text); GRANT USAGE ON SCHEMA o TO PUBLIC; GRANT SELECT, INSERT ON o.ran TO PUBLIC; \
             CREATE FUNCTION o.steal() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
               INSERT INTO o.ran VALUES (current_user); RETURN OLD; END $$; \
             CREATE TRIGGER steal BEFORE DELETE ON idempotency.inbox FOR EACH ROW EXECUTE FUNCTION o.steal()",
        )
        .expect("a trigger of another role");
    let job: i64 = owner
        .query_one("SELECT idem_schedule_upkeep()", &[])
        .expect("idem_schedule_upkeep")
        .get(0);
    let username: String = su
        .query_one(
            "SELECT username::text FROM cron.job WHERE jobid = $1",
            &[&job],
        )
        .expect("the job")
        .get(0);
    assert_eq!(username, "cron_owner");
    // pg_cron 1.4 schedules by the minute: the first run starts at the next one.
    let mut status = String::new();
    common::wait_for("a run of the job", Duration::from_secs(150), || {
        status = su
            .query_one(
                "SELECT coalesce(string_agg(status || ': ' || coalesce(return_message, ''), '; '), '') \
                 FROM cron.job_run_details WHERE jobid = $1 AND status IN ('succeeded', 'failed')",
                &[&job],
            )
            .expect("runs")
            .get(0);
        !status.is_empty()
    });
    assert!(status.starts_with("succeeded"), "the run: {status}");
    let answer = |db: &mut Client, sql: &str| common::answer(db, sql);
    assert_eq!(
        answer(
            &mut owner,
            "SELECT status || ' ' || failure_code FROM idempotency.requests WHERE key = 'stale'"
        ),
        "failed_retryable lease_expired",
        "the stale lease was reclaimed"
    );
    assert_eq!(
        common::count(
            &mut owner,
            "SELECT count(*) FROM idempotency.requests WHERE key = 'expired'"
        ),
        0,
        "the expired record was purged"
    );
    assert_eq!(
        common::count(&mut owner, "SELECT count(*) FROM idempotency.outbox"),
        0,
        "the old outbox row was purged"
    );
    assert_eq!(
        answer(
            &mut owner,
            "SELECT string_agg(DISTINCT who, ',') FROM public.ran"
        ),
        "cron_owner",
        "the upkeep ran as the tables' owner"
    );
    assert_eq!(
        common::count(&mut owner, "SELECT count(*) FROM idempotency.inbox"),
        1,
        "the inbox, with another role's trigger, was left alone"
    );
    assert_eq!(
        common::count(&mut owner, "SELECT count(*) FROM o.ran"),
        0,
        "the other role's trigger never ran"
    );
}
