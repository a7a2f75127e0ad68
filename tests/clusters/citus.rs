//! The extension on a real Citus cluster (issue #14): a coordinator and two workers started by
//! `scripts/citus.sh up MAJOR` (Citus 14.0.1; Postgres 16–18), every function through the
//! coordinator in both distribution shapes (`idem_distribute('key')` and `('scope')`), a
//! 16-session race over a co-located effects table, the single-shard check of the co-located
//! claim, and reclaim/purge done once: by the coordinator, or by every node on the shards it
//! holds (`idempotency.citus_upkeep = shards`, tests/clusters/citus/upkeep.rs).
//!
//! Runs when `IDEM_CITUS=1` (pgrx-config/test.sh sets it for the majors in
//! `IDEM_CITUS_MAJORS`, default 17) or, IDEM_CITUS unset, when Citus is already installed for
//! the Postgres under test; otherwise, and always on Postgres 13–15, it is ignored (build.rs,
//! `idem_no_citus`). The extension must
//! be installed already (`cargo pgrx test` does that): the script is told not to install it.

use crate::common;
mod layout;
mod upkeep;

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use postgres::{Client, NoTls};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub(crate) struct Citus {
    pub(crate) port: u16,
}

impl Citus {
    fn script(&self, what: &str) -> std::process::Output {
        Command::new(repo().join("scripts/citus.sh"))
            .args([what, common::MAJOR])
            .env("IDEM_PG_CONFIG", common::pg_config())
            .env("CITUS_SKIP_EXTENSION", "1")
            .env("CITUS_PORT", self.port.to_string())
            .output()
            .expect("scripts/citus.sh")
    }

    /// Three consecutive ports free now, below the kernel's ephemeral range (32768 and up), so
    /// no client connection of the tests running beside this one can be holding one of them.
    fn free_trio(attempt: u32) -> u16 {
        let mut port = 12000 + ((std::process::id() * 7 + attempt * 997) % 18000) as u16;
        loop {
            let free = (0..3).all(|i| std::net::TcpListener::bind(("127.0.0.1", port + i)).is_ok());
            if free {
                return port;
            }
            port = if port > 29990 { 12000 } else { port + 3 };
        }
    }

    fn up() -> Citus {
        // A port can still be taken between the look and the start: try another trio then.
        let mut last = String::new();
        for attempt in 0..3 {
            let citus = Citus {
                port: Self::free_trio(attempt),
            };
            let out = citus.script("up");
            if out.status.success() {
                return citus;
            }
            last = format!(
                "{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            eprintln!(
                "scripts/citus.sh up failed on ports {}..{}; trying others:\n{last}",
                citus.port,
                citus.port + 2
            );
            drop(citus);
        }
        panic!("scripts/citus.sh up failed three times:\n{last}");
    }

    pub(crate) fn connect_port(port: u16) -> Client {
        Client::connect(
            &format!("host=127.0.0.1 port={port} user=postgres dbname=postgres application_name=idem-citus"),
            NoTls,
        )
        .expect("connect")
    }

    pub(crate) fn coordinator(&self) -> Client {
        Self::connect_port(self.port)
    }

    pub(crate) fn worker(&self, n: u16) -> Client {
        Self::connect_port(self.port + n)
    }

    pub(crate) fn log(&self, node: &str) -> String {
        std::fs::read_to_string(format!("/var/tmp/idem-citus-{}/{node}.log", common::MAJOR))
            .unwrap_or_default()
    }
}

impl Drop for Citus {
    fn drop(&mut self) {
        let _ = self.script("down");
    }
}

fn state(result: Result<Vec<postgres::Row>, postgres::Error>) -> String {
    match result {
        Ok(_) => "ok".into(),
        Err(e) => common::sqlstate(&e),
    }
}

pub(crate) fn one<T: for<'a> postgres::types::FromSql<'a>>(c: &mut Client, sql: &str) -> T {
    c.query_one(sql, &[])
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .get(0)
}

/// Every function through the coordinator, on the current distribution shape.
fn functions_answer_as_on_one_server(c: &mut Client, shape: &str) {
    let s = format!("tenant-{shape}");
    let claim = |c: &mut Client, key: &str, hash: &str| -> (String, i32) {
        let row = c
            .query_one(
                "SELECT outcome::text, attempt FROM idem_claim($1, $2, $3)",
                &[&s, &key, &hash],
            )
            .expect("claim");
        (row.get(0), row.get(1))
    };
    // claim, complete, replay
    assert_eq!(claim(c, "k1", "h1"), ("new_claim".into(), 1));
    assert_eq!(claim(c, "k1", "h1"), ("processing_active".into(), 1));
    c.execute("SELECT idem_complete($1, 'k1', '{\"a\": 1}')", &[&s])
        .expect("complete");
    c.execute("SELECT idem_complete($1, 'k1', '{\"a\": 1}')", &[&s])
        .expect("a repeat is fine");
    assert_eq!(
        state(c.query("SELECT idem_complete($1, 'k1', '{\"a\": 2}')", &[&s])),
        "P4010"
    );
    let row = c
        .query_one(
            "SELECT outcome::text, response::text FROM idem_claim($1, 'k1', 'h1')",
            &[&s],
        )
        .expect("replay");
    assert_eq!(row.get::<_, String>(0), "replay_success");
    assert_eq!(row.get::<_, String>(1), "{\"a\": 1}");
    // mismatch
    assert_eq!(
        state(c.query("SELECT idem_claim($1, 'k1', 'other')", &[&s])),
        "P4002"
    );
    // checkpoint, takeover after the lease, fencing of the old attempt
    assert_eq!(claim(c, "k2", "h2"), ("new_claim".into(), 1));
    let n: i32 = one(
        c,
        &format!(
            "SELECT pg_catalog.num_nulls(idem_checkpoint('{s}', 'k2', 'p1', 1, '1 millisecond'))"
        ),
    );
    assert_eq!(n, 0);
    std::thread::sleep(Duration::from_millis(20));
    let row = c
        .query_one(
            "SELECT outcome::text, attempt, recovery_point FROM idem_claim($1, 'k2', 'h2')",
            &[&s],
        )
        .expect("takeover");
    assert_eq!(row.get::<_, i32>(1), 2, "{:?}", row.get::<_, String>(0));
    assert_eq!(row.get::<_, Option<String>>(2).as_deref(), Some("p1"));
    assert_eq!(
        state(c.query("SELECT idem_complete($1, 'k2', '{}', attempt => 1)", &[&s])),
        "P4012"
    );
    assert_eq!(
        state(c.query(
            "SELECT idem_fail($1, 'k2', true, 'E', 'm', attempt => 1)",
            &[&s]
        )),
        "P4012"
    );
    assert_eq!(
        state(c.query("SELECT idem_checkpoint($1, 'k2', 'p', 1)", &[&s])),
        "P4012"
    );
    c.execute("SELECT idem_complete($1, 'k2', '{}', attempt => 2)", &[&s])
        .expect("current attempt");
    // fail retryable, then a new attempt; fail final, then final_failure
    assert_eq!(claim(c, "k3", "h3").1, 1);
    c.execute("SELECT idem_fail($1, 'k3', true, 'E1', 'boom')", &[&s])
        .expect("fail");
    assert_eq!(claim(c, "k3", "h3"), ("retryable_failure".into(), 2));
    c.execute("SELECT idem_fail($1, 'k3', false, 'E2', 'final')", &[&s])
        .expect("fail final");
    c.execute("SELECT idem_fail($1, 'k3', false, 'E2', 'final')", &[&s])
        .expect("a repeat is fine");
    assert_eq!(claim(c, "k3", "h3").0, "final_failure");
    assert_eq!(
        state(c.query("SELECT idem_fail($1, 'k3', true)", &[&s])),
        "P4011"
    );
    assert_eq!(
        state(c.query("SELECT idem_checkpoint($1, 'nokey', 'p')", &[&s])),
        "P4013"
    );
    // forget
    assert!(one::<bool>(c, &format!("SELECT idem_forget('{s}', 'k3')")));
    assert!(!one::<bool>(c, &format!("SELECT idem_forget('{s}', 'k3')")));
    // the same in a transaction block (not delegated: the coordinator routes each statement)
    c.batch_execute(&format!(
        "BEGIN; SELECT idem_claim('{s}', 'k4', 'h'); SELECT idem_complete('{s}', 'k4', '1'); COMMIT"
    ))
    .expect("claim + complete in one transaction");
    assert_eq!(claim(c, "k4", "h").0, "replay_success");
    // inbox, ordered updates, outbox (tables on the coordinator)
    assert!(one::<bool>(
        c,
        &format!("SELECT idem_inbox_accept('{s}', 'm1', 'h')")
    ));
    assert!(!one::<bool>(
        c,
        &format!("SELECT idem_inbox_accept('{s}', 'm1', 'h')")
    ));
    assert_eq!(
        state(c.query("SELECT idem_inbox_accept($1, 'm1', 'other')", &[&s])),
        "P4050"
    );
    assert!(one::<bool>(
        c,
        &format!("SELECT idem_advance('{s}', 'e', 2)")
    ));
    assert!(!one::<bool>(
        c,
        &format!("SELECT idem_advance('{s}', 'e', 1)")
    ));
    let id: i64 = one(
        c,
        &format!("SELECT idem_outbox_put('{s}', '{{\"x\": 1}}', 'd1')"),
    );
    assert_eq!(
        one::<i64>(
            c,
            &format!("SELECT idem_outbox_put('{s}', '{{\"x\": 1}}', 'd1')")
        ),
        id
    );
    let taken: Vec<i64> = c
        .query("SELECT id FROM idem_outbox_take(10, topic => $1)", &[&s])
        .expect("take")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(taken, vec![id]);
    assert_eq!(
        one::<i64>(c, &format!("SELECT idem_outbox_ack(ARRAY[{id}]::int8[])")),
        1
    );
    // idem_call: the function runs once; the second call replays
    c.batch_execute(
        "CREATE TABLE IF NOT EXISTS public.call_effects (n int);
         CREATE OR REPLACE FUNCTION public.call_fn(r jsonb) RETURNS jsonb LANGUAGE sql
           AS 'INSERT INTO public.call_effects VALUES (1); SELECT r'",
    )
    .expect("call setup");
    for _ in 0..2 {
        c.execute(
            "SELECT idem_call($1, 'c1', '{\"q\": 1}', 'public.call_fn(jsonb)')",
            &[&s],
        )
        .expect("idem_call");
    }
    assert_eq!(one::<i64>(c, "SELECT count(*) FROM public.call_effects"), 1);
    c.batch_execute("DROP TABLE public.call_effects; DROP FUNCTION public.call_fn(jsonb)")
        .expect("drop");
}

/// 16 sessions claim the same 20 keys through the coordinator and apply an effect for each
/// claim they win, in the claim's transaction: exactly one effect per key.
fn race(citus: &Citus, shape: &str) {
    let mut c = citus.coordinator();
    let column = if shape == "scope" { "tenant" } else { "key" };
    c.batch_execute(&format!(
        "DROP TABLE IF EXISTS public.effects;
         CREATE TABLE public.effects (tenant text NOT NULL, key text NOT NULL, session int NOT NULL);
         SELECT create_distributed_table('public.effects', '{column}', colocate_with => 'idempotency.requests');"
    ))
    .expect("effects table");
    let barrier = Arc::new(Barrier::new(16));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..16)
        .map(|session| {
            let barrier = barrier.clone();
            let errors = errors.clone();
            let port = citus.port;
            std::thread::spawn(move || {
                let mut c = Citus::connect_port(port);
                barrier.wait();
                for k in 0..20 {
                    let key = format!("race-{k}");
                    let tenant = format!("t{}", k % 4);
                    let mut tx = c.transaction().expect("begin");
                    let outcome: String = match tx.query_one(
                        "SELECT outcome::text FROM idem_claim($1, $2, 'h')",
                        &[&tenant, &key],
                    ) {
                        Ok(row) => row.get(0),
                        Err(e) => {
                            errors.lock().unwrap().push(common::sqlstate(&e));
                            continue;
                        }
                    };
                    if outcome == "new_claim" {
                        tx.execute(
                            "INSERT INTO public.effects VALUES ($1, $2, $3)",
                            &[&tenant, &key, &session],
                        )
                        .expect("effect");
                        tx.execute("SELECT idem_complete($1, $2, '{}')", &[&tenant, &key])
                            .expect("complete");
                    }
                    tx.commit().expect("commit");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("session");
    }
    let errors = errors.lock().unwrap().clone();
    // A claim that finds the key held by a concurrent claim answers processing_active; no error.
    assert!(errors.is_empty(), "{errors:?}");
    let per_key: Vec<(String, i64)> = c
        .query(
            "SELECT key, count(*) FROM public.effects GROUP BY key ORDER BY key",
            &[],
        )
        .expect("effects")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(per_key.len(), 20, "{per_key:?}");
    assert!(per_key.iter().all(|(_, n)| *n == 1), "{per_key:?}");
    let succeeded: i64 = one(
        &mut c,
        "SELECT count(*) FROM idempotency.requests WHERE key LIKE 'race-%' AND status = 'succeeded'",
    );
    assert_eq!(succeeded, 20);
}

/// The co-located claim + effect + complete: every statement goes to one worker, and the
/// commit is a plain one (no PREPARE TRANSACTION: no 2PC).
fn colocated_claim_is_single_shard(citus: &Citus) {
    let notices = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = notices.clone();
    let mut c = postgres::Config::new()
        .host("127.0.0.1")
        .port(citus.port)
        .user("postgres")
        .dbname("postgres")
        .notice_callback(move |n| {
            sink.lock()
                .unwrap()
                .push(format!("{} | {}", n.message(), n.detail().unwrap_or("")))
        })
        .connect(NoTls)
        .expect("connect");
    c.batch_execute(
        "SET citus.log_remote_commands = on;
         BEGIN;
         SELECT idem_claim('t-single', 'k-single', 'h');
         INSERT INTO public.effects VALUES ('t-single', 'k-single', 0);
         SELECT idem_complete('t-single', 'k-single', '{}');
         COMMIT;
         RESET citus.log_remote_commands;",
    )
    .expect("co-located transaction");
    let notices = notices.lock().unwrap().clone();
    let servers: std::collections::BTreeSet<String> = notices
        .iter()
        .filter_map(|n| n.split("on server ").nth(1))
        .map(|s| s.split_whitespace().next().unwrap_or("").to_string())
        .collect();
    assert!(!notices.is_empty(), "no remote command was logged");
    assert_eq!(
        servers.len(),
        1,
        "more than one node took part: {notices:#?}"
    );
    assert!(
        !notices.iter().any(|n| n.contains("PREPARE TRANSACTION")),
        "2PC was used: {notices:#?}"
    );
    // Citus's own view of the shard: the key's shard of requests and of effects on one node.
    let nodes: i64 = one(
        &mut c,
        "SELECT count(DISTINCT nodeport) FROM pg_catalog.citus_shards \
         WHERE shardid IN (get_shard_id_for_distribution_column('idempotency.requests', 't-single'), \
                           get_shard_id_for_distribution_column('public.effects', 't-single'))",
    );
    assert_eq!(nodes, 1);
}

#[test]
#[cfg_attr(
    idem_no_citus,
    ignore = "Citus: Postgres 16-18 with IDEM_CITUS=1 or Citus installed (test.sh: 17)"
)]
fn citus_cluster() {
    let citus = Citus::up();
    let mut c = citus.coordinator();
    layout::generations_while_local(&mut c);
    // Without distribution nothing changes; idem_distribute checks its arguments.
    assert_eq!(
        state(c.query("SELECT idem_distribute('tenant')", &[])),
        "22023"
    );
    for shape in ["key", "scope"] {
        if shape == "scope" {
            c.batch_execute(
                "DROP TABLE IF EXISTS public.effects; DROP EXTENSION idempotency CASCADE; CREATE EXTENSION idempotency",
            )
            .expect("fresh extension");
        }
        c.execute("SELECT idem_distribute($1)", &[&shape])
            .expect("idem_distribute");
        assert_eq!(
            state(c.query("SELECT idem_distribute($1)", &[&shape])),
            "P4060"
        );
        let functions: i64 = one(
            &mut c,
            "SELECT count(*) FROM pg_catalog.pg_dist_object o JOIN pg_proc p ON o.objid = p.oid \
             WHERE o.classid = 'pg_proc'::regclass AND p.proname LIKE 'idem_%' AND o.distribution_argument_index IS NOT NULL",
        );
        assert_eq!(functions, 5, "delegated functions ({shape})");
        functions_answer_as_on_one_server(&mut c, shape);
        race(&citus, shape);
        if shape == "scope" {
            colocated_claim_is_single_shard(&citus);
        }
        upkeep::by_the_coordinator(&citus);
    }
    upkeep::on_every_node(&citus);
}
