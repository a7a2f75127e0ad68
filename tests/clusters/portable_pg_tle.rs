//! The pg_tle route (issue 21): pg_tle 1.5.2 built by `scripts/pg_tle.sh` into a copy of the
//! Postgres under test without the native extension's files (as on a managed host), loaded
//! with shared_preload_libraries; a non-superuser database owner with `pgtle_admin` runs
//! `scripts/portable.sh --pg-tle`, then `CREATE EXTENSION idempotency` and the README's
//! example; and a database on an older registered version moves to this one through the
//! update path with `ALTER EXTENSION idempotency UPDATE`, keeping its records. pg_tle's
//! `CREATE EXTENSION` runs the edition with `search_path` set to its schema: operators planted
//! there beforehand are neither bound into the tables nor run (`common::planted`).
//!
//! database.dev's layout (`scripts/portable.sh --dbdev`) installed the way dbdev installs it:
//! tests/clusters/portable_pg_tle/dbdev.rs.
//!
//! Runs when `IDEM_PGTLE=1` (pgrx-config/test.sh sets it for one major, default 17); otherwise
//! it is ignored (build.rs, `idem_no_pgtle`).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use postgres::{Client, NoTls};

mod dbdev;

fn run(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A server of the pg_tle copy on a free port, stopped when this process ends.
fn start(bindir: &Path) -> u16 {
    let conf = "shared_preload_libraries = 'pg_tle'\nfsync = off\n";
    common::start_server(bindir, "idem-pgtle", conf).0
}

/// pg_tle built for the Postgres under test, and one server of it for this binary's tests.
fn server() -> u16 {
    static PORT: OnceLock<u16> = OnceLock::new();
    *PORT.get_or_init(|| {
        let dest = PathBuf::from(format!("/var/tmp/idem-pgtle/{}", common::MAJOR));
        let pg_config = run(
            Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/pg_tle.sh"))
                .arg(common::pg_config())
                .arg(&dest),
            "scripts/pg_tle.sh",
        );
        let bindir = PathBuf::from(run(
            Command::new(pg_config.lines().last().expect("path")).arg("--bindir"),
            "pg_config",
        ));
        start(&bindir)
    })
}

/// `CREATE EXTENSION pg_tle` in `db` and `pgtle_admin` for `owner`, one database at a time: the
/// first creates the cluster-wide role pgtle_admin, and two at once collide on it.
fn with_pg_tle(port: u16, db: &str, owner: &str) {
    static ONE: Mutex<()> = Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    connect(port, db, "postgres")
        .batch_execute(&format!(
            "CREATE EXTENSION pg_tle; GRANT pgtle_admin TO {owner}"
        ))
        .expect("pg_tle");
}

fn connect(port: u16, db: &str, user: &str) -> Client {
    Client::connect(
        &format!("host=127.0.0.1 port={port} user={user} dbname={db}"),
        NoTls,
    )
    .unwrap_or_else(|e| panic!("connect {db} as {user}: {e}"))
}

fn text(db: &mut Client, sql: &str) -> String {
    db.query_one(sql, &[])
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .get(0)
}

/// An older portable release registered by `db`'s role and created: the install body of
/// `tle` (`scripts/portable.sh --pg-tle`) saying 0.1.9.
fn create_older_release(db: &mut Client, tle: &str) {
    let tag = "$_idem_portable_$";
    let body = tle
        .split(&format!("'install', {tag}\n"))
        .nth(1)
        .expect("install body");
    let body = body.split(&format!("\n{tag});")).next().expect("its end");
    let old = body.replace(
        "SELECT '0.2.0'::pg_catalog.text",
        "SELECT '0.1.9'::pg_catalog.text",
    );
    assert_ne!(old, body, "idem_version's text was found");
    db.execute(
        "SELECT pgtle.install_extension('idempotency', '0.1.9', 'older', $1, '{}'::text[])",
        &[&old],
    )
    .expect("register 0.1.9");
    db.batch_execute("CREATE EXTENSION idempotency VERSION '0.1.9'")
        .expect("create 0.1.9");
}

#[test]
#[cfg_attr(
    idem_no_pgtle,
    ignore = "pg_tle: IDEM_PGTLE=1 (pgrx-config/test.sh: 17)"
)]
fn pg_tle_install_create_extension_and_update_path() {
    let port = server();
    let mut admin = connect(port, "postgres", "postgres");
    for sql in [
        "CREATE ROLE tle_owner LOGIN NOSUPERUSER",
        "CREATE DATABASE tle_old OWNER tle_owner",
        "CREATE DATABASE tle_new OWNER tle_owner",
    ] {
        admin.batch_execute(sql).expect(sql);
    }
    with_pg_tle(port, "tle_old", "tle_owner");
    let mut owner = connect(port, "tle_old", "tle_owner");
    assert_eq!(
        text(
            &mut owner,
            "SELECT rolsuper::text FROM pg_roles WHERE rolname = current_user"
        ),
        "false"
    );

    // An older portable release, registered first: the same script saying 0.1.9.
    let tle = common::portable_script(&["--pg-tle"]);
    create_older_release(&mut owner, &tle);
    owner
        .batch_execute(
            "SELECT idem_claim('pay', 'k', 'h'); SELECT idem_complete('pay', 'k', '{\"id\": 1}')",
        )
        .expect("a record on 0.1.9");
    assert_eq!(text(&mut owner, "SELECT idem_version()"), "0.1.9");

    // This release through the user's command, then the update path.
    owner
        .batch_execute(&tle)
        .expect("scripts/portable.sh --pg-tle");
    owner
        .batch_execute("ALTER EXTENSION idempotency UPDATE")
        .expect("update");
    assert_eq!(
        text(
            &mut owner,
            "SELECT extversion FROM pg_extension WHERE extname = 'idempotency'"
        ),
        "0.2.0"
    );
    assert_eq!(text(&mut owner, "SELECT idem_version()"), "0.2.0");
    assert_eq!(
        text(
            &mut owner,
            "SELECT outcome::text || ' ' || response::text FROM idem_claim('pay', 'k', 'h')"
        ),
        "replay_success {\"id\": 1}"
    );
    // The tables are extension members dumped with their rows: requests, inbox, versions,
    // outbox, its id sequence and the CDC secret.
    assert_eq!(
        text(
            &mut owner,
            "SELECT cardinality(extconfig)::text FROM pg_extension WHERE extname = 'idempotency'"
        ),
        "6"
    );
    // Running the command again changes nothing and fails nothing.
    owner
        .batch_execute(&tle)
        .expect("scripts/portable.sh --pg-tle again");

    // A new database: CREATE EXTENSION gets this version, and the README's example runs.
    with_pg_tle(port, "tle_new", "tle_owner");
    let mut fresh = connect(port, "tle_new", "tle_owner");
    fresh
        .batch_execute(&tle)
        .expect("register in the second database");
    fresh
        .batch_execute("CREATE EXTENSION idempotency")
        .expect("create");
    assert_eq!(
        text(
            &mut fresh,
            "SELECT extversion FROM pg_extension WHERE extname = 'idempotency'"
        ),
        "0.2.0"
    );
    let readme = common::repo_file("README.md");
    fresh
        .batch_execute(&common::sql_block_after(
            &readme,
            "## The claim protocol in one screen",
        ))
        .expect("the README's claim example");
    assert_eq!(
        text(
            &mut fresh,
            "SELECT outcome::text FROM idem_claim('payments', 'order-42', idem_hash('{\"amount\": 10, \"currency\": \"EUR\"}'::jsonb))"
        ),
        "replay_success"
    );
    let c_functions: i64 = fresh
        .query_one(
            "SELECT count(*) FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e' \
             JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idempotency' \
             JOIN pg_language l ON l.oid = p.prolang WHERE l.lanname NOT IN ('sql', 'plpgsql')",
            &[],
        )
        .expect("languages")
        .get(0);
    assert_eq!(c_functions, 0, "SQL and PL/pgSQL only");
}

/// Database `db` of the pg_tle server, owned by `{db}_owner` with pg_tle, where the role
/// `planter` planted its look-alike operators (`common::planted`): the port.
fn planted_database(db: &str) -> u16 {
    let port = server();
    let owner = format!("{db}_owner");
    let mut admin = connect(port, "postgres", "postgres");
    for sql in [
        format!("CREATE ROLE {owner} LOGIN NOSUPERUSER"),
        format!("CREATE DATABASE {db} OWNER {owner}"),
    ] {
        admin.batch_execute(&sql).expect(&sql);
    }
    with_pg_tle(port, db, &owner);
    connect(port, db, "postgres")
        .batch_execute(common::planted::PLANTER)
        .expect("role planter");
    connect(port, db, "planter")
        .batch_execute(common::planted::PLANT)
        .expect("planter plants its operators");
    port
}

#[test]
#[cfg_attr(
    idem_no_pgtle,
    ignore = "pg_tle: IDEM_PGTLE=1 (pgrx-config/test.sh: 17)"
)]
fn pg_tle_create_extension_binds_no_planted_operator() {
    let port = planted_database("tle_planted");
    let mut owner = connect(port, "tle_planted", "tle_planted_owner");
    owner
        .batch_execute(&common::portable_script(&["--pg-tle"]))
        .expect("scripts/portable.sh --pg-tle");
    owner
        .batch_execute("CREATE EXTENSION idempotency")
        .expect("create");
    assert_eq!(
        common::planted::bound_to_planted(&mut owner),
        Vec::<String>::new()
    );
    common::planted::exercise(&mut owner);
    assert_eq!(
        common::planted::planted_calls(&mut owner),
        0,
        "a planted operator ran"
    );
}

/// A superuser who registers this release and runs `ALTER EXTENSION idempotency UPDATE`
/// through pg_tle, in a database whose owner made the install hostile (look-alikes of the
/// edition's functions, a cast of its enum, triggers, a rule) and where an ordinary role
/// planted operators in the functions' schema: none of their code runs.
#[test]
#[cfg_attr(
    idem_no_pgtle,
    ignore = "pg_tle: IDEM_PGTLE=1 (pgrx-config/test.sh: 17)"
)]
fn a_superuser_updating_through_pg_tle_runs_nothing_of_the_owner_or_a_planter() {
    let port = planted_database("tle_hostile");
    let tle = common::portable_script(&["--pg-tle"]);
    let mut owner = connect(port, "tle_hostile", "tle_hostile_owner");
    create_older_release(&mut owner, &tle);
    owner.batch_execute(common::planted::MARK).expect("marks");
    owner
        .batch_execute(common::planted::UPDATE_PLANTS)
        .expect("the owner's plants");
    let mut su = connect(port, "tle_hostile", "postgres");
    su.batch_execute(&tle)
        .expect("the superuser registers 0.2.0");
    su.batch_execute("ALTER EXTENSION idempotency UPDATE")
        .expect("the update goes through");
    assert_eq!(
        text(
            &mut su,
            "SELECT extversion FROM pg_extension WHERE extname = 'idempotency'"
        ),
        "0.2.0"
    );
    assert_eq!(
        text(&mut su, "SELECT count(*)::text FROM public.marks"),
        "0",
        "the owner's code ran during the update"
    );
    assert_eq!(
        common::planted::planted_calls(&mut su),
        0,
        "a planted operator ran"
    );
}
