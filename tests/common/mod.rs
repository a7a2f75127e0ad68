//! A real Postgres cluster for integration tests: one per test binary, started on first use
//! with the extension preloaded, and stopped by a watchdog when the test process exits.
//!
//! It uses the Postgres that `cargo pgrx test pgNN` built and installed the extension for
//! (found through `~/.pgrx/config.toml`). As root, the server runs as the `postgres` user.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub use postgres::{Client, Error, NoTls};

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

/// A new cluster of its own (most tests share [`cluster`]'s).
pub fn start() -> Cluster {
    let bindir = PathBuf::from(
        String::from_utf8(
            Command::new(pg_config())
                .arg("--bindir")
                .output()
                .expect("pg_config")
                .stdout,
        )
        .expect("utf8")
        .trim(),
    );
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
