//! Failover (issue #16): a primary and a hot standby (pg_basebackup -R) from the installation
//! under test. Claims, replays and completes run on the primary; replays work on the standby
//! and write nothing; no maintenance runs there. The primary is killed (`-m immediate`), the
//! standby promoted, clients reconnect to it and retry; every key is then audited from the
//! effects table. Synchronous replication loses nothing acknowledged; asynchronous replication
//! can lose acknowledged work, but always an effect together with its record.
//! Runs on one Postgres major only, IDEM_FAULTS_MAJOR (16); ignored on the others (build.rs,
//! `idem_no_faults`). See docs/failover.md.

use crate::common;
use crate::faults;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{serial, wait_for_every};
use faults::audit::{audit, crashes, drive_to_completion, wait_no_processing};
use faults::server::Server;
use faults::workload::{Conn, Load, Rng, SCHEMA, SCOPE, SUPERUSER, Stats, Workflow, get, request};

/// One pair at a time: the machine is shared.
static SERIAL: Mutex<()> = Mutex::new(());

const WORKERS: &str = "backend_type IN ('idempotency launcher', 'idempotency maintenance')";

/// Every 100 ms: a check here usually opens a connection of its own.
fn wait_for(what: &str, limit: Duration, check: impl FnMut() -> bool) {
    wait_for_every(what, limit, Duration::from_millis(100), check);
}

fn count(server: &Server, sql: &str) -> i64 {
    server
        .connect("chaos")
        .query_one(sql, &[])
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .get(0)
}

/// A primary and its streaming hot standby, both running; `synchronous` makes the standby
/// synchronous (once it streams: before, a commit would wait for it).
fn pair(synchronous: bool) -> (Server, Server) {
    let primary = Server::init("primary", "synchronous_commit = on\n");
    primary.start();
    primary
        .connect("postgres")
        .batch_execute("CREATE DATABASE chaos")
        .expect("create database");
    primary
        .connect("chaos")
        .batch_execute(SCHEMA)
        .expect("schema");
    // The copied configuration names no synchronous standby: once promoted, the standby must
    // not wait for one.
    let standby = Server::standby_of(&primary, "standby", "synchronous_standby_names = ''\n");
    standby.start();
    wait_for("the standby streams", Duration::from_secs(60), || {
        count(
            &primary,
            "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'",
        ) == 1
    });
    if synchronous {
        let mut db = primary.connect("chaos");
        db.batch_execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
            .expect("alter system");
        db.batch_execute("SELECT pg_reload_conf()").expect("reload");
        wait_for(
            "the standby is synchronous",
            Duration::from_secs(30),
            || {
                count(
                    &primary,
                    "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'",
                ) == 1
            },
        );
    }
    (primary, standby)
}

fn caught_up(primary: &Server, standby: &Server) {
    let lsn: String = primary
        .connect("chaos")
        .query_one("SELECT pg_current_wal_lsn()::text", &[])
        .expect("lsn")
        .get(0);
    let mut db = standby.connect("chaos");
    wait_for("the standby replays", Duration::from_secs(60), || {
        db.query_one(
            "SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn",
            &[&lsn],
        )
        .expect("replay lsn")
        .get::<_, bool>(0)
    });
}

/// Requests on the primary, then replays of them on the standby: the stored answer, no
/// transaction id, no maintenance worker there. Returns what the clients were told.
fn replays_on_standby(
    primary: &Server,
    standby: &Server,
) -> HashMap<String, faults::workload::Answer> {
    let stats = Arc::new(Stats::default());
    let mut conn = Conn::new(&[primary.port], stats.clone());
    let mut rng = Rng::new(3);
    for i in 0..30 {
        let workflow = [Workflow::OneTx, Workflow::TwoTx, Workflow::Call][i % 3];
        let give_up = Instant::now() + Duration::from_secs(30);
        request(
            &mut conn,
            &stats,
            &format!("r{i}"),
            workflow,
            &mut rng,
            give_up,
            &AtomicBool::new(false),
        )
        .expect("a request on the primary");
    }
    assert!(stats.unexpected.lock().expect("unexpected").is_empty());
    let acked = stats.acked.lock().expect("acked").clone();
    caught_up(primary, standby);

    let mut db = standby.connect("chaos");
    for (key, told) in &acked {
        let mut tx = db.transaction().expect("begin on the standby");
        let row = tx
            .query_one(
                "SELECT outcome::text, (response->>'attempt')::int, (response->>'effect')::bigint \
                 FROM idem_claim($1, $2, idem_hash($3::text::jsonb))",
                &[&SCOPE, key, &faults::workload::request_of(key)],
            )
            .expect("a replay on the standby");
        assert_eq!(row.get::<_, String>(0), "replay_success", "{key}");
        assert_eq!(
            (row.get::<_, i32>(1), row.get::<_, i64>(2)),
            (told.attempt, told.effect),
            "{key}"
        );
        let xid: Option<String> = tx
            .query_one("SELECT pg_current_xact_id_if_assigned()::text", &[])
            .expect("xid")
            .get(0);
        assert_eq!(xid, None, "a replay on the standby took a transaction id");
        tx.commit().expect("commit on the standby");
    }
    let row = db
        .query_one(
            "SELECT outcome::text FROM idem_call($1, 'r2', $2::text::jsonb, \
             'chaos_effect(jsonb)'::regprocedure)",
            &[&SCOPE, &faults::workload::request_of("r2")],
        )
        .expect("an idem_call replay on the standby");
    assert_eq!(row.get::<_, String>(0), "replay_success");
    // A new key cannot be claimed there: the standby is read-only.
    let err = db
        .query_one(
            "SELECT outcome::text FROM idem_claim($1, 'new-on-standby', 'h')",
            &[&SCOPE],
        )
        .expect_err("a claim of a new key on the standby");
    assert_eq!(common::sqlstate(&err), "25006", "{err}");

    // The standby's copy of the records is already exactly-once.
    let keys: Vec<String> = acked.keys().cloned().collect();
    let report = audit(&mut db, &keys, &acked);
    assert!(report.clean(), "{report:?}");

    // No maintenance on a standby, while the primary has its launcher.
    for _ in 0..10 {
        assert_eq!(
            count(
                standby,
                &format!("SELECT count(*) FROM pg_stat_activity WHERE {WORKERS}")
            ),
            0,
            "a maintenance process runs on the standby"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        count(
            primary,
            "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'idempotency launcher'"
        ) == 1
    );
    acked
}

/// Stops the standby's WAL receiver (as a network partition would).
fn disconnect(primary: &Server, standby: &Server) {
    let mut sdb = standby.connect("chaos");
    sdb.batch_execute("ALTER SYSTEM SET primary_conninfo = ''")
        .expect("alter system");
    sdb.batch_execute("SELECT pg_reload_conf()")
        .expect("reload");
    wait_for("the standby disconnects", Duration::from_secs(30), || {
        count(primary, "SELECT count(*) FROM pg_stat_replication") == 0
    });
}

/// The maintenance worker runs on the promoted server: its launcher appears and a stale lease
/// committed there is reclaimed.
fn maintenance_runs_on(server: &Server) {
    wait_for(
        "the launcher on the promoted server",
        Duration::from_secs(20),
        || {
            count(
                server,
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'idempotency launcher'",
            ) == 1
        },
    );
    server
        .connect("chaos")
        .batch_execute("SELECT idem_claim('probe', 'stale', 'h', lease => '100 milliseconds')")
        .expect("a claim on the promoted server");
    wait_for(
        "a reclaim on the promoted server",
        Duration::from_secs(20),
        || {
            count(
                server,
                "SELECT count(*) FROM idempotency.requests WHERE scope = 'probe' \
             AND status = 'failed_retryable'",
            ) == 1
        },
    );
}

fn no_crashes(servers: &[&Server]) {
    for s in servers {
        let crashed = crashes(&s.log(), &[]);
        assert!(crashed.is_empty(), "{}: {crashed:?}", s.name);
    }
}

#[test]
#[cfg_attr(
    idem_no_faults,
    ignore = "the fault tests run on IDEM_FAULTS_MAJOR only (default 16)"
)]
fn failover_synchronous_loses_nothing_acknowledged() {
    let _serial = serial(&SERIAL);
    let (primary, standby) = pair(true);
    let before = replays_on_standby(&primary, &standby);

    // Load on whichever server accepts writes; the primary dies in the middle of it.
    let traffic = Load::new(vec![primary.port, standby.port]);
    let (stats, stop, ports) = (&traffic.stats, &traffic.stop, &traffic.ports);
    std::thread::scope(|s| {
        let clients = traffic.spawn(s, 8, "f", |i| 100 + i, Duration::from_secs(60));
        std::thread::sleep(Duration::from_secs(3));
        // The standby stops receiving: from now on the primary commits locally but
        // acknowledges nothing; those commits wait for the standby.
        disconnect(&primary, &standby);
        // At least one request certainly commits now (a new key, one transaction).
        let (waiter_stats, waiter_stop) = (stats.clone(), stop.clone());
        let waiter_ports = ports.clone();
        let waiter = s.spawn(move || {
            let mut conn = Conn::new(&waiter_ports, waiter_stats.clone());
            let give_up = Instant::now() + Duration::from_secs(60);
            let mut rng = Rng::new(9);
            request(
                &mut conn,
                &waiter_stats,
                "waiting",
                Workflow::OneTx,
                &mut rng,
                give_up,
                &waiter_stop,
            );
        });
        std::thread::sleep(Duration::from_secs(2));
        primary.stop_immediate();
        standby.promote();
        std::thread::sleep(Duration::from_secs(4));
        stop.store(true, Relaxed);
        for c in clients {
            c.join().expect("client session");
        }
        waiter.join().expect("the waiting request");
    });
    maintenance_runs_on(&standby);
    let mut db = standby.connect("chaos");
    let left = wait_no_processing(&mut db, Instant::now() + Duration::from_secs(15));
    let mut keys: Vec<String> = stats.keys.lock().expect("keys").iter().cloned().collect();
    keys.sort();
    drive_to_completion(&[standby.port], SUPERUSER, stats, &keys);
    let mut acked = stats.acked.lock().expect("acked").clone();
    acked.extend(before.clone());
    keys.extend(before.keys().cloned());
    let report = audit(&mut db, &keys, &acked);
    let unexpected = stats.unexpected.lock().expect("unexpected").clone();
    println!(
        "synchronous failover: {} keys, {} claims, {} replays, {} takeovers, {} reconnects, \
         {} effects, {} duplicates, {} lost",
        report.keys,
        get(&stats.claims),
        get(&stats.replays),
        get(&stats.takeovers),
        get(&stats.reconnects),
        report.effects,
        report.duplicates,
        report.lost
    );
    assert!(report.clean(), "{report:?}");
    assert_eq!(left, 0, "records left processing");
    assert!(unexpected.is_empty(), "{unexpected:?}");
    assert!(get(&stats.reconnects) > 8, "the clients did not fail over");

    // The old primary, started again on its own, holds the commits that were waiting for the
    // standby when it died: committed there, never acknowledged, not on the promoted server.
    // No client was told about them; their requests were retried and applied once there.
    primary.start();
    let promoted: std::collections::HashSet<(i64, String)> = db
        .query("SELECT id, key FROM effects", &[])
        .expect("effects")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let diverged: Vec<(i64, String, i32)> = primary
        .connect("chaos")
        .query("SELECT id, key, attempt FROM effects", &[])
        .expect("effects of the old primary")
        .iter()
        .map(|r| {
            (
                r.get::<_, i64>(0),
                r.get::<_, String>(1),
                r.get::<_, i32>(2),
            )
        })
        .filter(|(id, key, _)| !promoted.contains(&(*id, key.clone())))
        .collect();
    println!(
        "synchronous failover: {} transactions had committed on the old primary without being \
         acknowledged; their requests were retried on the promoted server",
        diverged.len()
    );
    assert!(
        !diverged.is_empty(),
        "no commit was waiting for the standby"
    );
    for (id, key, attempt) in &diverged {
        let told = acked.get(key).copied();
        assert_ne!(
            told,
            Some(faults::workload::Answer {
                attempt: *attempt,
                effect: *id
            }),
            "{key}: a client was told about a commit the standby never had"
        );
        assert!(told.is_some(), "{key}: not retried to its outcome");
    }
    no_crashes(&[&primary, &standby]);
}

#[test]
#[cfg_attr(
    idem_no_faults,
    ignore = "the fault tests run on IDEM_FAULTS_MAJOR only (default 16)"
)]
fn failover_asynchronous_loses_effect_and_record_together() {
    let _serial = serial(&SERIAL);
    let (primary, standby) = pair(false);
    let before = replays_on_standby(&primary, &standby);

    // The standby falls behind (its WAL receiver stopped), as an asynchronous one may at any
    // moment; the primary acknowledges work that it never receives, then dies.
    disconnect(&primary, &standby);
    let stats = Arc::new(Stats::default());
    let mut conn = Conn::new(&[primary.port], stats.clone());
    let mut rng = Rng::new(5);
    let lost_keys: Vec<String> = (0..12).map(|i| format!("lost{i}")).collect();
    for (i, key) in lost_keys.iter().enumerate() {
        let workflow = [Workflow::OneTx, Workflow::TwoTx, Workflow::Call][i % 3];
        let give_up = Instant::now() + Duration::from_secs(30);
        request(
            &mut conn,
            &stats,
            key,
            workflow,
            &mut rng,
            give_up,
            &AtomicBool::new(false),
        )
        .expect("acknowledged by the primary");
    }
    drop(conn);
    primary.stop_immediate();
    standby.promote();

    // What was lost: every acknowledged request of that window, each effect together with
    // its record; nothing of what had been replicated.
    let mut db = standby.connect("chaos");
    let records: i64 = db
        .query_one(
            "SELECT count(*) FROM idempotency.requests WHERE key LIKE 'lost%'",
            &[],
        )
        .expect("records")
        .get(0);
    let effects: i64 = db
        .query_one("SELECT count(*) FROM effects WHERE key LIKE 'lost%'", &[])
        .expect("effects")
        .get(0);
    println!(
        "asynchronous failover: {} requests acknowledged after the standby fell behind; \
         after promotion {records} records and {effects} effects of them remain",
        lost_keys.len()
    );
    assert_eq!(
        (records, effects),
        (0, 0),
        "an effect without its record, or the reverse"
    );
    let keys: Vec<String> = before.keys().cloned().collect();
    let report = audit(&mut db, &keys, &before);
    assert!(report.clean(), "replicated work lost: {report:?}");

    // The clients retry the lost requests on the promoted server: each applied once there.
    maintenance_runs_on(&standby);
    let retry = Arc::new(Stats::default());
    drive_to_completion(&[primary.port, standby.port], SUPERUSER, &retry, &lost_keys);
    let acked = retry.acked.lock().expect("acked").clone();
    let report = audit(&mut db, &lost_keys, &acked);
    assert!(report.clean(), "{report:?}");
    assert_eq!(report.effects, before.len() + lost_keys.len());
    assert_eq!(get(&retry.claims), lost_keys.len() as u64);
    no_crashes(&[&primary, &standby]);
}
