//! A real Postgres cluster for integration tests: one per test binary, started on first use
//! with the extension preloaded, and stopped by a watchdog when the test process exits.
//!
//! It uses the Postgres that `cargo pgrx test pgNN` built and installed the extension for
//! (found through `~/.pgrx/config.toml`). As root, the server runs as the `postgres` user.
//!
//! Also the helpers every test binary used to write for itself (fresh databases, a statement's
//! answer or SQLSTATE, a claim's outcome, counts, polling loops), so that each is written once
//! and behaves the same everywhere.
// Each test binary compiles this module and uses only some of it.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

pub use postgres::{Client, Error, GenericClient, NoTls};

pub struct Cluster {
    pub port: u16,
    pub datadir: PathBuf,
    pub bindir: PathBuf,
}

pub const MAJOR: &str = if cfg!(feature = "pg13") {
    "13"
} else if cfg!(feature = "pg14") {
    "14"
} else if cfg!(feature = "pg16") {
    "16"
} else if cfg!(feature = "pg17") {
    "17"
} else if cfg!(feature = "pg18") {
    "18"
} else {
    "15"
};

/// The pg_config of the Postgres under test.
pub fn pg_config() -> PathBuf {
    if let Ok(path) = std::env::var("IDEM_PG_CONFIG") {
        return PathBuf::from(path);
    }
    let home = std::env::var("PGRX_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").expect("HOME")).join(".pgrx"));
    let config = std::fs::read_to_string(home.join("config.toml"))
        .expect("~/.pgrx/config.toml (run pgrx-config/setup.sh)");
    let wanted = format!("pg{MAJOR}");
    config
        .lines()
        .filter_map(|line| line.split_once('='))
        .find(|(name, _)| name.trim() == wanted)
        .map(|(_, path)| PathBuf::from(path.trim().trim_matches('"')))
        .unwrap_or_else(|| panic!("{wanted} is not in ~/.pgrx/config.toml"))
}

pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.starts_with(b"0\n"))
        .unwrap_or(false)
}

/// A command run as the server's OS user.
pub fn as_server_user(program: &Path) -> Command {
    if is_root() {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"]).arg(program);
        cmd
    } else {
        Command::new(program)
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn run(cmd: &mut Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Extra postgresql.conf lines for this test binary's cluster.
pub static EXTRA_CONF: OnceLock<&'static str> = OnceLock::new();

pub fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(start)
}

/// The shared cluster with the maintenance worker on and a 200 ms naptime (tests/worker.rs,
/// tests/worker_security.rs). Must be the binary's first call of [`cluster`].
pub fn worker_cluster() -> &'static Cluster {
    EXTRA_CONF.get_or_init(|| "idempotency.worker_enabled = on\nidempotency.naptime = '200ms'\n");
    cluster()
}

/// A directory of the Postgres under test, as its pg_config names it (`--bindir`,
/// `--pkglibdir`, `--sharedir`).
pub fn pg_config_dir(flag: &str) -> PathBuf {
    let out = Command::new(pg_config())
        .arg(flag)
        .output()
        .unwrap_or_else(|e| panic!("pg_config {flag}: {e}"));
    PathBuf::from(String::from_utf8(out.stdout).expect("utf8").trim())
}

/// What `scripts/portable.sh ARGS` writes to standard output (the portable edition's SQL);
/// panics with its standard error if it fails.
pub fn portable_script(args: &[&str]) -> String {
    let out = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/portable.sh"))
        .args(args)
        .output()
        .expect("scripts/portable.sh");
    assert!(
        out.status.success(),
        "scripts/portable.sh {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf8")
}

/// A new cluster of its own (most tests share [`cluster`]'s).
pub fn start() -> Cluster {
    let bindir = pg_config_dir("--bindir");
    let port = free_port();
    let datadir =
        std::env::temp_dir().join(format!("idem-it-{MAJOR}-{}-{port}", std::process::id()));
    let _ = std::fs::remove_dir_all(&datadir);
    std::fs::create_dir_all(&datadir).expect("datadir");
    if is_root() {
        run(
            Command::new("chown")
                .args(["postgres:postgres"])
                .arg(&datadir),
            "chown datadir",
        );
    }
    run(
        as_server_user(&bindir.join("initdb"))
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
                "-D",
            ])
            .arg(&datadir),
        "initdb",
    );
    let conf = format!(
        "port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{dir}'\n\
         shared_preload_libraries = 'idempotency'\nfsync = off\nmax_connections = 100\n\
         log_min_messages = warning\n\
         # The maintenance worker only where a test binary turns it on (tests/worker.rs).\n\
         idempotency.worker_enabled = off\n{extra}\n",
        dir = datadir.display(),
        extra = EXTRA_CONF.get().copied().unwrap_or("")
    );
    let conf_path = datadir.join("postgresql.auto.conf");
    std::fs::write(&conf_path, conf).expect("write conf");
    if is_root() {
        run(
            Command::new("chown")
                .args(["postgres:postgres"])
                .arg(&conf_path),
            "chown conf",
        );
    }
    run(
        as_server_user(&bindir.join("pg_ctl"))
            .env_remove("RUST_BACKTRACE")
            .args(["-w", "-t", "60", "-l"])
            .arg(datadir.join("server.log"))
            .arg("-D")
            .arg(&datadir)
            .arg("start"),
        "pg_ctl start",
    );
    // Stop the server and remove its files once this test process is gone; the loop runs in
    // the background of a shell that exits at once.
    let watchdog = format!(
        "(while [ -d /proc/{pid} ]; do sleep 1; done; '{pg_ctl}' -D '{dir}' -m immediate stop; \
         rm -rf '{dir}') >/dev/null 2>&1 </dev/null &",
        pid = std::process::id(),
        pg_ctl = bindir.join("pg_ctl").display(),
        dir = datadir.display()
    );
    run(
        as_server_user(Path::new("/bin/sh")).args(["-c", &watchdog]),
        "start the watchdog",
    );
    let cluster = Cluster {
        port,
        datadir,
        bindir,
    };
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute("CREATE DATABASE idem_test")
        .expect("create database");
    let mut db = cluster.connect("idem_test");
    db.batch_execute("CREATE EXTENSION idempotency")
        .expect("create extension");
    cluster
}

impl Cluster {
    pub fn connect(&self, dbname: &str) -> Client {
        self.connect_as(dbname, "postgres")
    }

    /// A session of `user` in `dbname`.
    pub fn connect_as(&self, dbname: &str, user: &str) -> Client {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match Client::connect(
                &format!(
                    "host=127.0.0.1 port={} user={user} dbname={dbname} application_name=idem-it",
                    self.port
                ),
                NoTls,
            ) {
                Ok(client) => return client,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("connect to {dbname}: {e}"),
            }
        }
    }

    /// A session of `user` in `dbname` whose notices and warnings are collected.
    pub fn connect_collecting(
        &self,
        dbname: &str,
        user: &str,
    ) -> (Client, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
        let notices = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = notices.clone();
        let client = postgres::Config::new()
            .host("127.0.0.1")
            .port(self.port)
            .user(user)
            .dbname(dbname)
            .application_name("idem-it")
            .notice_callback(move |notice| {
                if let Ok(mut all) = sink.lock() {
                    all.push(notice.message().to_string());
                }
            })
            .connect(NoTls)
            .unwrap_or_else(|e| panic!("connect to {dbname} as {user}: {e}"));
        (client, notices)
    }

    /// A session in the test database.
    pub fn session(&self) -> Client {
        self.connect("idem_test")
    }

    /// A fresh, empty database `name` (a leftover of that name is dropped first, sessions and
    /// all: the maintenance worker may be connected to it), and a session in it. Tests that
    /// alter the extension's objects or need counters of their own each take one.
    pub fn empty_database(&self, name: &str) -> Client {
        self.drop_database(name);
        self.connect("postgres")
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("create database");
        self.connect(name)
    }

    /// Drop database `name` if it exists, ending its sessions.
    pub fn drop_database(&self, name: &str) {
        self.connect("postgres")
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .expect("drop database");
    }

    /// [`Cluster::empty_database`] with the extension created in it (its default version):
    /// a session of the owner.
    pub fn database(&self, name: &str) -> Client {
        let mut db = self.empty_database(name);
        db.batch_execute("CREATE EXTENSION idempotency")
            .expect("create extension");
        db
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.datadir.join("server.log")).unwrap_or_default()
    }
}

/// The SQLSTATE of a failed statement.
pub fn sqlstate(err: &Error) -> String {
    err.code()
        .map(|c| c.code().to_string())
        .unwrap_or_else(|| format!("no SQLSTATE: {err}"))
}

/// A statement's first column as text (`NULL` for SQL NULL), or `ERROR <sqlstate>` when it
/// fails: lets one assertion cover both the answers and the errors a test expects.
pub fn answer(client: &mut impl GenericClient, sql: &str) -> String {
    match client.query_one(sql, &[]) {
        Ok(row) => row
            .get::<_, Option<String>>(0)
            .unwrap_or_else(|| "NULL".into()),
        Err(e) => format!("ERROR {}", sqlstate(&e)),
    }
}

/// The outcome of `idem_claim(scope, key, hash)`, in a session or inside its open transaction.
pub fn claim(client: &mut impl GenericClient, scope: &str, key: &str, hash: &str) -> String {
    claim_attempt(client, scope, key, hash).0
}

/// (outcome, attempt) of `idem_claim(scope, key, hash)`; the attempt is NULL while another
/// session's claim of the key is uncommitted.
pub fn claim_attempt(
    client: &mut impl GenericClient,
    scope: &str,
    key: &str,
    hash: &str,
) -> (String, Option<i32>) {
    let row = client
        .query_one(
            "SELECT outcome::text, attempt FROM idem_claim($1, $2, $3)",
            &[&scope, &key, &hash],
        )
        .expect("claim");
    (row.get(0), row.get(1))
}

/// The single bigint a query returns (a count); panics with the query on error.
pub fn count(client: &mut impl GenericClient, sql: &str) -> i64 {
    client
        .query_one(sql, &[])
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .get(0)
}

/// How many records `scope` has in idempotency.requests.
pub fn records(client: &mut impl GenericClient, scope: &str) -> i64 {
    client
        .query_one(
            "SELECT count(*) FROM idempotency.requests WHERE scope = $1",
            &[&scope],
        )
        .expect("count")
        .get(0)
}

/// `idem_metrics()` as a map. Its counters are the cluster's: tests that compare them take
/// turns (see [`serial`]).
pub fn metrics(client: &mut impl GenericClient) -> HashMap<String, i64> {
    client
        .query("SELECT name, value FROM idem_metrics()", &[])
        .expect("idem_metrics")
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

/// Take a test binary's turn on `lock`; a test that panicked while holding it does not stop
/// the others (its own failure is reported already).
pub fn serial(lock: &'static Mutex<()>) -> MutexGuard<'static, ()> {
    lock.lock().unwrap_or_else(|e| e.into_inner())
}

/// Call `check` every 20 ms until it holds; how long that took. Panics with `what` after
/// `limit`. Every polling loop of the tests (lock waits, worker rounds, reloads) is this one
/// or [`wait_for_every`].
pub fn wait_for(what: &str, limit: Duration, check: impl FnMut() -> bool) -> Duration {
    wait_for_every(what, limit, Duration::from_millis(20), check)
}

/// [`wait_for`], calling `check` every `every` (shorter to catch a brief state, longer where
/// each check is costly).
pub fn wait_for_every(
    what: &str,
    limit: Duration,
    every: Duration,
    mut check: impl FnMut() -> bool,
) -> Duration {
    let started = Instant::now();
    loop {
        if check() {
            return started.elapsed();
        }
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(every);
    }
}

/// The text of the first ```sql block after `marker` in `doc` (a Markdown page's text).
pub fn sql_block_after(doc: &str, marker: &str) -> String {
    let after = doc
        .split_once(marker)
        .unwrap_or_else(|| panic!("{marker}"))
        .1;
    let start = after.split_once("```sql\n").expect("a sql block").1;
    start.split_once("```").expect("its end").0.to_string()
}

/// A repository file's text, by its path from the repository's top.
pub fn repo_file(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every row of the extension's four tables and of `effects` (a table of the test's own), as
/// one text: equal fingerprints before and after a refused call mean it wrote nothing.
pub fn fingerprint_sql(effects: &str) -> String {
    format!(
        "SELECT concat_ws('|', \
           (SELECT string_agg(r::text, ';' ORDER BY scope, key) FROM idempotency.requests r), \
           (SELECT string_agg(r::text, ';' ORDER BY consumer, message_id) FROM idempotency.inbox r), \
           (SELECT string_agg(r::text, ';' ORDER BY stream, entity) FROM idempotency.versions r), \
           (SELECT string_agg(r::text, ';' ORDER BY id) FROM idempotency.outbox r), \
           (SELECT string_agg(r::text, ';' ORDER BY r::text) FROM {effects} r))"
    )
}
