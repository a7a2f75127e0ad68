//! The direct path in the generations layout (src/direct/generations.rs): new records go into
//! the current generation and changes reach a record where it is, without SQL; whatever the
//! layout refuses (a trigger, row-level security on a generation) still goes to SQL, which
//! refuses it (0A000); a table the extension did not make under the table sends reads to SQL.
//! Counted with `idem_metrics()`, whose counters are the cluster's (`counted_turn`).

use crate::common;

use common::{Client, answer, claim, metrics, sqlstate};

crate::own_database!(crate::common::counted_cluster);

fn writes(client: &mut Client) -> (i64, i64) {
    let m = metrics(client);
    (m["writes_direct"], m["writes_sql"])
}

/// The writes (direct, sql) that `run` took.
fn counted(client: &mut Client, run: impl FnOnce(&mut Client)) -> (i64, i64) {
    let before = writes(client);
    run(client);
    let after = writes(client);
    (after.0 - before.0, after.1 - before.1)
}

fn complete(client: &mut Client, key: &str) {
    client
        .execute("SELECT idem_complete('gp', $1, '{\"ok\": 1}')", &[&key])
        .expect("complete");
}

/// Claim and complete a new key, then replay it: (direct, sql) writes.
fn claim_and_complete(client: &mut Client, key: &str) -> (i64, i64) {
    counted(client, |c| {
        assert_eq!(claim(c, "gp", key, "h"), "new_claim");
        complete(c, key);
        assert_eq!(claim(c, "gp", key, "h"), "replay_success");
    })
}

/// The table that holds the record of `key`.
fn table_of(client: &mut Client, key: &str) -> String {
    client
        .query_one(
            "SELECT tableoid::regclass::text FROM idempotency.requests WHERE scope = 'gp' AND key = $1",
            &[&key],
        )
        .expect("the record")
        .get(0)
}

/// One forced rotation step; asked again while `busy` (the worker or autovacuum held a lock).
fn rotate(client: &mut Client) -> String {
    for _ in 0..100 {
        let step: String = client
            .query_one("SELECT idem_rotate(force => true)", &[])
            .expect("rotate")
            .get(0);
        if step != "busy" {
            return step;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("the rotation stayed busy for 5 s");
}

#[test]
fn direct_writes_in_the_generations_layout() {
    let _turn = common::counted_turn();
    let mut c = cluster().session();

    // A record from before the switch stays in the table itself, and is changed there.
    assert_eq!(claim(&mut c, "gp", "before", "h"), "new_claim");
    c.query_one("SELECT idem_set_layout('generations')", &[])
        .expect("switch");
    assert_eq!(counted(&mut c, |c| complete(c, "before")), (1, 0));
    assert_eq!(table_of(&mut c, "before"), "idempotency.requests");

    // New records go into the current generation, directly.
    assert_eq!(claim_and_complete(&mut c, "g1"), (2, 0));
    assert_eq!(table_of(&mut c, "g1"), "idempotency.requests_g1");
    assert_eq!(claim(&mut c, "gp", "moving", "h"), "new_claim");

    // The rotation moves the table's own live rows to the current generation, then makes
    // generation 2 current.
    assert_eq!(rotate(&mut c), "moved 1");
    assert_eq!(table_of(&mut c, "before"), "idempotency.requests_g1");
    assert_eq!(rotate(&mut c), "switched");
    assert_eq!(claim_and_complete(&mut c, "g2"), (2, 0));
    assert_eq!(table_of(&mut c, "g2"), "idempotency.requests_g2");
    assert_eq!(claim(&mut c, "gp", "g1", "h"), "replay_success");
    assert_eq!(claim(&mut c, "gp", "before", "h"), "replay_success");
    // Generation 3, then back to 1: its live records move to 3 first.
    assert_eq!(rotate(&mut c), "switched");
    assert_eq!(rotate(&mut c), "moved 3");
    assert_eq!(rotate(&mut c), "switched");
    assert_eq!(table_of(&mut c, "moving"), "idempotency.requests_g3");
    // A change of a moved record happens where it is now.
    assert_eq!(counted(&mut c, |c| complete(c, "moving")), (1, 0));
    assert_eq!(table_of(&mut c, "moving"), "idempotency.requests_g3");
    assert_eq!(claim_and_complete(&mut c, "g1-again"), (2, 0));
    assert_eq!(table_of(&mut c, "g1-again"), "idempotency.requests_g1");

    // A trigger on a generation: SQL refuses new records (0A000), replays are still answered.
    c.batch_execute(
        "CREATE FUNCTION gp_noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
         CREATE TRIGGER gp_noop BEFORE INSERT ON idempotency.requests_g2
           FOR EACH ROW EXECUTE FUNCTION gp_noop();",
    )
    .expect("trigger");
    let refused = counted(&mut c, |c| {
        let outcome = answer(
            c,
            "SELECT outcome::text FROM idem_claim('gp', 'trigger', 'h')",
        );
        assert_eq!(outcome, "ERROR 0A000");
    });
    assert_eq!(refused, (0, 0));
    assert_eq!(claim(&mut c, "gp", "g2", "h"), "replay_success");
    c.batch_execute("DROP TRIGGER gp_noop ON idempotency.requests_g2")
        .expect("drop trigger");
    assert_eq!(claim_and_complete(&mut c, "after-trigger"), (2, 0));

    // Only a rotation changes the current generation: by hand it is refused (55000); the
    // window may change.
    assert_eq!(
        answer(
            &mut c,
            "UPDATE idempotency.layout SET current_generation = 2 RETURNING 'x'"
        ),
        "ERROR 55000"
    );
    assert_eq!(
        answer(&mut c, "DELETE FROM idempotency.layout RETURNING 'x'"),
        "ERROR 55000"
    );
    let err = c
        .batch_execute("TRUNCATE idempotency.layout")
        .expect_err("refused");
    assert_eq!(sqlstate(&err), "55000");
    c.batch_execute("UPDATE idempotency.layout SET generation_window = '2 days'")
        .expect("a new window");

    // Row-level security on a generation: the same.
    c.batch_execute("ALTER TABLE idempotency.requests_g3 ENABLE ROW LEVEL SECURITY")
        .expect("rls");
    assert_eq!(
        answer(
            &mut c,
            "SELECT outcome::text FROM idem_claim('gp', 'rls', 'h')"
        ),
        "ERROR 0A000"
    );
    c.batch_execute("ALTER TABLE idempotency.requests_g3 DISABLE ROW LEVEL SECURITY")
        .expect("no rls");

    // A policy on the table, row-level security off: the layout refuses it for everyone, so
    // the direct path must not take the owner's claim (SQL refuses it).
    c.batch_execute("CREATE POLICY gp_all ON idempotency.requests USING (true)")
        .expect("policy");
    assert_eq!(
        answer(
            &mut c,
            "SELECT outcome::text FROM idem_claim('gp', 'policy', 'h')"
        ),
        "ERROR 0A000"
    );
    c.batch_execute("DROP POLICY gp_all ON idempotency.requests")
        .expect("drop policy");

    // Citus installed after the switch (its catalog table, as far as the layout asks): with
    // the table and its generations left local, the direct path goes on; a generation made a
    // Citus table is refused at the next claim, though nothing the cached catalog watches
    // changed.
    assert_eq!(claim_and_complete(&mut c, "before-citus"), (2, 0));
    c.batch_execute(
        "SET allow_system_table_mods = on;
         CREATE TABLE pg_catalog.pg_dist_partition (logicalrelid regclass);
         RESET allow_system_table_mods;",
    )
    .expect("a stand-in for Citus's catalog");
    assert_eq!(claim_and_complete(&mut c, "citus-local"), (2, 0));
    c.batch_execute("INSERT INTO pg_catalog.pg_dist_partition VALUES ('idempotency.requests_g2')")
        .expect("a generation in Citus's catalog");
    assert_eq!(
        answer(
            &mut c,
            "SELECT outcome::text FROM idem_claim('gp', 'citus', 'h')"
        ),
        "ERROR 0A000"
    );
    c.batch_execute(
        "SET allow_system_table_mods = on; DROP TABLE pg_catalog.pg_dist_partition; RESET allow_system_table_mods;",
    )
    .expect("drop the stand-in");

    // A role that may claim, once SELECT on idempotency.layout is revoked: SQL reads the layout
    // as the caller (42501), so the direct path must not read it for them.
    c.batch_execute(
        "DROP ROLE IF EXISTS gp_app; CREATE ROLE gp_app LOGIN; SELECT idem_grant('gp_app', 'app');
         REVOKE SELECT ON idempotency.layout FROM PUBLIC;",
    )
    .expect("role");
    let mut app = cluster().connect_as(&cluster().name, "gp_app");
    assert_eq!(
        answer(
            &mut app,
            "SELECT outcome::text FROM idem_claim('gp', 'no-layout', 'h')"
        ),
        "ERROR 42501"
    );
    c.batch_execute("GRANT SELECT ON idempotency.layout TO PUBLIC")
        .expect("grant back");
    assert_eq!(claim(&mut app, "gp", "layout-again", "h"), "new_claim");

    // A fourth child someone made: its rows are the table's too, so everything goes to SQL,
    // and SQL still finds what is in it.
    c.batch_execute(
        "CREATE TABLE gp_extra (LIKE idempotency.requests INCLUDING ALL);
         INSERT INTO gp_extra SELECT * FROM idempotency.requests WHERE key = 'g1' AND scope = 'gp';
         UPDATE gp_extra SET scope = 'gp-extra';
         ALTER TABLE gp_extra INHERIT idempotency.requests;",
    )
    .expect("extra child");
    assert_eq!(claim_and_complete(&mut c, "extra"), (0, 2));
    let replay: String = c
        .query_one(
            "SELECT outcome::text FROM idem_claim('gp-extra', 'g1', 'h')",
            &[],
        )
        .expect("replay from the extra child")
        .get(0);
    assert_eq!(replay, "replay_success");
    c.batch_execute("DROP TABLE gp_extra").expect("drop extra");
    assert_eq!(claim_and_complete(&mut c, "after-extra"), (2, 0));

    // Back to flat: direct at once (the table keeps relhassubclass until a VACUUM).
    c.query_one("SELECT idem_set_layout('flat')", &[])
        .expect("back to flat");
    assert_eq!(claim_and_complete(&mut c, "flat-again"), (2, 0));
    assert_eq!(table_of(&mut c, "flat-again"), "idempotency.requests");
    assert_eq!(claim(&mut c, "gp", "moving", "h"), "replay_success");
}
