//! What the maintenance worker runs as (issue #11, finding 2) and that one failing step does not
//! skip the others (finding 8). A cluster of its own, worker on, short naptime; every test has a
//! database of its own.

use crate::common;

use std::time::Duration;

use common::{Client, count, wait_for_every, worker_cluster};

fn database(name: &str) -> Client {
    worker_cluster().database(name)
}

/// Generous: six tests share one server, each database waits its turn for a worker round, and
/// CI machines are loaded (20 s was missed once on PG18).
const ROUND: Duration = Duration::from_secs(60);

fn wait_for_round(what: &str, check: impl FnMut() -> bool) {
    wait_for_every(what, ROUND, Duration::from_millis(50), check);
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

fn is_superuser(db: &mut Client, role: &str) -> bool {
    db.query_one("SELECT rolsuper FROM pg_roles WHERE rolname = $1", &[&role])
        .expect("rolsuper")
        .get(0)
}

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

/// With expired rows in all three tables, the worker purges the two it may touch, warns
/// `warning` about table `refused` (0 requests, 1 inbox, 2 outbox), leaves it as it is, and
/// `role`'s trigger never made `role` a superuser (`why` if it did).
fn refused_and_the_rest_purged(
    db: &mut Client,
    refused: usize,
    warning: &str,
    role: &str,
    why: &str,
) {
    let rows = |db: &mut Client| {
        let (requests, inbox, outbox) = left(db);
        [requests, inbox, outbox]
    };
    db.batch_execute(EXPIRED_ROWS).expect("rows");
    wait_for_round("the other tables are purged", || {
        let rows = rows(db);
        (0..3).all(|t| t == refused || rows[t] == 0)
    });
    wait_for_round("the warning", || worker_cluster().log().contains(warning));
    assert!(!is_superuser(db, role), "{why}");
    assert_eq!(rows(db)[refused], 1, "the refused table is left as it is");
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
    let mut mallory = worker_cluster().connect_as("ws_trigger", "mallory");
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
    wait_for_round("the inbox and outbox are purged", || {
        let (_, inbox, outbox) = left(&mut db);
        inbox == 0 && outbox == 0
    });
    wait_for_round("the refusal is counted", || {
        count(
            &mut db,
            "SELECT value FROM idem_metrics() WHERE name = 'maintenance_refused'",
        ) > refused_before
    });
    let superuser = is_superuser(&mut db, "mallory");
    assert!(
        !superuser,
        "the worker ran mallory's trigger as a superuser"
    );
    assert_eq!(left(&mut db).0, 1, "the refused table is left as it is");
    let log = worker_cluster().log();
    assert!(
        log.contains("does not touch idempotency.requests: trigger \"escalate\""),
        "no WARNING in the server log"
    );
    // Once the trigger is gone, the record is purged.
    db.batch_execute("DROP TRIGGER escalate ON idempotency.requests")
        .expect("drop trigger");
    wait_for_round("the record is purged", || left(&mut db).0 == 0);
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
    wait_for_round("the record is purged", || left(&mut db).0 == 0);
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
    let mut holder = worker_cluster().connect("ws_isolation");
    holder
        .batch_execute("BEGIN; LOCK TABLE idempotency.requests IN ACCESS EXCLUSIVE MODE")
        .expect("lock");
    // First a round under the lock must report the failed step. Only then are new expired
    // inbox and outbox rows added: every round from now on, while the lock is held, fails its
    // reclaim, so their purge shows the later steps were not skipped. (Rows added before the
    // lock could be purged by a round that ran before it, which proves nothing.)
    wait_for_round("the failed step is reported", || {
        let log = worker_cluster().log();
        log.contains("idem_reclaim in database \"ws_isolation\" failed")
            && log.contains("SQLSTATE 55P03")
    });
    let mut other = worker_cluster().connect("ws_isolation");
    other
        .batch_execute(
            "SELECT idem_inbox_accept('w2', 'old', 'h', retention => '1 millisecond');
             SELECT idem_outbox_ack(ARRAY[idem_outbox_put('w2', '1')]);
             UPDATE idempotency.outbox SET created_at = now() - interval '9 days',
                    published_at = now() - interval '8 days' WHERE topic = 'w2';",
        )
        .expect("rows under the lock");
    wait_for_round(
        "the inbox and outbox are purged while the lock is held",
        || {
            let inbox = count(
                &mut other,
                "SELECT count(*) FROM idempotency.inbox WHERE consumer = 'w2'",
            );
            let outbox = count(
                &mut other,
                "SELECT count(*) FROM idempotency.outbox WHERE topic = 'w2'",
            );
            inbox == 0 && outbox == 0
        },
    );
    holder.batch_execute("COMMIT").expect("unlock");
    wait_for_round("the record is purged once the lock is gone", || {
        left(&mut db).0 == 0
    });
}

/// The grantee's code in a WHEN condition of a trigger whose function the owner owns: the
/// condition runs with the worker's rights, so such a table is refused too.
#[test]
fn a_when_condition_cannot_smuggle_code_into_a_trigger_of_the_owner() {
    let mut db = database("ws_when");
    db.batch_execute(
        "DO $$ BEGIN CREATE ROLE eve LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
         GRANT USAGE ON SCHEMA idempotency TO eve;
         GRANT TRIGGER ON idempotency.outbox TO eve;
         GRANT CREATE ON SCHEMA public TO eve;
         CREATE FUNCTION public.keep_row() RETURNS trigger LANGUAGE plpgsql
           AS $$ BEGIN RETURN OLD; END $$;",
    )
    .expect("set-up");
    let mut eve = worker_cluster().connect_as("ws_when", "eve");
    eve.batch_execute(
        "CREATE FUNCTION public.eve_escalate() RETURNS boolean LANGUAGE plpgsql AS
           $$ BEGIN EXECUTE 'ALTER ROLE eve SUPERUSER'; RETURN true; END $$;
         CREATE TRIGGER sneaky BEFORE DELETE ON idempotency.outbox FOR EACH ROW
           WHEN (public.eve_escalate()) EXECUTE FUNCTION public.keep_row();",
    )
    .expect("eve's trigger");
    refused_and_the_rest_purged(
        &mut db,
        2,
        "does not touch idempotency.outbox: trigger \"sneaky\" has a WHEN condition",
        "eve",
        "the WHEN condition ran as a superuser",
    );
}

/// Arguments can steer even a function of the owner: contrib's check_foreign_key runs SQL
/// built from them. Ignored where contrib's refint is not installed (build.rs).
#[test]
#[cfg_attr(idem_no_refint, ignore = "contrib's refint is not installed")]
fn trigger_arguments_cannot_steer_a_function_of_the_owner() {
    let mut db = database("ws_args");
    db.batch_execute(
        "CREATE EXTENSION refint;
         DO $$ BEGIN CREATE ROLE trent LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
         GRANT USAGE ON SCHEMA idempotency TO trent;
         GRANT TRIGGER ON idempotency.requests TO trent;
         CREATE TABLE public.victim (scope text);",
    )
    .expect("set-up");
    let mut trent = worker_cluster().connect_as("ws_args", "trent");
    trent
        .batch_execute(
            "CREATE TRIGGER injected BEFORE DELETE ON idempotency.requests FOR EACH ROW
               EXECUTE FUNCTION public.check_foreign_key(1, 'cascade', 'scope',
                 'public.victim WHERE false; ALTER ROLE trent SUPERUSER; DELETE FROM public.victim',
                 'scope');",
        )
        .expect("trent's trigger");
    // refint is an extension: refused as such (before its arguments are looked at).
    refused_and_the_rest_purged(
        &mut db,
        0,
        "does not touch idempotency.requests: trigger \"injected\"",
        "trent",
        "the arguments steered the owner's function",
    );
}

/// A deferred trigger of the owner would fire at commit, after the switch back to the
/// superuser; Postgres refuses to defer one in a security-restricted operation, so that step
/// fails (a WARNING every round) and the others go on.
#[test]
fn a_deferred_trigger_of_the_owner_does_not_fire_as_the_worker() {
    let mut db = database("ws_deferred");
    db.batch_execute(
        "DO $$ BEGIN CREATE ROLE late NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
         GRANT USAGE ON SCHEMA idempotency TO late;
         ALTER TABLE idempotency.outbox OWNER TO late;
         CREATE TABLE public.audit (who text);
         GRANT INSERT ON public.audit TO PUBLIC;
         CREATE FUNCTION public.audit_outbox() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN INSERT INTO public.audit VALUES (current_user); RETURN OLD; END $$;
         ALTER FUNCTION public.audit_outbox() OWNER TO late;
         CREATE CONSTRAINT TRIGGER audit_at_commit AFTER DELETE ON idempotency.outbox
           DEFERRABLE INITIALLY DEFERRED
           FOR EACH ROW EXECUTE FUNCTION public.audit_outbox();",
    )
    .expect("the owner's deferred trigger");
    db.batch_execute(EXPIRED_ROWS).expect("rows");
    wait_for_round("the inbox is purged", || left(&mut db).1 == 0);
    wait_for_round("the failure is logged", || {
        worker_cluster().log().contains(
            "idem_outbox_purge in database \"ws_deferred\" failed: cannot fire deferred trigger \
             within security-restricted operation (SQLSTATE 42501)",
        )
    });
    assert_eq!(count(&mut db, "SELECT count(*) FROM public.audit"), 0);
    assert_eq!(left(&mut db).2, 1);
}

/// A function the owner did write, steered by a single trigger argument: the owner's function
/// runs `TG_ARGV[0]` as SQL, and a TRIGGER grantee attaches it with one argument of its own.
/// Any argument at all is refused (one is enough), and the owner's SQL never runs as the worker.
#[test]
fn a_single_trigger_argument_is_refused_too() {
    let mut db = database("ws_one_arg");
    db.batch_execute(
        "DO $$ BEGIN CREATE ROLE tess LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
         GRANT USAGE ON SCHEMA idempotency TO tess;
         GRANT TRIGGER ON idempotency.requests TO tess;
         CREATE FUNCTION public.audit_with() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN EXECUTE TG_ARGV[0]; RETURN OLD; END $$;",
    )
    .expect("the owner's function");
    let mut tess = worker_cluster().connect_as("ws_one_arg", "tess");
    tess.batch_execute(
        "CREATE TRIGGER steered BEFORE DELETE ON idempotency.requests FOR EACH ROW
           EXECUTE FUNCTION public.audit_with('ALTER ROLE tess SUPERUSER');",
    )
    .expect("tess's trigger");
    refused_and_the_rest_purged(
        &mut db,
        0,
        "does not touch idempotency.requests: trigger \"steered\" passes arguments",
        "tess",
        "one argument steered the owner's function",
    );
}

/// A TRIGGER grantee attaches a function the (superuser) owner "owns" only because it is built
/// in or comes with an extension: contrib's tcn would NOTIFY every purged inbox row to anyone
/// listening. The worker refuses the table; the other tables are still purged.
#[test]
fn an_extension_or_built_in_trigger_function_is_not_the_owners_own() {
    let mut db = database("ws_tcn");
    let tcn = count(
        &mut db,
        "SELECT count(*) FROM pg_available_extensions WHERE name = 'tcn'",
    ) > 0;
    db.batch_execute(
        "DO $$ BEGIN CREATE ROLE eve LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
         GRANT USAGE ON SCHEMA idempotency TO eve;
         GRANT TRIGGER ON idempotency.inbox, idempotency.requests TO eve;",
    )
    .expect("set-up");
    if tcn {
        db.batch_execute("CREATE EXTENSION tcn").expect("tcn");
    }
    let mut eve = worker_cluster().connect_as("ws_tcn", "eve");
    // Built in, in pg_catalog: harmless itself, but owned by the bootstrap superuser.
    eve.batch_execute(
        "CREATE TRIGGER builtin BEFORE UPDATE ON idempotency.requests FOR EACH ROW
           EXECUTE FUNCTION pg_catalog.suppress_redundant_updates_trigger();",
    )
    .expect("eve's built-in trigger");
    if tcn {
        eve.batch_execute(
            "CREATE TRIGGER leak AFTER DELETE ON idempotency.inbox FOR EACH ROW
               EXECUTE FUNCTION public.triggered_change_notification();",
        )
        .expect("eve's tcn trigger");
    }
    db.batch_execute(EXPIRED_ROWS).expect("rows");
    wait_for_round("the outbox is purged", || left(&mut db).2 == 0);
    // Each refused table of the database gets its own warning (once per worker process), the
    // second one too: a memory keyed by database alone would keep only the first.
    wait_for_round("the warnings", || {
        let log = worker_cluster().log();
        log.contains("does not touch idempotency.requests: trigger \"builtin\" runs")
            && (!tcn || log.contains("does not touch idempotency.inbox: trigger \"leak\" runs"))
    });
    // A few more rounds: the inbox's expired row must still be there after them.
    std::thread::sleep(Duration::from_secs(2));
    let (requests, inbox, _) = left(&mut db);
    assert_eq!(
        requests, 1,
        "requests was purged through a built-in trigger"
    );
    if tcn {
        assert_eq!(inbox, 1, "the inbox was purged through tcn's trigger");
    } else {
        eprintln!("tcn is not installed: only the built-in case ran");
    }
}
