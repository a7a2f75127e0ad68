//! The chaos audit (issue #16): N client sessions run three workflows over a shared key set
//! while a driver terminates client backends, SIGKILLs one backend, restarts the server with
//! `-m immediate` and terminates the maintenance worker and the launcher. Then every key is
//! driven to completion and audited from the effects table. The portable edition runs the same
//! load and audit, its upkeep called by a session of the test (chaos/portable.rs).
//!
//! IDEM_CHAOS_SESSIONS (16), IDEM_CHAOS_SECONDS (30), IDEM_CHAOS_SEED (1); scripts/chaos.sh
//! runs the long form. Runs on one Postgres major only, IDEM_FAULTS_MAJOR (16);
//! ignored on the others (build.rs, `idem_no_faults`).

use crate::faults;

use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use faults::audit::{audit, crashes, drive_to_completion, wait_no_processing};
use faults::env_u64;
use faults::server::Server;
use faults::workload::{Load, Rng, SCHEMA, SCOPE, SHORT_LEASE, SUPERUSER, add, get, request_of};

mod portable;

const NAPTIME_MS: u64 = 500;

/// What keeps the records: the native worker, or the portable edition's `idem_upkeep()`
/// called by a session of the test; the portable clients are a role given `idem_grant`'s app
/// profile, the native ones the superuser.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Edition {
    Native,
    Portable,
}

#[derive(Default)]
struct Chaos {
    client_terminations: AtomicU64,
    worker_terminations: AtomicU64,
    launcher_terminations: AtomicU64,
    upkeep_terminations: AtomicU64,
    sigkills: AtomicU64,
    restarts: AtomicU64,
    killed: Mutex<Vec<u32>>,
}

fn terminate_clients(server: &Server, rng: &mut Rng, chaos: &Chaos) {
    let mut admin = server.connect("chaos");
    let how_many = 1 + rng.below(3) as i64;
    if let Ok(row) = admin.query_one(
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM (SELECT pid \
         FROM pg_stat_activity WHERE application_name = 'idem-chaos' ORDER BY random() \
         LIMIT $1) s",
        &[&how_many],
    ) {
        add(&chaos.client_terminations, row.get::<_, i64>(0) as u64);
    }
}

fn terminate_workers(server: &Server, rng: &mut Rng, chaos: &Chaos) {
    let mut admin = server.connect("chaos");
    // Either one, or both at once.
    let which: &[&str] = match rng.below(3) {
        0 => &["idempotency launcher"],
        1 => &["idempotency maintenance"],
        _ => &["idempotency launcher", "idempotency maintenance"],
    };
    for kind in which {
        // A maintenance worker lives for one round only: watch for it for up to 2 s.
        let until = Instant::now() + Duration::from_secs(2);
        loop {
            let n = admin
                .query_one(
                    "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) \
                     FROM pg_stat_activity WHERE backend_type = $1",
                    &[kind],
                )
                .map(|row| row.get::<_, i64>(0) as u64)
                .unwrap_or(0);
            if kind.ends_with("launcher") {
                add(&chaos.launcher_terminations, n);
            } else {
                add(&chaos.worker_terminations, n);
            }
            if n > 0 || Instant::now() >= until {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// SIGKILL to one client backend: the postmaster resets every session and recovers.
fn sigkill(server: &Server, chaos: &Chaos) {
    let mut admin = server.connect("chaos");
    let Ok(row) = admin.query_one(
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'idem-chaos' \
         ORDER BY random() LIMIT 1",
        &[],
    ) else {
        return;
    };
    let pid: i32 = row.get(0);
    drop(admin);
    let status = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
    if status.is_ok_and(|s| s.success()) {
        if let Ok(mut killed) = chaos.killed.lock() {
            killed.push(pid as u32);
        }
        add(&chaos.sigkills, 1);
    }
    // Wait for the reset to end before the next action.
    drop(server.connect("chaos"));
}

fn restart(server: &Server, chaos: &Chaos) {
    server.restart_immediate();
    add(&chaos.restarts, 1);
}

/// At random moments until `stop`; at least one SIGKILL and one immediate restart.
fn drive_chaos(
    server: &Server,
    edition: Edition,
    chaos: &Chaos,
    seed: u64,
    stop: &AtomicBool,
    load: Duration,
) {
    let mut rng = Rng::new(seed ^ 0xc4a0);
    let started = Instant::now();
    while !stop.load(Relaxed) {
        std::thread::sleep(rng.millis(300, 2000));
        if stop.load(Relaxed) {
            break;
        }
        let elapsed = started.elapsed();
        if get(&chaos.sigkills) == 0 && elapsed > load * 35 / 100 {
            sigkill(server, chaos);
        } else if get(&chaos.restarts) == 0 && elapsed > load * 65 / 100 {
            restart(server, chaos);
        } else {
            match rng.below(100) {
                0..50 => terminate_clients(server, &mut rng, chaos),
                50..80 if edition == Edition::Native => terminate_workers(server, &mut rng, chaos),
                50..80 => portable::terminate_upkeep(server, chaos),
                80..90 => sigkill(server, chaos),
                _ => restart(server, chaos),
            }
        }
    }
}

#[test]
#[cfg_attr(
    idem_no_faults,
    ignore = "the fault tests run on IDEM_FAULTS_MAJOR only (default 16)"
)]
fn chaos_audit() {
    audit_under_chaos("chaos", Edition::Native, false, 16, 30);
}

/// The same load and audit on the portable edition (issue #32).
#[test]
#[cfg_attr(
    idem_no_faults,
    ignore = "the fault tests run on IDEM_FAULTS_MAJOR only (default 16)"
)]
fn chaos_audit_of_the_portable_edition() {
    audit_under_chaos("chaos_portable", Edition::Portable, false, 12, 30);
}

/// The same in the generations layout (docs/retention.md), with a 2 s window: the worker
/// rotates about every round, moving every live record under the faults (issue #24, part 4).
#[test]
#[cfg_attr(
    idem_no_faults,
    ignore = "the fault tests run on IDEM_FAULTS_MAJOR only (default 16)"
)]
fn chaos_audit_in_the_generations_layout() {
    audit_under_chaos("chaos_gen", Edition::Native, true, 8, 20);
}

/// The native edition's server: the library preloaded, the worker on.
fn native_server(name: &str, sessions: u64) -> Server {
    let server = Server::init(
        name,
        &format!(
            "idempotency.naptime = '{NAPTIME_MS}ms'\nmax_connections = {}\n",
            sessions * 2 + 20
        ),
    );
    server.start();
    server
        .connect("postgres")
        .batch_execute("CREATE DATABASE chaos")
        .expect("create database");
    server
        .connect("chaos")
        .batch_execute(SCHEMA)
        .expect("schema");
    server
}

fn audit_under_chaos(name: &str, edition: Edition, generations: bool, sessions: u64, seconds: u64) {
    let sessions = env_u64("IDEM_CHAOS_SESSIONS", sessions).max(1);
    let seconds = env_u64("IDEM_CHAOS_SECONDS", seconds);
    let seed = env_u64("IDEM_CHAOS_SEED", 1);
    let load = Duration::from_secs(seconds);
    eprintln!("{name}: {edition:?}, {sessions} sessions, {seconds} s, seed {seed}");

    let (server, user) = match edition {
        Edition::Native => (native_server(name, sessions), SUPERUSER),
        Edition::Portable => (portable::server(name, sessions), portable::APP),
    };
    if generations {
        server
            .connect("chaos")
            .batch_execute(
                "SELECT idem_set_layout('generations'); \
                 UPDATE idempotency.layout SET generation_window = '2 s'",
            )
            .expect("the generations layout");
    }

    let chaos = Chaos::default();
    let mut traffic = Load::new(vec![server.port]);
    traffic.user = user;
    let (stats, ports) = (&traffic.stats, &traffic.ports);
    // Runs until the audit is done, as the worker would.
    let upkeep = (edition == Edition::Portable)
        .then(|| portable::Upkeep::start(server.port, NAPTIME_MS, stats.clone()));
    let started = Instant::now();
    std::thread::scope(|s| {
        let clients = traffic.spawn(
            s,
            sessions,
            "k",
            |i| seed.wrapping_mul(1000).wrapping_add(i),
            Duration::from_secs(120),
        );
        let driver = s.spawn(|| drive_chaos(&server, edition, &chaos, seed, &traffic.stop, load));
        std::thread::sleep(load);
        traffic.stop.store(true, Relaxed);
        driver.join().expect("chaos driver");
        for c in clients {
            c.join().expect("client session");
        }
    });
    let load_secs = started.elapsed().as_secs_f64();

    // The claims abandoned at the end are reclaimed by the worker (or the upkeep): no record is
    // left processing beyond its lease + a launcher restart (5 s, if the driver had just
    // terminated it) + a worker round, + 5 s of slack for a loaded machine (the time it took
    // is printed).
    let mut db = server.connect("chaos");
    // Plus claims that nobody will ever complete: the first transaction of the two-transaction
    // workflow, whose clients went away.
    for i in 0..8 {
        let key = format!("gone{i}");
        db.execute(
            "SELECT idem_claim($1, $2, idem_hash($3::text::jsonb), lease => $4::text::interval)",
            &[
                &SCOPE,
                &key,
                &request_of(&key),
                &format!("{} ms", SHORT_LEASE.as_millis()),
            ],
        )
        .expect("a claim left behind");
        stats.keys.lock().expect("keys").insert(key);
    }
    let stopped_at = Instant::now();
    let abandoned: i64 = db
        .query_one(
            "SELECT count(*) FROM idempotency.requests WHERE status = 'processing'",
            &[],
        )
        .expect("count processing")
        .get(0);
    let limit = SHORT_LEASE
        + Duration::from_secs(5)
        + Duration::from_millis(NAPTIME_MS)
        + Duration::from_secs(5);
    let left_processing = wait_no_processing(&mut db, stopped_at + limit);
    let cleared_after = stopped_at.elapsed().as_secs_f64();

    let mut keys: Vec<String> = stats.keys.lock().expect("keys").iter().cloned().collect();
    keys.sort();
    drive_to_completion(ports, user, stats, &keys);
    let acked = stats.acked.lock().expect("acked").clone();
    let report = audit(&mut db, &keys, &acked);
    let upkept = upkeep.map(portable::Upkeep::stop);
    let killed = chaos.killed.lock().expect("killed").clone();
    let crashed = crashes(&server.log(), &killed);
    let unexpected = stats.unexpected.lock().expect("unexpected").clone();

    let layout = if generations {
        let switched: String = db
            .query_one(
                "SELECT 'generations, current ' || current_generation || ', switched ' || \
                 round(extract(epoch FROM now() - switched_at)) || ' s ago' FROM idempotency.layout",
                &[],
            )
            .expect("layout")
            .get(0);
        switched
    } else {
        "flat".into()
    };
    let maintenance = match &upkept {
        None => format!(
            "{} maintenance workers, {} launchers",
            get(&chaos.worker_terminations),
            get(&chaos.launcher_terminations)
        ),
        Some(u) => format!(
            "{} upkeep sessions (upkeep: {} rounds, {} reclaimed, {} reconnects)",
            get(&chaos.upkeep_terminations),
            u.rounds,
            u.reclaimed,
            u.reconnects
        ),
    };
    println!(
        "chaos figures ({edition:?} edition, {sessions} sessions, {load_secs:.0} s of load, seed {seed}, {layout}):\n\
         requests            {}\n\
         keys                {}\n\
         claims              {}\n\
         replays             {}\n\
         takeovers           {}\n\
         fenced (P4012)      {}\n\
         reclaimed late      {} (P4010/P4013: the worker or upkeep reclaimed the lease first)\n\
         late sessions       {}\n\
         busy retries        {}\n\
         terminations        {} clients, {maintenance}\n\
         SIGKILLs            {}\n\
         immediate restarts  {}\n\
         reconnects          {}\n\
         connection errors   {}\n\
         effects             {}\n\
         duplicates          {}\n\
         lost                {}\n\
         orphan effects      {}\n\
         attempt mismatches  {}\n\
         abandoned requests  {} when the load ended; {abandoned} claims processing (8 left by the test); \
         {left_processing} left {cleared_after:.1} s later\n\
         unexpected errors   {}\n\
         crashes in the log  {}",
        get(&stats.requests),
        report.keys,
        get(&stats.claims),
        get(&stats.replays),
        get(&stats.takeovers),
        get(&stats.fenced),
        get(&stats.lease_lost),
        get(&stats.late_sessions),
        get(&stats.busy),
        get(&chaos.client_terminations),
        get(&chaos.sigkills),
        get(&chaos.restarts),
        get(&stats.reconnects),
        get(&stats.connection_errors),
        report.effects,
        report.duplicates,
        report.lost,
        report.orphans,
        report.mismatched,
        get(&stats.abandoned),
        unexpected.len(),
        crashed.len(),
    );
    for p in report.problems.iter().take(20) {
        println!("  audit: {p}");
    }
    for u in unexpected.iter().take(20) {
        println!("  unexpected: {u}");
    }
    for c in &crashed {
        println!("  crash: {c}");
    }
    assert!(
        report.clean(),
        "the audit failed: {} duplicates, {} lost, {} orphans, {} mismatched, {} unfinished",
        report.duplicates,
        report.lost,
        report.orphans,
        report.mismatched,
        report.unfinished
    );
    assert_eq!(left_processing, 0, "records left processing");
    assert!(
        unexpected.is_empty(),
        "{} unexpected errors",
        unexpected.len()
    );
    assert!(crashed.is_empty(), "crashed backends: {crashed:?}");
    assert!(get(&chaos.sigkills) >= 1, "no SIGKILL was sent");
    assert!(get(&chaos.restarts) >= 1, "no immediate restart");
    assert!(report.succeeded > 0 && get(&stats.replays) > 0);
    assert!(get(&stats.fenced) > 0, "no late completion was fenced off");
}
