//! Upkeep of a distributed idempotency.requests on the Citus cluster of tests/clusters/citus.rs: by the
//! coordinator (the default), and by every node on the shard placements it holds
//! (`idempotency.citus_upkeep = shards`). Either way each row is reclaimed and purged once.

use std::time::Duration;

use postgres::Client;

use super::{Citus, one};

/// Reclaim and purge through the coordinator: each row once; the workers' background workers
/// leave the distributed table to the coordinator and do not fail.
pub(crate) fn by_the_coordinator(citus: &Citus) {
    // Only what the logs say from here on (a round that met the shape switch's DROP EXTENSION
    // logs 42P01, as on one server).
    let seen: Vec<usize> = ["coordinator", "worker1", "worker2"]
        .iter()
        .map(|n| citus.log(n).len())
        .collect();
    // Every node's background worker runs a round a second (it is on by default).
    for port in [citus.port, citus.port + 1, citus.port + 2] {
        let mut node = Citus::connect_port(port);
        for sql in [
            "ALTER SYSTEM SET idempotency.reclaim_grace = 0",
            "ALTER SYSTEM SET idempotency.naptime = '1s'",
            "SELECT pg_reload_conf()",
        ] {
            node.batch_execute(sql).expect("settings");
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    let mut c = citus.coordinator();
    c.batch_execute(
        "SELECT idem_claim('up', 'lease-' || i, 'h', lease => '1 millisecond') FROM generate_series(1, 30) i;
         SELECT idem_claim('up', 'old-' || i, 'h', lease => '1 millisecond', retention => '2 milliseconds') FROM generate_series(1, 30) i;",
    )
    .expect("setup");
    c.batch_execute("SELECT idem_complete('up', 'old-' || i, '{}') FROM generate_series(1, 30) i")
        .expect("complete old");
    std::thread::sleep(Duration::from_millis(50));
    let reclaimed: i64 = one(&mut c, "SELECT idem_reclaim(1000)");
    // The background worker may have reclaimed some of them first; together: exactly 30 rows
    // are failed_retryable with lease_expired, and another call finds nothing.
    assert!(reclaimed <= 30);
    assert_eq!(one::<i64>(&mut c, "SELECT idem_reclaim(1000)"), 0);
    let expired: i64 = one(
        &mut c,
        "SELECT count(*) FROM idempotency.requests WHERE scope = 'up' AND key LIKE 'lease-%' \
         AND status = 'failed_retryable' AND failure_code = 'lease_expired' \
         AND failure_message LIKE 'the lease of attempt 1 ended at %'",
    );
    assert_eq!(expired, 30);
    let purged: i64 = one(&mut c, "SELECT idem_purge(1000)");
    assert!(purged <= 30);
    assert_eq!(
        one::<i64>(
            &mut c,
            "SELECT count(*) FROM idempotency.requests WHERE key LIKE 'old-%'"
        ),
        0
    );
    assert_eq!(one::<i64>(&mut c, "SELECT idem_purge(1000)"), 0);
    // The workers did none of it, though their background workers kept running rounds.
    std::thread::sleep(Duration::from_millis(2500));
    for n in [1, 2] {
        let mut w = citus.worker(n);
        let rounds: i64 = one(
            &mut w,
            "SELECT value FROM idem_metrics() WHERE name = 'maintenance_rounds'",
        );
        assert!(rounds > 0, "worker {n}'s background worker ran no round");
    }
    for n in [1, 2] {
        let mut w = citus.worker(n);
        let done: i64 = one(
            &mut w,
            "SELECT COALESCE(sum(value), 0)::int8 FROM idem_metrics() WHERE name IN ('reclaimed', 'purged')",
        );
        assert_eq!(done, 0, "worker {n} did upkeep of the distributed table");
    }
    for (node, from) in ["coordinator", "worker1", "worker2"].iter().zip(seen) {
        let log = citus.log(node).get(from..).unwrap_or_default().to_string();
        assert!(
            !log.lines()
                .any(|l| l.contains("idempotency: idem_") && l.contains("failed")),
            "{node}'s background upkeep failed:\n{log}"
        );
    }
}

/// `ALTER SYSTEM SET` on every node, then a reload.
fn on_all_nodes(citus: &Citus, settings: &[&str]) {
    for port in [citus.port, citus.port + 1, citus.port + 2] {
        let mut node = Citus::connect_port(port);
        for sql in settings {
            node.batch_execute(&format!("ALTER SYSTEM SET {sql}"))
                .expect("setting");
        }
        node.batch_execute("SELECT pg_reload_conf()")
            .expect("reload");
    }
}

/// A node's reclaimed and purged counters.
fn done(node: &mut Client) -> (i64, i64) {
    let reclaimed = one(
        node,
        "SELECT value FROM idem_metrics() WHERE name = 'reclaimed'",
    );
    let purged = one(
        node,
        "SELECT value FROM idem_metrics() WHERE name = 'purged'",
    );
    (reclaimed, purged)
}

/// `idempotency.citus_upkeep = shards` on every node: each node's background worker reclaims
/// and purges the placements it holds, set-based and locally. The workers' counters add up to
/// exactly the rows there were (each row once); the coordinator, which holds no shard, does
/// none; nothing is left for a call through the coordinator.
pub(crate) fn on_every_node(citus: &Citus) {
    on_all_nodes(
        citus,
        &[
            "idempotency.citus_upkeep = shards",
            "idempotency.reclaim_grace = 0",
            "idempotency.naptime = '200ms'",
        ],
    );
    std::thread::sleep(Duration::from_millis(500));
    let mut nodes: Vec<Client> = [citus.port, citus.port + 1, citus.port + 2]
        .iter()
        .map(|&p| Citus::connect_port(p))
        .collect();
    let before: Vec<(i64, i64)> = nodes.iter_mut().map(done).collect();
    // One scope per row: the table may be distributed by scope (the last shape of citus.rs).
    let mut c = citus.coordinator();
    c.batch_execute(
        "SELECT idem_claim('sh-' || i, 'lease-' || i, 'h', lease => '1 millisecond') FROM generate_series(1, 200) i;
         SELECT idem_claim('sh-' || i, 'old-' || i, 'h', retention => '1 millisecond') FROM generate_series(1, 200) i;",
    )
    .expect("rows");
    c.batch_execute(
        "SELECT idem_complete('sh-' || i, 'old-' || i, '{}') FROM generate_series(1, 200) i",
    )
    .expect("complete old");
    crate::common::wait_for(
        "every node's upkeep of its shards",
        Duration::from_secs(60),
        || {
            let left: i64 = one(
                &mut c,
                "SELECT count(*) FROM idempotency.requests WHERE scope LIKE 'sh-%' \
             AND (key LIKE 'old-%' OR status = 'processing')",
            );
            left == 0
        },
    );
    let after: Vec<(i64, i64)> = nodes.iter_mut().map(done).collect();
    let delta: Vec<(i64, i64)> = before
        .iter()
        .zip(&after)
        .map(|(b, a)| (a.0 - b.0, a.1 - b.1))
        .collect();
    assert_eq!(
        delta[0],
        (0, 0),
        "the coordinator holds no shard: {delta:?}"
    );
    assert!(
        delta[1].0 > 0 && delta[2].0 > 0 && delta[1].1 > 0 && delta[2].1 > 0,
        "both workers did their shards: {delta:?}"
    );
    assert_eq!(
        delta[1].0 + delta[2].0,
        200,
        "each lease reclaimed once: {delta:?}"
    );
    assert_eq!(
        delta[1].1 + delta[2].1,
        200,
        "each record purged once: {delta:?}"
    );
    let reclaimed: i64 = one(
        &mut c,
        "SELECT count(*) FROM idempotency.requests WHERE scope LIKE 'sh-%' \
         AND status = 'failed_retryable' AND failure_code = 'lease_expired' \
         AND failure_message LIKE 'the lease of attempt 1 ended at %'",
    );
    assert_eq!(reclaimed, 200);
    assert_eq!(one::<i64>(&mut c, "SELECT idem_reclaim(1000)"), 0);
    assert_eq!(one::<i64>(&mut c, "SELECT idem_purge(1000)"), 0);
    on_all_nodes(citus, &["idempotency.citus_upkeep = coordinator"]);
}
