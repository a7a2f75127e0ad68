//! Decided after the table lock (audit issue #11, finding 4), on both editions: a trigger, a
//! CHECK or a policy that another session commits while a claim waits for the table's lock
//! applies to that claim, even from a backend whose caches were warm. The native edition once
//! judged them from a cache taken before the lock; the portable one runs plain SQL, and this
//! keeps it so. Each scenario gets a database of its own.

use crate::common;

use std::thread;
use std::time::Duration;

use common::{Client, answer, wait_for};

/// A database with one edition installed, and the role that owns its tables.
struct Target {
    cluster: &'static common::Cluster,
    db: String,
    owner: String,
}

impl Target {
    /// `name` with the native extension (created by a superuser) or the portable edition
    /// (installed by the database's owner, who is not one).
    fn new(portable: bool, name: &str) -> Target {
        if portable {
            let cluster = common::bare_cluster();
            let mut db = crate::portable::owned_database(cluster, name);
            db.batch_execute(&common::portable_script(&[]))
                .expect("the portable edition installs");
            return Target {
                cluster,
                db: name.into(),
                owner: format!("{name}_owner"),
            };
        }
        let cluster = common::cluster();
        drop(cluster.database(name));
        Target {
            cluster,
            db: name.into(),
            owner: "postgres".into(),
        }
    }

    fn owner(&self) -> Client {
        self.cluster.connect_as(&self.db, &self.owner)
    }

    fn superuser(&self) -> Client {
        self.cluster.connect(&self.db)
    }

    fn count(&self, sql: &str) -> i64 {
        self.superuser().query_one(sql, &[]).expect("count").get(0)
    }
}

/// Wait until a session of `application_name` waits on a lock.
fn wait_for_lock_wait(observer: &mut Client, application: &str) {
    wait_for(
        &format!("{application} waiting for a lock"),
        Duration::from_secs(20),
        || {
            let waiting: i64 = observer
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity
                     WHERE application_name = $1 AND wait_event_type = 'Lock'",
                    &[&application],
                )
                .expect("pg_stat_activity")
                .get(0);
            waiting > 0
        },
    );
}

/// Run `change` (DDL, as the tables' owner) in a transaction that holds ACCESS EXCLUSIVE on
/// idempotency.requests while a claim of `user`, made by a backend whose caches are warm,
/// waits for that lock; commit it, then return the claim's answer.
fn claim_while_committing(t: &Target, change: &str, claim: &str, user: &str) -> String {
    let mut warm = t.cluster.connect_as(&t.db, user);
    warm.batch_execute("SET application_name = 'in-flight-claim'")
        .expect("name");
    let first = answer(
        &mut warm,
        "SELECT outcome::text FROM idem_claim('warm', 'up', 'h')",
    );
    assert_eq!(first, "new_claim", "{}: the cache warms", t.db);
    let mut ddl = t.owner();
    ddl.batch_execute("BEGIN; LOCK TABLE idempotency.requests IN ACCESS EXCLUSIVE MODE")
        .expect("lock");
    ddl.batch_execute(change).expect("change");
    let claim = claim.to_string();
    let claimer = thread::spawn(move || answer(&mut warm, &claim));
    let mut observer = t.superuser();
    wait_for_lock_wait(&mut observer, "in-flight-claim");
    ddl.batch_execute("COMMIT").expect("commit");
    claimer.join().expect("claimer")
}

fn a_trigger_committed_during_a_claim_fires(portable: bool, name: &str) {
    let t = Target::new(portable, name);
    t.owner()
        .batch_execute(
            "CREATE TABLE public.fired (key text);
             CREATE FUNCTION public.note() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN INSERT INTO public.fired VALUES (NEW.key); RETURN NEW; END $$;",
        )
        .expect("set-up");
    let got = claim_while_committing(
        &t,
        "CREATE TRIGGER note BEFORE INSERT ON idempotency.requests
           FOR EACH ROW EXECUTE FUNCTION public.note()",
        "SELECT outcome::text FROM idem_claim('s', 'in-flight', 'h')",
        &t.owner,
    );
    assert_eq!(got, "new_claim");
    assert_eq!(
        t.count("SELECT count(*) FROM public.fired WHERE key = 'in-flight'"),
        1,
        "the trigger committed before the claim's write must fire"
    );
}

fn a_check_committed_during_a_claim_is_enforced(portable: bool, name: &str) {
    let t = Target::new(portable, name);
    let got = claim_while_committing(
        &t,
        "ALTER TABLE idempotency.requests ADD CONSTRAINT short_keys CHECK (octet_length(key) < 5)",
        "SELECT outcome::text FROM idem_claim('s', 'too-long', 'h')",
        &t.owner,
    );
    assert_eq!(got, "ERROR 23514");
    assert_eq!(
        t.count("SELECT count(*) FROM idempotency.requests WHERE key = 'too-long'"),
        0
    );
}

fn a_policy_committed_during_a_claim_applies(portable: bool, name: &str) {
    let t = Target::new(portable, name);
    t.superuser()
        .batch_execute(
            "DO $$ BEGIN CREATE ROLE sec_app LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;",
        )
        .expect("role");
    t.owner()
        .batch_execute(
            "GRANT USAGE ON SCHEMA idempotency TO sec_app;
             GRANT SELECT, INSERT, UPDATE, DELETE ON idempotency.requests TO sec_app;",
        )
        .expect("grants");
    let got = claim_while_committing(
        &t,
        "ALTER TABLE idempotency.requests ENABLE ROW LEVEL SECURITY;
         CREATE POLICY only_warm ON idempotency.requests USING (scope = 'warm')
           WITH CHECK (scope = 'warm')",
        "SELECT outcome::text FROM idem_claim('other-tenant', 'k', 'h')",
        "sec_app",
    );
    assert_eq!(got, "ERROR 42501", "the new policy refuses the row");
    assert_eq!(
        t.count("SELECT count(*) FROM idempotency.requests WHERE scope = 'other-tenant'"),
        0
    );
}

/// Each scenario on each edition.
macro_rules! both_editions {
    ($($scenario:ident),*) => {
        mod native {
            $(#[test]
            fn $scenario() {
                super::$scenario(false, concat!("sec_n_", stringify!($scenario)));
            })*
        }
        mod portable {
            $(#[test]
            fn $scenario() {
                super::$scenario(true, concat!("sec_p_", stringify!($scenario)));
            })*
        }
    };
}
both_editions!(
    a_trigger_committed_during_a_claim_fires,
    a_check_committed_during_a_claim_is_enforced,
    a_policy_committed_during_a_claim_applies
);

#[test]
fn extension_recreated_during_a_call() {
    let t = Target::new(false, "sec_recreate");
    // A void function: no result row type of the dropped extension to return.
    let got = claim_while_committing(
        &t,
        "DROP EXTENSION idempotency; CREATE EXTENSION idempotency",
        "SELECT idem_complete('s', 'never-claimed', '{}')::text",
        "postgres",
    );
    // The call finds the new table (no record there): never XX000 "could not open relation".
    assert_eq!(got, "ERROR P4010");
    assert_eq!(
        answer(
            &mut t.superuser(),
            "SELECT outcome::text FROM idem_claim('s', 'after', 'h')"
        ),
        "new_claim"
    );
}
