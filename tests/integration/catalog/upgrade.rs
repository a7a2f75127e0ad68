//! Upgrades: 0.1.0 installed from its frozen script (sql/idempotency--0.1.0.sql) with this
//! build's library, then `ALTER EXTENSION idempotency UPDATE`. The upgraded database must keep
//! every row and behave, its catalog must equal a fresh `CREATE EXTENSION`'s, and the direct
//! read/write paths must stay on. The 0.1.0 SQL must also keep working un-updated.
//!
//! `cargo pgrx install`/`test` copy only upgrade scripts (`sql/idempotency--<from>--<to>.sql`) into
//! the extension directory, not old install scripts, so this test puts the frozen one there
//! itself. Counters of `idem_metrics()` are the cluster's: the tests take turns (`SERIAL`).

use crate::common;
use crate::fixtures;

use std::path::PathBuf;
use std::sync::OnceLock;

use common::{Client, sqlstate};

crate::own_database!(crate::common::counted_cluster);

/// Every released version older than this build: each is installed from its frozen script.
const OLD_VERSIONS: [&str; 1] = ["0.1.0"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Copies the frozen install scripts into the extension directory of the Postgres under test
/// (once per test run; a rename, so that a concurrent reader never sees half a file).
fn install_frozen_scripts() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let extdir = common::pg_config_dir("--sharedir").join("extension");
        for version in OLD_VERSIONS {
            let name = format!("idempotency--{version}.sql");
            let text = std::fs::read(repo().join("sql").join(&name)).expect("frozen script");
            let tmp = extdir.join(format!(".{name}.{}", std::process::id()));
            std::fs::write(&tmp, &text).unwrap_or_else(|e| {
                panic!(
                    "write {} (run as root, as cargo pgrx test does): {e}",
                    tmp.display()
                )
            });
            std::fs::rename(&tmp, extdir.join(&name)).expect("rename the script into place");
        }
    });
}

/// A new database of the shared cluster with the extension at `version` (None: the default).
fn database(name: &str, version: Option<&str>) -> Client {
    install_frozen_scripts();
    let mut db = cluster().empty_database(name);
    let create = match version {
        Some(v) => format!("CREATE EXTENSION idempotency VERSION '{v}'"),
        None => "CREATE EXTENSION idempotency".to_string(),
    };
    db.batch_execute(&create).expect("create extension");
    db
}

fn extversion(db: &mut Client) -> String {
    db.query_one(
        "SELECT extversion FROM pg_extension WHERE extname = 'idempotency'",
        &[],
    )
    .expect("extversion")
    .get(0)
}

#[test]
fn default_version_and_update_paths() {
    let _turn = common::counted_turn();
    install_frozen_scripts();
    let mut db = cluster().session();
    assert_eq!(extversion(&mut db), env!("CARGO_PKG_VERSION"));
    let default: String = db
        .query_one(
            "SELECT default_version FROM pg_available_extensions WHERE name = 'idempotency'",
            &[],
        )
        .expect("default version")
        .get(0);
    assert_eq!(default, "0.2.0");
    for old in OLD_VERSIONS {
        let path: Option<String> = db
            .query_one(
                "SELECT path FROM pg_extension_update_paths('idempotency') \
                 WHERE source = $1 AND target = $2",
                &[&old, &env!("CARGO_PKG_VERSION")],
            )
            .expect("update path")
            .get(0);
        assert!(path.is_some(), "no update path from {old}");
    }
}

/// Each old version, updated to this one: rows kept and behaving, the catalog of a fresh
/// install, the direct paths on.
#[test]
fn update_from_each_old_version_keeps_rows_and_equals_a_fresh_install() {
    let _turn = common::counted_turn();
    let mut fresh = database("upgrade_fresh", None);
    let installed = fixtures::catalog(&mut fresh);
    assert!(
        installed.len() > 100,
        "catalog dump too small: {installed:?}"
    );
    for old in OLD_VERSIONS {
        let name = format!("upgrade_from_{}", old.replace('.', "_"));
        let mut up = database(&name, Some(old));
        assert_eq!(extversion(&mut up), old);

        fixtures::write_data(&mut up);
        let before = fixtures::rows(&mut up);
        up.batch_execute("ALTER EXTENSION idempotency UPDATE")
            .unwrap_or_else(|e| panic!("ALTER EXTENSION idempotency UPDATE from {old}: {e}"));
        assert_eq!(extversion(&mut up), env!("CARGO_PKG_VERSION"));
        fixtures::assert_rows_kept(&mut up, &before);
        fixtures::assert_same_catalog(&fixtures::catalog(&mut up), &installed);
        fixtures::check_behaviour(&mut up);

        // A new session: nothing cached from before the update.
        let mut up = cluster().connect(&name);
        fixtures::copy_shape_helper(&mut fresh, &mut up);
        assert_eq!(
            fixtures::direct_paths(&mut up, "after-update"),
            fixtures::all_direct(),
            "direct paths after the update from {old}"
        );
    }
}

/// The 0.1.0 SQL (not updated) against this library: every function, the view.
#[test]
fn sql_of_0_1_0_runs_on_the_new_library() {
    let _turn = common::counted_turn();
    let mut fresh = cluster().session();
    let mut old = database("old_010", Some("0.1.0"));
    fixtures::write_data(&mut old);
    fixtures::check_behaviour(&mut old);

    old.batch_execute(
        "CREATE FUNCTION double_it(request jsonb) RETURNS jsonb LANGUAGE sql
             AS $$ SELECT jsonb_build_object('n', (request->>'n')::int * 2) $$;
         CREATE FUNCTION refuse(request jsonb) RETURNS jsonb LANGUAGE plpgsql
             AS $$ BEGIN RAISE EXCEPTION 'no' USING ERRCODE = 'P0001'; END $$;",
    )
    .expect("functions for idem_call");
    let rows = [
        (
            "SELECT outcome::text || ' ' || response::text FROM idem_call('c', 'k', '{\"n\": 2}', 'double_it(jsonb)')",
            "new_claim {\"n\": 4}",
        ),
        (
            "SELECT outcome::text || ' ' || response::text FROM idem_call('c', 'k', '{\"n\": 2}', 'double_it(jsonb)')",
            "replay_success {\"n\": 4}",
        ),
        (
            "SELECT outcome::text || ' ' || failure_code FROM idem_call('c', 'r', '{}', 'refuse(jsonb)')",
            "final_failure P0001",
        ),
        (
            "SELECT idem_retryable('40001')::text || idem_retryable('23505')::text",
            "truefalse",
        ),
        (
            "SELECT idem_canonical('{\"b\": 1, \"a\": [1.0]}'::jsonb) || idem_canonical('{\"b\":1,\"a\":2}'::json)",
            "{\"a\":[1],\"b\":1}{\"a\":2,\"b\":1}",
        ),
        (
            "SELECT (idem_hash('{\"a\": 1}'::jsonb) = idem_hash('{ \"a\" : 1.0 }'::json))::text \
             || (idem_hash('{\"a\": 1, \"b\": 2}'::jsonb, '{a}') = idem_hash('{\"a\": 1}'::jsonb))::text \
             || length(idem_hash('{}'::jsonb))",
            "truetrue64",
        ),
        (
            "SELECT (idem_lock_key('s', 'k') = idem_lock_key('s', 'k'))::text \
             || (idem_lock_key('k') <> idem_lock_key('s', 'k'))::text",
            "truetrue",
        ),
        (
            "SELECT (idem_claim('rel', 'gone', 'h')::text IS NOT NULL \
             AND idem_forget('rel', 'gone') AND NOT idem_forget('rel', 'gone'))::text",
            "true",
        ),
        (
            "SELECT idem_reclaim()::text || ' ' || idem_purge(10)::text || ' ' \
             || idem_inbox_purge()::text || ' ' || idem_outbox_purge()::text",
            "0 0 0 0",
        ),
        ("SELECT count(*)::text FROM idempotency.stats", ""),
        ("SELECT idem_version()", env!("CARGO_PKG_VERSION")),
    ];
    for (sql, expected) in rows {
        let got: String = old
            .query_one(sql, &[])
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .try_get(0)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        if expected.is_empty() {
            assert!(!got.is_empty(), "{sql}");
        } else {
            assert_eq!(got, expected, "{sql}");
        }
    }
    // nack, then ack, of a taken message; the outbox's errors unchanged.
    old.execute("SELECT idem_outbox_put('t2', '{}')", &[])
        .expect("put");
    let id: i64 = old
        .query_one("SELECT id FROM idem_outbox_take(1, '1 hour', 't2')", &[])
        .expect("take")
        .get(0);
    old.execute(
        "SELECT idem_outbox_nack($1, 'broker down', '0 seconds')",
        &[&id],
    )
    .expect("nack");
    let acked: i64 = old
        .query_one("SELECT idem_outbox_ack(ARRAY[$1::int8])", &[&id])
        .expect("ack")
        .get(0);
    assert_eq!(acked, 1);
    let err = old
        .query_one("SELECT idem_outbox_put('', '{}')", &[])
        .expect_err("an empty topic");
    assert_eq!(sqlstate(&err), "P4000");
    // complete / fail / checkpoint with an attempt, and a fenced-off attempt.
    old.batch_execute(
        "SELECT idem_claim('rel', 'a1', 'h'); \
         SELECT idem_checkpoint('rel', 'a1', 'p', attempt => 1, lease => '1 minute'); \
         SELECT idem_complete('rel', 'a1', '{}', attempt => 1);",
    )
    .expect("claim, checkpoint, complete");
    let fenced = old
        .query_one("SELECT idem_fail('rel', 'a1', true, attempt => 1)", &[])
        .expect_err("fail a completed record");
    assert_eq!(sqlstate(&fenced), "P4011");

    fixtures::copy_shape_helper(&mut fresh, &mut old);
    assert_eq!(
        fixtures::direct_paths(&mut old, "on-0.1.0"),
        fixtures::all_direct()
    );
}

/// A schema still at 0.1.0 has no 100-year bound on its rows (the CHECK came with 0.2.0), so
/// the new library's reclaim clamps the retention itself: a row holding a million years on a
/// lease that ended at -infinity sorts first in every batch and must not fail it (22008).
#[test]
fn reclaim_on_an_un_updated_schema_goes_through_a_row_beyond_the_bounds() {
    let _turn = common::counted_turn();
    let mut old = database("old_010_reclaim", Some("0.1.0"));
    old.batch_execute(
        "SELECT idem_claim('far', 'edge', 'h'); \
         UPDATE idempotency.requests SET retention = '1000000 years', locked_until = '-infinity'; \
         SELECT idem_claim('far', 'plain', 'h', lease => '1 second'); \
         UPDATE idempotency.requests SET locked_until = now() - interval '1 hour' WHERE key = 'plain';",
    )
    .expect("rows beyond the bounds are allowed by 0.1.0's CHECK");
    let reclaimed: i64 = old
        .query_one("SELECT idem_reclaim()", &[])
        .expect("reclaim on a 0.1.0 schema")
        .get(0);
    assert_eq!(reclaimed, 2);
    let rows: Vec<(String, String, bool)> = old
        .query(
            "SELECT key, status::text, expires_at > now() + interval '99 years' \
             FROM idempotency.requests ORDER BY key",
            &[],
        )
        .expect("rows")
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(rows[0], ("edge".into(), "failed_retryable".into(), true));
    assert_eq!(rows[1].1, "failed_retryable");
}

/// 0.1.0 bound an `=(anyenum, text)` planted in the extension's schema before the install
/// into `idempotency.requests`' CHECKs and partial indexes (security/install_path.rs): the
/// update re-creates them bound to pg_catalog's, and the planted operator never runs again.
#[test]
fn the_update_unbinds_operators_planted_before_0_1_0() {
    use crate::security::install_path::{bound_to_planted, exercise, plant, planted_calls};
    let _turn = common::counted_turn();
    let name = "upgrade_planted";
    install_frozen_scripts();
    let mut db = cluster().empty_database(name);
    plant(cluster(), &mut db, name);
    db.batch_execute("CREATE EXTENSION idempotency VERSION '0.1.0'")
        .expect("create extension 0.1.0");
    let bound = bound_to_planted(&mut db);
    assert!(
        bound.iter().any(|b| b.contains("requests_lease_check"))
            && bound.iter().any(|b| b.contains("requests_expiry_idx")),
        "0.1.0 binds the planted operators, or this test proves nothing: {bound:?}"
    );
    // A row past issue 25's bounds: the update clamps it, after re-binding the CHECKs (else
    // the clamp runs the planted operators as the superuser updating).
    db.batch_execute(
        "SELECT idem_claim('planted', 'k', 'h');
         UPDATE idempotency.requests SET lease = '200 years', retention = '200 years';",
    )
    .expect("a row beyond the bounds");
    let before = planted_calls(&mut db);
    db.batch_execute("ALTER EXTENSION idempotency UPDATE")
        .expect("update");
    assert_eq!(
        planted_calls(&mut db),
        before,
        "the update ran a planted operator"
    );
    assert_eq!(bound_to_planted(&mut db), Vec::<String>::new());
    exercise(&mut db);
    assert_eq!(planted_calls(&mut db), before, "a planted operator ran");
}
