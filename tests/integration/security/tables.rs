//! Regression tests of the security audit (issue #11) that need real concurrent sessions:
//! the table's shape compared by type and expression (finding 5), the claim's private lock
//! class (7), leases by the clock, schema USAGE and the P4002 DETAIL (8); decisions made after
//! the table lock (4), on both editions: committed.rs. Each scenario that alters the table gets
//! a database of its own.

use crate::common;

use common::{Client, answer, sqlstate};

crate::own_database!();

/// The owner changed the table; every claim must do what SQL does, and the server survives.
#[test]
fn altered_columns_and_constraints_are_honoured() {
    let mut db = cluster().database("sec_shape");
    let claim = |db: &mut Client, key: &str| {
        answer(
            db,
            &format!("SELECT outcome::text FROM idem_claim('s', '{key}', 'h')"),
        )
    };
    // A narrower type: SQL refuses the value (the direct path stored 10 characters).
    db.batch_execute("ALTER TABLE idempotency.requests ALTER COLUMN key TYPE varchar(5)")
        .expect("varchar");
    assert_eq!(claim(&mut db, "ten-chars!"), "ERROR 22001");
    assert_eq!(claim(&mut db, "five5"), "new_claim");
    db.batch_execute("ALTER TABLE idempotency.requests ALTER COLUMN key TYPE text")
        .expect("text again");

    // attempt as int8 and numeric (numeric crashed the server through the direct read).
    db.batch_execute(
        "ALTER EXTENSION idempotency DROP VIEW idempotency.stats; DROP VIEW idempotency.stats",
    )
    .expect("the view that depends on attempt");
    for ty in ["int8", "numeric"] {
        db.batch_execute(&format!(
            "ALTER TABLE idempotency.requests ALTER COLUMN attempt TYPE {ty}"
        ))
        .expect("attempt type");
        let key = format!("attempt-{ty}");
        assert_eq!(claim(&mut db, &key), "new_claim");
        db.execute(&format!("SELECT idem_fail('s', '{key}', true)"), &[])
            .expect("fail");
        let again = answer(
            &mut db,
            &format!("SELECT outcome::text || ' ' || attempt FROM idem_claim('s', '{key}', 'h')"),
        );
        assert_eq!(again, "retryable_failure 2", "{ty}");
        let stored: String = db
            .query_one(
                &format!("SELECT attempt::text FROM idempotency.requests WHERE key = '{key}'"),
                &[],
            )
            .expect("stored")
            .get(0);
        assert_eq!(stored, "2", "{ty}");
    }
    db.batch_execute("ALTER TABLE idempotency.requests ALTER COLUMN attempt TYPE int4")
        .expect("int4 again");

    // A CHECK replaced by another of the same name.
    db.batch_execute(
        "ALTER TABLE idempotency.requests DROP CONSTRAINT requests_attempt_check,
           ADD CONSTRAINT requests_attempt_check CHECK (attempt >= 1 AND key <> 'blocked')",
    )
    .expect("replace check");
    assert_eq!(claim(&mut db, "blocked"), "ERROR 23514");
    assert_eq!(claim(&mut db, "allowed"), "new_claim");

    // A default the owner added is what SQL would store.
    db.batch_execute(
        "ALTER TABLE idempotency.requests DROP CONSTRAINT requests_attempt_check,
           ADD CONSTRAINT requests_attempt_check CHECK (attempt >= 1);
         ALTER TABLE idempotency.requests ALTER COLUMN recovery_point SET DEFAULT 'from-default'",
    )
    .expect("default");
    assert_eq!(claim(&mut db, "defaulted"), "new_claim");
    let point: Option<String> = db
        .query_one(
            "SELECT recovery_point FROM idempotency.requests WHERE key = 'defaulted'",
            &[],
        )
        .expect("default stored")
        .get(0);
    assert_eq!(point.as_deref(), Some("from-default"));
    // Back as created: the direct path is taken again.
    db.batch_execute("ALTER TABLE idempotency.requests ALTER COLUMN recovery_point DROP DEFAULT")
        .expect("drop default");
    let shape: Vec<(String, String)> = db
        .query(
            "SELECT item, value FROM tests.requests_shape() WHERE item IN ('readable', 'writable')",
            &[],
        )
        .expect("shape")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        shape,
        vec![
            ("readable".into(), "true".into()),
            ("writable".into(), "true".into())
        ]
    );
}

/// Any role could block new keys by holding `pg_advisory_lock(idem_lock_key(...))`.
#[test]
fn advisory_locks_of_other_roles_do_not_block_claims() {
    let mut db = cluster().database("sec_locks");
    db.batch_execute("CREATE ROLE nobody_at_all LOGIN")
        .expect("role");
    let mut nobody = cluster().connect_as("sec_locks", "nobody_at_all");
    nobody
        .batch_execute(
            "SELECT pg_advisory_lock(idem_lock_key('s', 'k'));
             SELECT pg_advisory_lock((idem_lock_key('s', 'k') >> 32)::int4,
                                     (idem_lock_key('s', 'k') & 4294967295)::bit(32)::int4);",
        )
        .expect("a role without grants takes the locks");
    let mut app = cluster().connect("sec_locks");
    app.batch_execute("BEGIN").expect("begin");
    assert_eq!(
        answer(
            &mut app,
            "SELECT outcome::text FROM idem_claim('s', 'k', 'h')"
        ),
        "new_claim"
    );
    // The claim's own lock: class 0x4944 (18756), the two halves of idem_lock_key(scope, key).
    let mine: i64 = app
        .query_one(
            "SELECT count(*) FROM pg_locks l
             WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid() AND l.objsubid = 18756
               AND l.classid::int8 = (idem_lock_key('s', 'k') >> 32) & 4294967295
               AND l.objid::int8 = idem_lock_key('s', 'k') & 4294967295",
            &[],
        )
        .expect("pg_locks")
        .get(0);
    assert_eq!(mine, 1);
    // Another claimer of the same key still sees the uncommitted claim.
    let mut other = cluster().connect("sec_locks");
    assert_eq!(
        answer(
            &mut other,
            "SELECT outcome::text FROM idem_claim('s', 'k', 'h')"
        ),
        "processing_active"
    );
    app.batch_execute("COMMIT").expect("commit");
}

/// A claim made late in a long transaction gets a lease that starts at the claim.
#[test]
fn leases_start_at_the_claim_not_the_transaction() {
    let mut db = cluster().database("sec_lease");
    for (isolation, key) in [("read committed", "direct"), ("repeatable read", "sql")] {
        db.batch_execute(&format!(
            "BEGIN ISOLATION LEVEL {isolation}; SELECT pg_sleep(1.2)"
        ))
        .expect("long transaction");
        let live: bool = db
            .query_one(
                &format!(
                    "SELECT locked_until > clock_timestamp() FROM idem_claim('s', '{key}', 'h',
                       lease => '1 second')"
                ),
                &[],
            )
            .expect("claim")
            .get(0);
        assert!(
            live,
            "{isolation}: the lease had already ended when the claim returned"
        );
        let renewed: bool = db
            .query_one(
                &format!(
                    "SELECT idem_checkpoint('s', '{key}', 'p', lease => '1 second') > clock_timestamp()"
                ),
                &[],
            )
            .expect("checkpoint")
            .get(0);
        assert!(renewed, "{isolation}: checkpoint renews from now");
        db.batch_execute("COMMIT").expect("commit");
        let mut other = cluster().connect("sec_lease");
        assert_eq!(
            answer(
                &mut other,
                &format!("SELECT outcome::text FROM idem_claim('s', '{key}', 'h')")
            ),
            "processing_active",
            "{isolation}"
        );
    }
}

/// Table grants without USAGE on schema idempotency are not enough, on any path, also when a
/// kept plan of a privileged role exists in the same backend.
#[test]
fn schema_usage_is_required() {
    let mut db = cluster().database("sec_usage");
    db.batch_execute(
        "DO $$ BEGIN CREATE ROLE no_usage LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
         GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA idempotency TO no_usage;
         SELECT idem_claim('s', 'held', 'h');
         SELECT idem_checkpoint('s', 'held', 'p');
         SELECT idem_claim('s', 'done', 'h');
         SELECT idem_complete('s', 'done', '{}');",
    )
    .expect("set-up and kept plans");
    db.batch_execute("SET ROLE no_usage").expect("role");
    for call in [
        "SELECT outcome::text FROM idem_claim('s', 'done', 'h')",
        "SELECT outcome::text FROM idem_claim('s', 'new', 'h')",
        "SELECT idem_complete('s', 'held', '{}')::text",
        "SELECT idem_fail('s', 'held', true)::text",
        "SELECT idem_checkpoint('s', 'held', 'p')::text",
        "SELECT idem_forget('s', 'held')::text",
        "SELECT idem_inbox_accept('c', 'm', 'h')::text",
        "SELECT idem_advance('s', 'e', 1)::text",
        "SELECT idem_outbox_put('t', '{}')::text",
    ] {
        assert_eq!(answer(&mut db, call), "ERROR 42501", "{call}");
    }
    db.batch_execute("RESET ROLE").expect("reset");
    let rows: i64 = db
        .query_one("SELECT count(*) FROM idempotency.requests", &[])
        .expect("count")
        .get(0);
    assert_eq!(rows, 2, "nothing was written");
}

/// P4002's DETAIL shows this request's hash, never the stored one (another caller's).
#[test]
fn hash_mismatch_does_not_show_the_stored_hash() {
    let mut db = cluster().database("sec_detail");
    db.batch_execute("SELECT idem_claim('tenant', 'k', 'secret-hash-of-tenant-a')")
        .expect("claim");
    let err = db
        .query_one("SELECT idem_claim('tenant', 'k', 'guess-of-tenant-b')", &[])
        .expect_err("mismatch");
    assert_eq!(sqlstate(&err), "P4002");
    let detail = err
        .as_db_error()
        .and_then(|e| e.detail())
        .unwrap_or_default()
        .to_string();
    assert!(detail.contains("guess-of-tenant-b"), "{detail}");
    assert!(!detail.contains("secret-hash-of-tenant-a"), "{detail}");
}
