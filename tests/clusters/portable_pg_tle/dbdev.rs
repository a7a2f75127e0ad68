//! database.dev's layout: `scripts/portable.sh --dbdev DIR --from 0.1.9` writes the control
//! file, the install script, the update script and README.md; they are installed as the dbdev
//! client installs a directory (pgtle.install_extension with the control file's name, version,
//! comment and requires and the install script; pgtle.install_update_path per update script;
//! pgtle.set_default_version), by a non-superuser owner with pgtle_admin; then
//! `CREATE EXTENSION idempotency` and a claim, and an update from 0.1.9 through that script.

use std::collections::BTreeMap;

use super::{connect, server, text, with_pg_tle};

/// The control file's `key = 'value'` lines.
fn control(body: &str) -> BTreeMap<String, String> {
    body.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| {
            (
                k.trim().to_string(),
                v.trim().trim_matches('\'').to_string(),
            )
        })
        .collect()
}

#[test]
#[cfg_attr(
    idem_no_pgtle,
    ignore = "pg_tle: IDEM_PGTLE=1 (pgrx-config/test.sh: 17)"
)]
fn the_dbdev_layout_installs_through_pg_tle() {
    let dir = std::env::temp_dir().join(format!("idem-dbdev-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    crate::common::portable_script(&["--dbdev", dir.to_str().expect("path"), "--from", "0.1.9"]);
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("the directory")
        .map(|e| e.expect("entry").file_name().into_string().expect("name"))
        .collect();
    files.sort();
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        files,
        [
            "README.md".to_string(),
            format!("idempotency--0.1.9--{version}.sql"),
            format!("idempotency--{version}.sql"),
            "idempotency.control".to_string(),
        ]
    );
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).expect(name);
    let meta = control(&read("idempotency.control"));
    assert_eq!(meta["default_version"], version);
    let requires: Vec<String> = meta
        .get("requires")
        .map(|r| r.split(',').map(|x| x.trim().to_string()).collect())
        .unwrap_or_default();
    let install = read(&format!("idempotency--{version}.sql"));
    let update = read(&format!("idempotency--0.1.9--{version}.sql"));

    let port = server();
    let mut admin = connect(port, "postgres", "postgres");
    for sql in [
        "CREATE ROLE dbdev_owner LOGIN NOSUPERUSER",
        "CREATE DATABASE dbdev_app OWNER dbdev_owner",
        "CREATE DATABASE dbdev_old OWNER dbdev_owner",
    ] {
        admin.batch_execute(sql).expect(sql);
    }
    for db in ["dbdev_app", "dbdev_old"] {
        with_pg_tle(port, db, "dbdev_owner");
    }
    // A fresh database, as dbdev installs the directory.
    let mut app = connect(port, "dbdev_app", "dbdev_owner");
    app.execute(
        "SELECT pgtle.install_extension('idempotency', $1, $2, $3, $4)",
        &[&version, &meta["comment"], &install, &requires],
    )
    .expect("pgtle.install_extension");
    app.execute(
        "SELECT pgtle.install_update_path('idempotency', '0.1.9', $1, $2)",
        &[&version, &update],
    )
    .expect("pgtle.install_update_path");
    app.execute(
        "SELECT pgtle.set_default_version('idempotency', $1)",
        &[&version],
    )
    .expect("pgtle.set_default_version");
    app.batch_execute("CREATE EXTENSION idempotency")
        .expect("CREATE EXTENSION");
    assert_eq!(
        text(
            &mut app,
            "SELECT extversion FROM pg_extension WHERE extname = 'idempotency'"
        ),
        version
    );
    app.batch_execute(
        "SELECT idem_claim('pay', 'k', idem_hash('{\"amount\": 10}'::jsonb)); \
         SELECT idem_complete('pay', 'k', '{\"id\": 1}')",
    )
    .expect("a claim");
    assert_eq!(
        text(
            &mut app,
            "SELECT outcome::text || ' ' || response::text FROM idem_claim('pay', 'k', idem_hash('{\"amount\": 10}'::jsonb))"
        ),
        "replay_success {\"id\": 1}"
    );

    // A database on 0.1.9 (an earlier release from database.dev) updates through the script.
    let mut old = connect(port, "dbdev_old", "dbdev_owner");
    let older = install.replace(
        &format!("SELECT '{version}'::pg_catalog.text"),
        "SELECT '0.1.9'::pg_catalog.text",
    );
    assert_ne!(older, install, "idem_version's text was found");
    old.execute(
        "SELECT pgtle.install_extension('idempotency', '0.1.9', $1, $2, $3)",
        &[&meta["comment"], &older, &requires],
    )
    .expect("0.1.9");
    old.batch_execute(
        "CREATE EXTENSION idempotency; SELECT idem_claim('pay', 'k', 'h'); \
         SELECT idem_complete('pay', 'k', '{\"id\": 2}')",
    )
    .expect("a record on 0.1.9");
    old.execute(
        "SELECT pgtle.install_extension_version_sql('idempotency', $1, $2)",
        &[&version, &install],
    )
    .expect("this version");
    old.execute(
        "SELECT pgtle.install_update_path('idempotency', '0.1.9', $1, $2)",
        &[&version, &update],
    )
    .expect("the update path");
    old.execute(
        "SELECT pgtle.set_default_version('idempotency', $1)",
        &[&version],
    )
    .expect("default version");
    old.batch_execute("ALTER EXTENSION idempotency UPDATE")
        .expect("update");
    assert_eq!(text(&mut old, "SELECT idem_version()"), version);
    assert_eq!(
        text(
            &mut old,
            "SELECT outcome::text || ' ' || response::text FROM idem_claim('pay', 'k', 'h')"
        ),
        "replay_success {\"id\": 2}"
    );
    std::fs::remove_dir_all(&dir).expect("remove the directory");
}
