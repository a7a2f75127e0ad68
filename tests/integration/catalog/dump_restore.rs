//! pg_dump / pg_restore: a database with records of every status, inbox, versions and
//! outbox rows is dumped (custom format) and restored into a fresh database of a second,
//! fresh cluster of the same major. pg_dump keeps the extension's tables' rows because the
//! install script marks them with pg_extension_config_dump (sql/bootstrap.sql,
//! sql/consumers.sql), and the outbox's identity sequence with them.

use crate::common;
use crate::fixtures;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use common::Cluster;

crate::own_database!();

const CDC_ID_SQL: &str =
    "SELECT idempotency.cdc_message('t', 'k', '{}', NULL)::jsonb->>'message_id'";

fn run(program: &Path, args: &[&str]) {
    let out = Command::new(program)
        .env_remove("RUST_BACKTRACE")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    assert!(
        out.status.success(),
        "{} {args:?} failed:\n{}{}",
        program.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn conn_args(c: &Cluster) -> Vec<String> {
    vec![
        "-h".into(),
        "127.0.0.1".into(),
        "-p".into(),
        c.port.to_string(),
        "-U".into(),
        "postgres".into(),
    ]
}

#[test]
fn dump_and_restore_into_a_fresh_cluster() {
    let t0 = Instant::now();
    let source = cluster();
    let mut admin = source.connect("postgres");
    admin
        .batch_execute("DROP DATABASE IF EXISTS dumped")
        .expect("drop database");
    admin
        .batch_execute("CREATE DATABASE dumped")
        .expect("create database");
    let mut db = source.connect("dumped");
    db.batch_execute("CREATE EXTENSION idempotency")
        .expect("create extension");
    fixtures::write_data(&mut db);
    // A grant on the extension's objects: pg_dump keeps it as a change to their initial
    // privileges (the role itself is the cluster's: the target cluster gets it by hand).
    db.batch_execute(
        "DO $$ BEGIN CREATE ROLE idem_dump_app; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
         SELECT idem_grant('idem_dump_app', 'app');",
    )
    .expect("grant");
    let rows = fixtures::rows(&mut db);
    // A cdc_message id, keyed by this database's secret (docs/cdc.md): the restore keeps it.
    let cdc_id = CDC_ID_SQL;
    let id_before: String = db.query_one(cdc_id, &[]).expect("cdc id").get(0);
    let max_id: i64 = db
        .query_one("SELECT max(id) FROM idempotency.outbox", &[])
        .expect("max id")
        .get(0);
    drop(db);

    let dump = std::env::temp_dir().join(format!("idem-dump-{}.pgdump", std::process::id()));
    let dump_path = dump.to_string_lossy().into_owned();
    let mut args = conn_args(source);
    args.extend(["-Fc", "-d", "dumped", "-f", &dump_path].map(String::from));
    run(
        &source.bindir.join("pg_dump"),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );

    // A second cluster that has never held the data.
    let target = common::start();
    target
        .connect("postgres")
        .batch_execute("CREATE DATABASE restored TEMPLATE template0")
        .expect("create the target database");
    target
        .connect("postgres")
        .batch_execute("CREATE ROLE idem_dump_app")
        .expect("create the role");
    let mut args = conn_args(&target);
    args.extend(["--exit-on-error", "-d", "restored", &dump_path].map(String::from));
    run(
        &target.bindir.join("pg_restore"),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let _ = std::fs::remove_file(&dump);

    let mut restored = target.connect("restored");
    assert_eq!(fixtures::rows(&mut restored), rows, "rows lost or changed");
    let id_after: String = restored.query_one(cdc_id, &[]).expect("cdc id").get(0);
    assert_eq!(id_after, id_before, "the CDC secret was not restored");
    let granted: bool = restored
        .query_one(
            "SELECT has_table_privilege('idem_dump_app', 'idempotency.requests', 'INSERT') \
             AND has_schema_privilege('idem_dump_app', 'idempotency', 'USAGE')",
            &[],
        )
        .expect("privileges")
        .get(0);
    assert!(granted, "the grant was not restored");
    // Without the grant, the restored catalog is a fresh install's.
    restored
        .batch_execute("SELECT idem_revoke('idem_dump_app', 'app')")
        .expect("revoke");
    let mut fresh = target.session();
    fixtures::assert_same_catalog(
        &fixtures::catalog(&mut restored),
        &fixtures::catalog(&mut fresh),
    );
    let next: i64 = restored
        .query_one(
            "SELECT nextval(pg_get_serial_sequence('idempotency.outbox', 'id'))",
            &[],
        )
        .expect("the outbox sequence")
        .get(0);
    assert!(
        next > max_id,
        "outbox sequence restored at {next} <= {max_id}"
    );
    fixtures::check_behaviour(&mut restored);
    // The restored extension is this build's: its tests schema came with CREATE EXTENSION.
    assert_eq!(
        fixtures::direct_paths(&mut restored, "restored"),
        fixtures::all_direct()
    );
    eprintln!("dump and restore test: {:.1}s", t0.elapsed().as_secs_f64());
}
