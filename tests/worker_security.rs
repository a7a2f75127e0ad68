//! What the maintenance worker runs as (issue #11, finding 2) and that one failing step does not
//! skip the others (finding 8). A cluster of its own, worker on, short naptime; every test has a
//! database of its own.

mod common;

use std::time::{Duration, Instant};

use common::{Client, Cluster, EXTRA_CONF, cluster};

fn server() -> &'static Cluster {
    EXTRA_CONF.get_or_init(|| "idempotency.worker_enabled = on\nidempotency.naptime = '200ms'\n");
    cluster()
}

fn database(name: &str) -> Client {
    let mut admin = server().session();
    for sql in [
        format!("DROP DATABASE IF EXISTS {name}"),
        format!("CREATE DATABASE {name}"),
    ] {
        admin.batch_execute(&sql).expect("database");
    }
    let mut db = server().connect(name);
    db.batch_execute("CREATE EXTENSION idempotency")
        .expect("extension");
    db
}

fn count(client: &mut Client, sql: &str) -> i64 {
    client
        .query_one(sql, &[])
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .get(0)
}

fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{what}: not within 20 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Rows the worker should remove: a finished record, an inbox row and a published message, all
/// expired.
const EXPIRED_ROWS: &str = "
    SELECT idem_claim('w', 'old', 'h', retention => '1 millisecond');
    SELECT idem_complete('w', 'old', '{}');
    SELECT idem_inbox_accept('w', 'old', 'h', retention => '1 millisecond');
    SELECT idem_outbox_ack(ARRAY[idem_outbox_put('w', '1')]);
    UPDATE idempotency.outbox SET created_at = now() - interval '9 days',
           published_at = now() - interval '8 days';";

fn left(db: &mut Client) -> (i64, i64, i64) {
    (
        count(
            db,
            "SELECT count(*) FROM idempotency.requests WHERE scope = 'w'",
        ),
        count(
            db,
            "SELECT count(*) FROM idempotency.inbox WHERE consumer = 'w'",
        ),
        count(
            db,
            "SELECT count(*) FROM idempotency.outbox WHERE topic = 'w'",
        ),
    )
}

/// A role with only the privileges `GRANT ALL` gives adds a trigger that makes it superuser
/// when run by a superuser. The worker must not run it; the other tables are still purged.
#[test]
fn a_trigger_grantee_cannot_borrow_the_worker() {
    let mut db = database("ws_trigger");
    db.batch_execute(
        "DO $$ BEGIN CREATE ROLE mallory LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
         GRANT USAGE ON SCHEMA idempotency TO mallory;
         GRANT ALL ON idempotency.requests TO mallory;
         GRANT CREATE ON SCHEMA public TO mallory;",
    )
    .expect("grants");
    let mut mallory = server().connect_as("ws_trigger", "mallory");
    mallory
        .batch_execute(
            "CREATE FUNCTION public.escalate() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN ALTER ROLE mallory SUPERUSER; RETURN OLD; END $$;
             CREATE TRIGGER escalate BEFORE DELETE ON idempotency.requests
               FOR EACH ROW EXECUTE FUNCTION public.escalate();",
        )
        .expect("mallory's trigger");
    let refused_before = count(
        &mut db,
        "SELECT value FROM idem_metrics() WHERE name = 'maintenance_refused'",
    );
    db.batch_execute(EXPIRED_ROWS).expect("rows");
    wait_for("the inbox and outbox are purged", || {
        let (_, inbox, outbox) = left(&mut db);
        inbox == 0 && outbox == 0
    });
    wait_for("the refusal is counted", || {
        count(
            &mut db,
            "SELECT value FROM idem_metrics() WHERE name = 'maintenance_refused'",
        ) > refused_before
    });
    let superuser: bool = db
        .query_one(
            "SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'",
            &[],
        )
        .expect("rolsuper")
        .get(0);
    assert!(
        !superuser,
        "the worker ran mallory's trigger as a superuser"
    );
    assert_eq!(left(&mut db).0, 1, "the refused table is left as it is");
    let log = server().log();
    assert!(
        log.contains("does not touch idempotency.requests: trigger \"escalate\""),
        "no WARNING in the server log"
    );
    // Once the trigger is gone, the record is purged.
    db.batch_execute("DROP TRIGGER escalate ON idempotency.requests")
        .expect("drop trigger");
    wait_for("the record is purged", || left(&mut db).0 == 0);
}

/// The worker writes as the table's owner: a trigger of the owner's runs as the owner, under a
/// security-restricted operation with a safe search_path.
#[test]
fn the_worker_writes_as_the_table_owner() {
    let mut db = database("ws_owner");
    db.batch_execute(
        "DO $$ BEGIN CREATE ROLE alice NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
         GRANT USAGE ON SCHEMA idempotency TO alice;
         ALTER TABLE idempotency.requests OWNER TO alice;
         CREATE TABLE public.audit (who text, restricted text, path text);
         GRANT INSERT ON public.audit TO alice;
         CREATE FUNCTION public.note() RETURNS trigger LANGUAGE plpgsql AS $$
           DECLARE restricted text := 'no';
           BEGIN
             BEGIN SET ROLE NONE; EXCEPTION WHEN insufficient_privilege THEN restricted := 'yes'; END;
             INSERT INTO public.audit VALUES (current_user, restricted, current_setting('search_path'));
             RETURN OLD;
           END $$;
         ALTER FUNCTION public.note() OWNER TO alice;
         CREATE TRIGGER note BEFORE DELETE ON idempotency.requests
           FOR EACH ROW EXECUTE FUNCTION public.note();",
    )
    .expect("owner and trigger");
    db.batch_execute(EXPIRED_ROWS).expect("rows");
    wait_for("the record is purged", || left(&mut db).0 == 0);
    let row = db
        .query_one("SELECT who, restricted, path FROM public.audit", &[])
        .expect("audit row");
    let (who, restricted, path): (String, String, String) = (row.get(0), row.get(1), row.get(2));
    assert_eq!(who, "alice", "the trigger ran as the table's owner");
    assert_eq!(restricted, "yes", "inside a security-restricted operation");
    assert_eq!(path, "pg_catalog, pg_temp");
}

/// A step that fails (here: reclaim and purge of a table locked by someone else, past the
/// worker's lock_timeout) does not skip the inbox and outbox purges after it.
#[test]
fn a_failing_step_does_not_skip_the_others() {
    let mut db = database("ws_isolation");
    db.batch_execute(EXPIRED_ROWS).expect("rows");
    let mut holder = server().connect("ws_isolation");
    holder
        .batch_execute("BEGIN; LOCK TABLE idempotency.requests IN ACCESS EXCLUSIVE MODE")
        .expect("lock");
    let mut other = server().connect("ws_isolation");
    wait_for("the inbox and outbox are purged", || {
        let inbox = count(
            &mut other,
            "SELECT count(*) FROM idempotency.inbox WHERE consumer = 'w'",
        );
        let outbox = count(
            &mut other,
            "SELECT count(*) FROM idempotency.outbox WHERE topic = 'w'",
        );
        inbox == 0 && outbox == 0
    });
    holder.batch_execute("COMMIT").expect("unlock");
    let log = server().log();
    assert!(
        log.contains("idem_reclaim in database \"ws_isolation\" failed")
            && log.contains("SQLSTATE 55P03"),
        "the failed step is reported"
    );
    wait_for("the record is purged once the lock is gone", || {
        left(&mut db).0 == 0
    });
}
