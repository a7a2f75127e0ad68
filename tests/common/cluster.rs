//! The clusters: started on first use with `initdb`, stopped by a watchdog when the test
//! process exits. Tests in tests/integration/ share [`cluster`] (a database per module),
//! [`bare_cluster`] or [`counted_cluster`]; the binaries with cluster-wide needs start their
//! own ([`worker_cluster`], [`start`], tests/clusters/faults/).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use super::{Client, NoTls};

pub struct Cluster {
    pub port: u16,
    pub datadir: PathBuf,
    pub bindir: PathBuf,
    /// Whether [`Cluster::database`] copies `idem_template` (see [`start_with`]).
    pub template: bool,
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

/// The cluster most tests share (the binary tests/integration/): the extension preloaded and
/// logical decoding on (the CDC outbox; no keepalive asks pg_recvlogical to confirm, so a
/// restarted stream redelivers). Each test module works in a database of its own
/// ([`own_database!`]); roles are the cluster's, so their names must differ between modules.
pub fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        start_with(
            "wal_level = logical\nmax_replication_slots = 10\nwal_sender_timeout = 0\n",
            true,
        )
    })
}

/// A shared cluster with no library loaded (the later shared_preload_libraries line wins):
/// the portable edition's.
pub fn bare_cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| start_with("shared_preload_libraries = ''\n", true))
}

/// A shared cluster for the tests that compare `idem_metrics()` counters, which are the
/// cluster's: only they use it, and they take turns ([`counted_turn`]).
pub fn counted_cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| start_with("", true))
}

/// A turn on [`counted_cluster`]: held for the whole test, by every test that uses it.
pub fn counted_turn() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    super::serial(&TURN)
}

/// The cluster of tests/clusters/worker/: the maintenance worker on, with a 200 ms naptime
/// (it visits every database, so its tests have a cluster of their own).
pub fn worker_cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(|| {
        start_with(
            "idempotency.worker_enabled = on\nidempotency.naptime = '200ms'\n",
            false,
        )
    })
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

/// A server of `bindir`'s Postgres in a new data directory (`NAME-PID-PORT` in the temp dir) on
/// a free port, with `conf` after its port, address and socket lines in postgresql.auto.conf;
/// stopped and removed once this test process is gone. Every test server starts here.
pub fn start_server(bindir: &Path, name: &str, conf: &str) -> (u16, PathBuf) {
    let port = free_port();
    let datadir = std::env::temp_dir().join(format!("{name}-{}-{port}", std::process::id()));
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
            .args(["-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"])
            .args(["--locale=C", "-D"])
            .arg(&datadir),
        "initdb",
    );
    let conf = format!(
        "port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{dir}'\n{conf}",
        dir = datadir.display()
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
    (port, datadir)
}

/// A new cluster of its own (most tests share [`cluster`]'s).
pub fn start() -> Cluster {
    start_with("", true)
}

/// A new cluster with `extra` postgresql.conf lines. With `template`, database `idem_template`
/// holds the extension, and [`Cluster::database`] copies it (faster than `CREATE EXTENSION`); it
/// takes no connections, so that a copy never waits (the worker skips it).
pub fn start_with(extra: &str, template: bool) -> Cluster {
    let bindir = pg_config_dir("--bindir");
    let conf = format!(
        "shared_preload_libraries = 'idempotency'\nfsync = off\nmax_connections = 100\n\
         log_min_messages = warning\n\
         # The maintenance worker only where a test turns it on (tests/clusters/worker/).\n\
         idempotency.worker_enabled = off\n{extra}\n"
    );
    let (port, datadir) = start_server(&bindir, &format!("idem-it-{MAJOR}"), &conf);
    let mut cluster = Cluster {
        port,
        datadir,
        bindir,
        template: false,
    };
    if template {
        let mut db = cluster.empty_database("idem_template");
        db.batch_execute("CREATE EXTENSION idempotency")
            .expect("create extension");
        drop(db);
        cluster
            .connect("postgres")
            .batch_execute(
                "ALTER DATABASE idem_template WITH ALLOW_CONNECTIONS false IS_TEMPLATE true",
            )
            .expect("idem_template");
        cluster.template = true;
    }
    drop(cluster.database("idem_test"));
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
        if self.template {
            self.drop_database(name);
            self.connect("postgres")
                .batch_execute(&format!("CREATE DATABASE {name} TEMPLATE idem_template"))
                .expect("create database from idem_template");
            return self.connect(name);
        }
        let mut db = self.empty_database(name);
        db.batch_execute("CREATE EXTENSION idempotency")
            .expect("create extension");
        db
    }

    pub fn log(&self) -> String {
        // Lossy: a logged argument may be any bytes, and one bad byte must not empty the log.
        String::from_utf8_lossy(&std::fs::read(self.datadir.join("server.log")).unwrap_or_default())
            .into_owned()
    }
}

/// A test module's own database on a shared cluster, made on first use, named after the module
/// (`claim::race` -> `claim_race`); the cluster's other calls go through it (`Deref`).
pub struct Db {
    pub cluster: &'static Cluster,
    pub name: String,
}

impl Db {
    pub fn new(cluster: &'static Cluster, module: &str) -> Db {
        let name = module
            .split_once("::")
            .map_or(module, |(_, m)| m)
            .replace("::", "_");
        drop(cluster.database(&name));
        Db { cluster, name }
    }

    /// A session in the module's database.
    pub fn session(&self) -> Client {
        self.cluster.connect(&self.name)
    }
}

impl std::ops::Deref for Db {
    type Target = Cluster;
    fn deref(&self) -> &Cluster {
        self.cluster
    }
}

/// `fn cluster()` of a test module: its [`Db`] on the shared cluster (or on the cluster the
/// argument names, e.g. `own_database!(common::counted_cluster)`).
#[macro_export]
macro_rules! own_database {
    () => {
        $crate::own_database!($crate::common::cluster);
    };
    ($cluster:path) => {
        /// This module's database (see `common::Db`).
        fn cluster() -> &'static $crate::common::Db {
            static DB: std::sync::OnceLock<$crate::common::Db> = std::sync::OnceLock::new();
            DB.get_or_init(|| $crate::common::Db::new($cluster(), module_path!()))
        }
    };
}
