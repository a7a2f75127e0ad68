//! The chaos audit's portable edition: a server without the library, `scripts/portable.sh`
//! installed by a database owner who is not a superuser, the clients a role given
//! `idem_grant`'s app profile, and `idem_upkeep()` called every naptime by a session of the
//! owner, as pg_cron would run it, in place of the worker. The driver terminates that session
//! where it would terminate the worker and the launcher.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::Duration;

use postgres::{Client, NoTls};

use super::Chaos;
use crate::common;
use crate::faults::server::Server;
use crate::faults::workload::{EFFECTS, Stats, add};

/// The owner of database `chaos` and of the edition's tables; the upkeep runs as it.
pub const OWNER: &str = "chaos_owner";
/// The clients' role.
pub const APP: &str = "chaos_app";
const UPKEEP_APP_NAME: &str = "idem-upkeep";

/// A started server, the portable edition installed in its database `chaos`, the effects
/// table and function the owner's and granted to [`APP`].
pub fn server(name: &str, sessions: u64) -> Server {
    let server = Server::init(
        name,
        &format!(
            "shared_preload_libraries = ''\nmax_connections = {}\n",
            sessions * 2 + 20
        ),
    );
    server.start();
    let mut admin = server.connect("postgres");
    for sql in [
        format!("CREATE ROLE {OWNER} LOGIN NOSUPERUSER"),
        format!("CREATE ROLE {APP} LOGIN NOSUPERUSER"),
        format!("CREATE DATABASE chaos OWNER {OWNER}"),
    ] {
        admin.batch_execute(&sql).expect("roles and database");
    }
    let mut owner = server.connect_as("chaos", OWNER);
    owner
        .batch_execute(&common::portable_script(&[]))
        .expect("the portable edition installs");
    owner.batch_execute(EFFECTS).expect("effects");
    owner
        .batch_execute(&format!(
            "SELECT idem_grant('{APP}', 'app'); \
             GRANT SELECT, INSERT ON effects TO {APP}; \
             GRANT USAGE ON SEQUENCE effects_id_seq TO {APP}"
        ))
        .expect("grants");
    server
}

/// Terminates the upkeep session (idle between rounds, or in one).
pub(super) fn terminate_upkeep(server: &Server, chaos: &Chaos) {
    let mut admin = server.connect("chaos");
    if let Ok(row) = admin.query_one(
        "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE application_name = $1",
        &[&UPKEEP_APP_NAME],
    ) {
        add(&chaos.upkeep_terminations, row.get::<_, i64>(0) as u64);
    }
}

/// What the upkeep did.
#[derive(Default)]
pub struct Upkept {
    pub rounds: u64,
    pub reclaimed: i64,
    pub reconnects: u64,
}

/// The thread calling `idem_upkeep()` until [`Upkeep::stop`].
pub struct Upkeep {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Upkept>,
}

impl Upkeep {
    /// A round every `naptime_ms`; an error other than a lost session goes to
    /// `stats.unexpected`, as a client's would.
    pub fn start(port: u16, naptime_ms: u64, stats: Arc<Stats>) -> Upkeep {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            rounds(port, Duration::from_millis(naptime_ms), &flag, &stats)
        });
        Upkeep { stop, thread }
    }

    pub fn stop(self) -> Upkept {
        self.stop.store(true, Relaxed);
        self.thread.join().expect("the upkeep thread")
    }
}

fn rounds(port: u16, naptime: Duration, stop: &AtomicBool, stats: &Stats) -> Upkept {
    let conninfo = format!(
        "host=127.0.0.1 port={port} user={OWNER} dbname=chaos \
         application_name={UPKEEP_APP_NAME} connect_timeout=2"
    );
    let mut done = Upkept::default();
    let mut session: Option<Client> = None;
    while !stop.load(Relaxed) {
        if session.as_ref().is_none_or(Client::is_closed) {
            match Client::connect(&conninfo, NoTls) {
                Ok(c) => {
                    done.reconnects += 1;
                    session = Some(c);
                }
                Err(_) => {
                    // The server is restarting or recovering.
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
            }
        }
        let client = session.as_mut().expect("a session");
        match client.query_one("SELECT reclaimed FROM idem_upkeep()", &[]) {
            // NULL: the upkeep left the table alone (a foreign trigger), which nothing here plants.
            Ok(row) => match row.get::<_, Option<i64>>(0) {
                Some(n) => {
                    done.rounds += 1;
                    done.reclaimed += n;
                }
                None => stats.unexpected("idem_upkeep skipped idempotency.requests".into()),
            },
            Err(e) => match e.code().map(|c| c.code()) {
                None => session = None,
                Some(c) if c.starts_with("57P") || c.starts_with("08") => session = None,
                Some(c) => {
                    let message = e.as_db_error().map(|d| d.message()).unwrap_or_default();
                    stats.unexpected(format!("idem_upkeep: {c} {message}"));
                }
            },
        }
        std::thread::sleep(naptime);
    }
    done
}
