//! The direct write path (src/direct/writer.rs) against real sessions: when it is taken, when it steps
//! aside for SQL, and what concurrent writers see. Counted with `idem_metrics()`, whose
//! counters are the cluster's: the tests of this binary take turns (`SERIAL`).

use crate::common;

use std::thread;
use std::time::Duration;

use common::{Client, claim, claim_attempt, metrics, sqlstate};

crate::own_database!(crate::common::counted_cluster);

fn writes(client: &mut Client) -> (i64, i64) {
    let m = metrics(client);
    (m["writes_direct"], m["writes_sql"])
}

/// Claim and complete a new key; (direct, sql) writes it took.
fn claim_and_complete(client: &mut Client, scope: &str, key: &str) -> (i64, i64) {
    let before = writes(client);
    assert_eq!(claim(client, scope, key, "h"), "new_claim");
    client
        .execute(
            "SELECT idem_complete($1, $2, '{\"ok\": true}')",
            &[&scope, &key],
        )
        .expect("complete");
    let replayed: String = client
        .query_one(
            "SELECT response::text FROM idem_claim($1, $2, 'h') WHERE outcome = 'replay_success'",
            &[&scope, &key],
        )
        .expect("replay")
        .get(0);
    assert_eq!(replayed, r#"{"ok": true}"#);
    let after = writes(client);
    (after.0 - before.0, after.1 - before.1)
}

#[test]
fn direct_writes_and_when_they_step_aside() {
    let _turn = common::counted_turn();
    let mut c = cluster().session();

    // The table as the extension made it: both writes are direct.
    assert_eq!(claim_and_complete(&mut c, "wp", "plain"), (2, 0));
    let fail_before = writes(&mut c);
    c.query_one("SELECT * FROM idem_claim('wp', 'failing', 'h')", &[])
        .expect("claim");
    c.execute("SELECT idem_fail('wp', 'failing', false, 'E1', 'no')", &[])
        .expect("fail");
    let fail_after = writes(&mut c);
    assert_eq!(fail_after.0 - fail_before.0, 2);
    let row = c
        .query_one(
            "SELECT status::text, failure_code, failure_message, locked_until IS NULL, \
             expires_at > now() FROM idempotency.requests WHERE scope = 'wp' AND key = 'failing'",
            &[],
        )
        .expect("row");
    assert_eq!(row.get::<_, String>(0), "failed_final");
    assert_eq!(row.get::<_, String>(1), "E1");
    assert_eq!(row.get::<_, String>(2), "no");
    assert!(row.get::<_, bool>(3) && row.get::<_, bool>(4));

    // A trigger someone added runs: its writes go through SQL.
    c.batch_execute(
        "CREATE TABLE audit (op text, key text);
         CREATE FUNCTION audit_requests() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN INSERT INTO audit VALUES (TG_OP, NEW.key); RETURN NEW; END $$;
         CREATE TRIGGER audit AFTER INSERT OR UPDATE ON idempotency.requests
           FOR EACH ROW EXECUTE FUNCTION audit_requests();",
    )
    .expect("trigger");
    assert_eq!(claim_and_complete(&mut c, "wp", "audited"), (0, 2));
    let audited: i64 = c
        .query_one("SELECT count(*) FROM audit WHERE key = 'audited'", &[])
        .expect("audit")
        .get(0);
    assert_eq!(audited, 2, "the trigger saw the insert and the update");
    c.batch_execute("DROP TRIGGER audit ON idempotency.requests")
        .expect("drop trigger");
    assert_eq!(claim_and_complete(&mut c, "wp", "after-trigger"), (2, 0));

    // A CHECK constraint someone added is enforced.
    c.batch_execute(
        "ALTER TABLE idempotency.requests ADD CONSTRAINT requests_named CHECK (claimed_by IS NOT NULL) NOT VALID",
    )
    .expect("constraint");
    let err = c
        .query_one("SELECT * FROM idem_claim('wp', 'unnamed', 'h')", &[])
        .expect_err("the added constraint must hold");
    assert_eq!(sqlstate(&err), "23514");
    c.query_one(
        "SELECT * FROM idem_claim('wp', 'named', 'h', claimed_by => 'worker-1')",
        &[],
    )
    .expect("a claim that satisfies it");
    c.batch_execute("ALTER TABLE idempotency.requests DROP CONSTRAINT requests_named")
        .expect("drop constraint");
    assert_eq!(claim_and_complete(&mut c, "wp", "after-constraint"), (2, 0));

    // REPEATABLE READ and SERIALIZABLE write through SQL (it raises their serialization errors).
    for level in ["REPEATABLE READ", "SERIALIZABLE"] {
        let before = writes(&mut c);
        let mut tx = c
            .build_transaction()
            .isolation_level(if level == "SERIALIZABLE" {
                postgres::IsolationLevel::Serializable
            } else {
                postgres::IsolationLevel::RepeatableRead
            })
            .start()
            .expect("begin");
        tx.query_one("SELECT * FROM idem_claim('wp', $1, 'h')", &[&level])
            .expect("claim");
        tx.execute("SELECT idem_complete('wp', $1, '1')", &[&level])
            .expect("complete");
        tx.commit().expect("commit");
        let after = writes(&mut c);
        assert_eq!((after.0 - before.0, after.1 - before.1), (0, 2), "{level}");
    }

    // A read-only transaction: a replay is answered, a new claim is refused with 25006.
    {
        let mut tx = c
            .build_transaction()
            .read_only(true)
            .start()
            .expect("begin read only");
        let replay: String = tx
            .query_one(
                "SELECT outcome::text FROM idem_claim('wp', 'plain', 'h')",
                &[],
            )
            .expect("replay in a read-only transaction")
            .get(0);
        assert_eq!(replay, "replay_success");
        let err = tx
            .query_one("SELECT * FROM idem_claim('wp', 'read-only', 'h')", &[])
            .expect_err("no new claim in a read-only transaction");
        assert_eq!(sqlstate(&err), "25006");
    }

    // A role without UPDATE on the table: complete goes to SQL, which refuses with 42501.
    c.batch_execute(
        "CREATE ROLE wp_reader LOGIN;
         GRANT USAGE ON SCHEMA idempotency TO wp_reader;
         GRANT SELECT, INSERT ON idempotency.requests TO wp_reader;",
    )
    .expect("role");
    let mut reader = cluster().connect_as(&cluster().name, "wp_reader");
    reader
        .query_one("SELECT * FROM idem_claim('wp', 'ro', 'h')", &[])
        .expect("claim with INSERT");
    let err = reader
        .execute("SELECT idem_complete('wp', 'ro', '1')", &[])
        .expect_err("no UPDATE privilege");
    assert_eq!(sqlstate(&err), "42501");
}

/// A late completion that runs into a takeover in progress waits for it (as an UPDATE would),
/// then is fenced: the row changed under the direct write, which hands over to SQL.
#[test]
fn late_completion_waiting_on_a_takeover_is_fenced() {
    let _turn = common::counted_turn();
    let mut a = cluster().session();
    let mut b = cluster().session();
    a.query_one(
        "SELECT * FROM idem_claim('wp2', 'k', 'h', lease => '200 milliseconds')",
        &[],
    )
    .expect("claim");
    thread::sleep(Duration::from_millis(400));
    let mut tb = b.transaction().expect("begin");
    assert_eq!(
        claim_attempt(&mut tb, "wp2", "k", "h"),
        ("processing_stale".into(), Some(2))
    );

    let late = thread::spawn(move || {
        a.execute("SELECT idem_complete('wp2', 'k', '{\"late\": 1}', 1)", &[])
            .map_err(|e| sqlstate(&e))
    });
    thread::sleep(Duration::from_millis(300));
    assert!(
        !late.is_finished(),
        "the late completion waits for the takeover"
    );
    tb.commit().expect("commit takeover");
    assert_eq!(
        late.join().expect("thread"),
        Err("P4012".to_string()),
        "fenced once the takeover committed"
    );
    b.execute("SELECT idem_complete('wp2', 'k', '{\"by\": 2}', 2)", &[])
        .expect("complete attempt 2");
    let response: String = b
        .query_one(
            "SELECT response::text FROM idem_claim('wp2', 'k', 'h')",
            &[],
        )
        .expect("replay")
        .get(0);
    assert_eq!(response, r#"{"by": 2}"#);
}

/// Two completions of one attempt at once: the second waits for the first, then is a harmless
/// repeat (same response) or refused (another response), never a second effect.
#[test]
fn concurrent_completions_of_one_attempt() {
    let _turn = common::counted_turn();
    for (second, expected) in [("{\"r\": 1}", Ok(())), ("{\"r\": 2}", Err("P4010"))] {
        let mut a = cluster().session();
        let mut b = cluster().session();
        let key = format!("k-{second}");
        a.query_one("SELECT * FROM idem_claim('wp3', $1, 'h')", &[&key])
            .expect("claim");
        let mut ta = a.transaction().expect("begin");
        ta.execute("SELECT idem_complete('wp3', $1, '{\"r\": 1}')", &[&key])
            .expect("first completion");
        let other_key = key.clone();
        let other = thread::spawn(move || {
            b.execute(
                "SELECT idem_complete('wp3', $1, $2::text::jsonb)",
                &[&other_key, &second],
            )
            .map(|_| ())
            .map_err(|e| sqlstate(&e))
        });
        thread::sleep(Duration::from_millis(300));
        assert!(!other.is_finished(), "the second completion waits");
        ta.commit().expect("commit");
        let got = other.join().expect("thread");
        assert_eq!(got, expected.map_err(str::to_string), "second = {second}");
        let mut c = cluster().session();
        let stored: String = c
            .query_one(
                "SELECT response::text FROM idempotency.requests WHERE scope = 'wp3' AND key = $1",
                &[&key],
            )
            .expect("row")
            .get(0);
        assert_eq!(stored, r#"{"r": 1}"#);
    }
}

/// Dropping and creating the extension again in a session that used it: the cached catalog
/// facts, result descriptors and plans follow the new objects.
#[test]
fn extension_recreated_under_a_live_session() {
    let _turn = common::counted_turn();
    let mut c = cluster().session();
    assert_eq!(claim_and_complete(&mut c, "wp4", "before").0, 2);
    c.batch_execute(
        "CREATE FUNCTION wp4_effect(jsonb) RETURNS jsonb LANGUAGE sql AS 'SELECT $1';
         DROP EXTENSION idempotency CASCADE; CREATE EXTENSION idempotency;",
    )
    .expect("recreate");
    assert_eq!(claim_and_complete(&mut c, "wp4", "after"), (2, 0));
    let call: String = c
        .query_one(
            "SELECT outcome::text FROM idem_call('wp4', 'call', '{}', 'wp4_effect(jsonb)'::regprocedure)",
            &[],
        )
        .expect("idem_call after the re-creation")
        .get(0);
    assert_eq!(call, "new_claim");
}
