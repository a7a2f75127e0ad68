//! The generations layout (docs/retention.md) on the Citus cluster of tests/clusters/citus.rs,
//! with `idempotency.requests` left local: Citus keeps no inheritance with its own tables.

use postgres::Client;

use super::one;

/// With Citus installed and `idempotency.requests` left local, the generations layout works as
/// on one server, the direct path included; distributing the table is refused in it (0A000),
/// and back in the flat layout it goes on.
pub(crate) fn generations_while_local(c: &mut Client) {
    let direct_writes = |c: &mut Client| -> i64 {
        one(
            c,
            "SELECT value FROM idem_metrics() WHERE name = 'writes_direct'",
        )
    };
    let claim = |c: &mut Client, key: &str| -> String {
        c.query_one(
            "SELECT outcome::text FROM idem_claim('gen-local', $1, 'h')",
            &[&key],
        )
        .expect("claim")
        .get(0)
    };
    // Citus would take each new table into its metadata as it is created, and then refuse
    // the inheritance: the switch keeps its own tables out.
    c.batch_execute("SET citus.use_citus_managed_tables = on")
        .expect("managed tables");
    assert_eq!(
        one::<String>(c, "SELECT idem_set_layout('generations')"),
        "generations"
    );
    c.batch_execute("RESET citus.use_citus_managed_tables")
        .expect("reset");
    assert!(!one::<bool>(c, "SELECT idempotency.layout_on_citus()"));
    let before = direct_writes(c);
    assert_eq!(claim(c, "k1"), "new_claim");
    c.execute("SELECT idem_complete('gen-local', 'k1', '{}')", &[])
        .expect("complete");
    assert!(
        direct_writes(c) >= before + 2,
        "the direct path writes in the layout while the table is local"
    );
    assert_eq!(claim(c, "k1"), "replay_success");
    assert_eq!(
        one::<String>(c, "SELECT idem_rotate(force => true)"),
        "switched"
    );
    assert_eq!(claim(c, "k2"), "new_claim");
    assert_eq!(
        one::<String>(
            c,
            "SELECT string_agg(key || ':' || tableoid::regclass::text, ',' ORDER BY key) \
             FROM idempotency.requests WHERE scope = 'gen-local'"
        ),
        "k1:idempotency.requests_g1,k2:idempotency.requests_g2"
    );
    // Refused by the extension, with its own words, before Citus is asked.
    let refused = c
        .query("SELECT idem_distribute('key')", &[])
        .expect_err("distributing the layout");
    assert_eq!(crate::common::sqlstate(&refused), "0A000");
    assert!(
        refused
            .as_db_error()
            .is_some_and(|e| e.message().contains("generations layout")),
        "{refused}"
    );
    c.batch_execute(
        "SELECT idem_forget('gen-local', 'k1'); SELECT idem_forget('gen-local', 'k2'); \
         SELECT idem_set_layout('flat')",
    )
    .expect("back to flat");
}
