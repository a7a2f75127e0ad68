//! Clusters that a fault test can kill, restart and promote: one data directory each, started
//! from the installation under test (`common::bindir()`), stopped by a watchdog when the test
//! process exits.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use postgres::{Client, NoTls};

use crate::common::{as_server_user, free_port, is_root, pg_config};

/// The bindir of the installation under test (IDEM_PG_CONFIG, else ~/.pgrx/config.toml).
pub fn bindir() -> PathBuf {
    let out = Command::new(pg_config())
        .arg("--bindir")
        .output()
        .expect("pg_config --bindir");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

pub struct Server {
    pub name: String,
    pub port: u16,
    pub datadir: PathBuf,
    pub bindir: PathBuf,
}

fn run(cmd: &mut Command, what: &str) {
    let out = cmd
        .env_remove("RUST_BACKTRACE")
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn chown(path: &Path) {
    if is_root() {
        run(
            Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(path),
            "chown",
        );
    }
}

/// The settings every fault-test server gets; `extra` comes last, so it wins.
fn conf(port: u16, dir: &Path, extra: &str) -> String {
    format!(
        "port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{dir}'\n\
         shared_preload_libraries = 'idempotency'\nmax_connections = 100\n\
         log_min_messages = warning\nwal_level = replica\nmax_wal_senders = 4\n\
         hot_standby = on\nidempotency.worker_enabled = on\nidempotency.naptime = '500ms'\n{extra}\n",
        dir = dir.display()
    )
}

impl Server {
    fn new(name: &str) -> Server {
        let port = free_port();
        let datadir = std::env::temp_dir().join(format!(
            "idem-{name}-{}-{}-{port}",
            crate::common::MAJOR,
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&datadir);
        Server {
            name: name.to_string(),
            port,
            datadir,
            bindir: bindir(),
        }
    }

    fn watchdog(&self) {
        // Stop the server and remove its files once this test process is gone.
        let script = format!(
            "(while [ -d /proc/{pid} ]; do sleep 1; done; '{pg_ctl}' -D '{dir}' -m immediate stop; \
             rm -rf '{dir}') >/dev/null 2>&1 </dev/null &",
            pid = std::process::id(),
            pg_ctl = self.bindir.join("pg_ctl").display(),
            dir = self.datadir.display()
        );
        run(
            as_server_user(Path::new("/bin/sh")).args(["-c", &script]),
            "start the watchdog",
        );
    }

    fn write_conf(&self, extra: &str) {
        let path = self.datadir.join("postgresql.auto.conf");
        let mut text = std::fs::read_to_string(&path).unwrap_or_default();
        text.push_str(&conf(self.port, &self.datadir, extra));
        std::fs::write(&path, text).expect("write conf");
        chown(&path);
    }

    /// A fresh cluster (not started), `extra` appended to its configuration.
    pub fn init(name: &str, extra: &str) -> Server {
        let server = Server::new(name);
        std::fs::create_dir_all(&server.datadir).expect("datadir");
        chown(&server.datadir);
        run(
            as_server_user(&server.bindir.join("initdb"))
                .args(["-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"])
                .args(["--locale=C", "-D"])
                .arg(&server.datadir),
            "initdb",
        );
        server.write_conf(extra);
        server.watchdog();
        server
    }

    /// A hot standby of `primary` (pg_basebackup -R), not started.
    pub fn standby_of(primary: &Server, name: &str, extra: &str) -> Server {
        let server = Server::new(name);
        run(
            as_server_user(&server.bindir.join("pg_basebackup"))
                .args(["-h", "127.0.0.1", "-U", "postgres", "-X", "stream", "-R"])
                .args(["--no-sync", "-c", "fast", "-p"])
                .arg(primary.port.to_string())
                .arg("-D")
                .arg(&server.datadir),
            "pg_basebackup",
        );
        let _ = std::fs::remove_file(server.datadir.join("server.log"));
        // Our own conninfo rather than the one -R writes: that one is spelled for the libpq of
        // pg_basebackup, which may be newer than the server's (unknown options are FATAL).
        server.write_conf(&format!(
            "primary_conninfo = 'host=127.0.0.1 port={} user=postgres application_name={name}'\n{extra}",
            primary.port
        ));
        server.watchdog();
        server
    }

    pub fn log_path(&self) -> PathBuf {
        self.datadir.join("server.log")
    }

    fn pg_ctl(&self, args: &[&str], what: &str) {
        run(
            as_server_user(&self.bindir.join("pg_ctl"))
                .args(["-w", "-t", "120", "-D"])
                .arg(&self.datadir)
                .arg("-l")
                .arg(self.log_path())
                .args(args),
            what,
        );
    }

    pub fn start(&self) {
        self.pg_ctl(&["start"], "pg_ctl start");
    }

    /// `pg_ctl restart -m immediate`: every process is killed, then crash recovery.
    pub fn restart_immediate(&self) {
        self.pg_ctl(
            &["-m", "immediate", "restart"],
            "pg_ctl restart -m immediate",
        );
    }

    pub fn stop_immediate(&self) {
        self.pg_ctl(&["-m", "immediate", "stop"], "pg_ctl stop -m immediate");
    }

    pub fn promote(&self) {
        self.pg_ctl(&["promote"], "pg_ctl promote");
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    pub fn conninfo(&self, dbname: &str) -> String {
        self.conninfo_as(dbname, "postgres")
    }

    pub fn conninfo_as(&self, dbname: &str, user: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user={user} dbname={dbname} application_name=idem-admin \
             connect_timeout=5",
            self.port
        )
    }

    /// A session, retried for up to a minute (the server may be recovering).
    pub fn connect(&self, dbname: &str) -> Client {
        self.connect_as(dbname, "postgres")
    }

    /// A session of `user`, retried as [`Server::connect`]'s.
    pub fn connect_as(&self, dbname: &str, user: &str) -> Client {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match Client::connect(&self.conninfo_as(dbname, user), NoTls) {
                Ok(client) => return client,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("connect to {} {dbname}: {e}", self.name),
            }
        }
    }
}
