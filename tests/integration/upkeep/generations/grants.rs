//! The generations' grants (sql/layout.sql, `layout_sync_grants`): only a claim's INSERT,
//! brought in line with the table's at every rotation step and only when they differ; records
//! read and upkept through the table with its privileges; and the other unique indexes a
//! claim's insert without an arbiter would swallow, and foreign keys, refused.

use super::{Edition, both_editions, switch};
use crate::common;

use common::{Client, answer};

both_editions!(
    generations_grant_a_claims_insert_and_nothing_else => "grants",
    upkeep_runs_through_the_table_across_generations => "upkeep",
);

/// A new login role of `profile` (idem_grant) in `db`: its session.
fn role(ed: Edition, owner: &mut Client, db: &str, role: &str, profile: &str) -> Client {
    ed.cluster()
        .connect("postgres")
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN"
        ))
        .expect("role");
    owner
        .batch_execute(&format!("SELECT idem_grant('{role}', '{profile}')"))
        .expect("idem_grant");
    ed.cluster().connect_as(db, role)
}

/// Generation 1's grants to roles other than its owner, on the table and on its columns
/// (`NULL`: none); the owner's own differ by version (MAINTAIN since 17).
fn grants_of_g1(db: &mut Client) -> String {
    answer(
        db,
        "SELECT string_agg(g, ',' ORDER BY g) FROM ( \
           SELECT CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE x.grantee::regrole::text END \
                  || ':' || x.privilege_type || CASE WHEN x.is_grantable THEN '*' ELSE '' END AS g \
             FROM pg_class c, aclexplode(c.relacl) x \
            WHERE c.oid = 'idempotency.requests_g1'::regclass AND x.grantee <> c.relowner \
           UNION ALL \
           SELECT t.attname || '.' || x.grantee::regrole::text || ':' || x.privilege_type \
             FROM pg_attribute t, aclexplode(t.attacl) x \
            WHERE t.attrelid = 'idempotency.requests_g1'::regclass) AS s",
    )
}

/// The pg_class rows of the generations, by version: a rewrite shows as another xmin.
fn versions(db: &mut Client) -> String {
    answer(
        db,
        "SELECT string_agg(xmin::text, ',' ORDER BY relname) FROM pg_class \
         WHERE relname IN ('requests_g1', 'requests_g2', 'requests_g3')",
    )
}

fn generations_grant_a_claims_insert_and_nothing_else(ed: Edition, name: &str) {
    let mut db = ed.generations(name);
    let app_name = format!("{name}_app");
    let mut app = role(ed, &mut db, name, &app_name, "app");
    assert_eq!(common::claim(&mut app, "s", "k", "h"), "new_claim");
    app.batch_execute("SELECT idem_complete('s', 'k', '{\"secret\": 1}')")
        .expect("complete");

    // Read through the table, never by a generation's name, not even the key.
    assert_eq!(
        answer(
            &mut app,
            "SELECT response::text FROM idempotency.requests WHERE key = 'k'"
        ),
        "{\"secret\": 1}"
    );
    for column in ["response", "request_hash", "scope", "key"] {
        assert_eq!(
            answer(
                &mut app,
                &format!("SELECT {column}::text FROM idempotency.requests_g1")
            ),
            "ERROR 42501",
            "{column} of a generation, by name"
        );
    }

    // A step whose grants agree writes no catalog row, whatever it answers.
    let before = versions(&mut db);
    assert_eq!(answer(&mut db, "SELECT idem_rotate()"), "idle");
    assert_eq!(answer(&mut db, "SELECT idem_rotate()"), "idle");
    assert_eq!(versions(&mut db), before, "the grants were in line");

    // INSERT revoked on the table by hand: claims stop at once (switch.rs); an insert by the
    // generation's name stops at the next rotation step, here an idle one.
    db.batch_execute(&format!(
        "REVOKE INSERT ON idempotency.requests FROM {app_name}"
    ))
    .expect("revoke by hand");
    assert_eq!(answer(&mut db, "SELECT idem_rotate()"), "idle");
    assert_eq!(
        answer(
            &mut app,
            "INSERT INTO idempotency.requests_g1 (scope, key, request_hash, status, lease, retention, \
             expires_at) VALUES ('s', 'forged', 'h', 'processing', '1 hour', '1 hour', now() + interval '1 hour')"
        ),
        "ERROR 42501"
    );
    assert_eq!(grants_of_g1(&mut db), "NULL");

    // PUBLIC's INSERT goes across as PUBLIC's, and a grant the owner made on a generation by
    // hand (a column's, a grant option) goes at the next step.
    db.batch_execute(&format!(
        "GRANT INSERT ON idempotency.requests TO PUBLIC; \
         GRANT SELECT (response) ON idempotency.requests_g1 TO {app_name}; \
         GRANT UPDATE ON idempotency.requests_g1 TO {app_name} WITH GRANT OPTION"
    ))
    .expect("grants by hand");
    assert_eq!(answer(&mut db, "SELECT idem_rotate()"), "idle");
    assert_eq!(grants_of_g1(&mut db), "PUBLIC:INSERT");
    db.batch_execute("REVOKE INSERT ON idempotency.requests FROM PUBLIC; SELECT idem_rotate()")
        .expect("revoke from PUBLIC");
    assert_eq!(grants_of_g1(&mut db), "NULL");

    // idem_grant brings them back at once.
    db.batch_execute(&format!("SELECT idem_grant('{app_name}', 'app')"))
        .expect("idem_grant");
    assert_eq!(grants_of_g1(&mut db), format!("{app_name}:INSERT"));
    assert_eq!(common::claim(&mut app, "s", "again", "h"), "new_claim");

    // A unique index on a generation besides its primary key: a claim's insert has no arbiter
    // and would swallow its violations, so new keys are refused until it goes (0A000).
    db.batch_execute("CREATE UNIQUE INDEX g1_key ON idempotency.requests_g1 (key)")
        .expect("another unique index");
    assert_eq!(
        answer(
            &mut app,
            "SELECT outcome::text FROM idem_claim('s', 'unique', 'h')"
        ),
        "ERROR 0A000"
    );
    assert_eq!(common::claim(&mut app, "s", "k", "h"), "replay_success");
    db.batch_execute("DROP INDEX idempotency.g1_key")
        .expect("drop index");
    assert_eq!(common::claim(&mut app, "s", "unique", "h"), "new_claim");
    // So is a foreign key that refers to the table, added after the switch: it would see
    // only the table's own rows.
    db.batch_execute(
        "CREATE TABLE public.effects (scope text, key text, \
           FOREIGN KEY (scope, key) REFERENCES idempotency.requests)",
    )
    .expect("a foreign key to the table");
    assert_eq!(
        answer(
            &mut app,
            "SELECT outcome::text FROM idem_claim('s', 'fk', 'h')"
        ),
        "ERROR 0A000"
    );
    db.batch_execute("DROP TABLE public.effects")
        .expect("drop it");
    assert_eq!(common::claim(&mut app, "s", "fk", "h"), "new_claim");
}

fn upkeep_runs_through_the_table_across_generations(ed: Edition, name: &str) {
    let mut db = ed.generations(name);
    let mut up = role(ed, &mut db, name, &format!("{name}_upkeep"), "upkeep");
    // Two expired records and an ended lease in generation 1, then one record that expired
    // earlier in generation 2 (current after the switch).
    db.batch_execute(
        "SELECT idem_claim('up', 'late', 'h'); SELECT idem_complete('up', 'late', '{}'); \
         SELECT idem_claim('up', 'lease', 'h'); \
         UPDATE idempotency.requests SET expires_at = now() - interval '2 s' WHERE key = 'late'; \
         UPDATE idempotency.requests SET locked_until = now() - interval '1 day' WHERE key = 'lease'",
    )
    .expect("generation 1");
    assert_eq!(switch(&mut db), ["switched"]);
    db.batch_execute(
        "SELECT idem_claim('up', 'early', 'h'); SELECT idem_fail('up', 'early', false, 'no', 'no'); \
         UPDATE idempotency.requests SET expires_at = now() - interval '3 s' WHERE key = 'early'",
    )
    .expect("generation 2");
    let where_ = |db: &mut Client| {
        answer(
            db,
            "SELECT string_agg(key || ':' || status || ':' || tableoid::regclass::text, ',' ORDER BY key) \
             FROM idempotency.requests",
        )
    };
    assert_eq!(
        where_(&mut db),
        "early:failed_final:idempotency.requests_g2,late:succeeded:idempotency.requests_g1,\
         lease:processing:idempotency.requests_g1"
    );
    // One order across the generations: the record that expired first goes first.
    assert_eq!(answer(&mut up, "SELECT idem_purge(1)::text"), "1");
    assert_eq!(
        where_(&mut db),
        "late:succeeded:idempotency.requests_g1,lease:processing:idempotency.requests_g1"
    );
    assert_eq!(answer(&mut up, "SELECT idem_purge()::text"), "1");
    assert_eq!(answer(&mut up, "SELECT idem_reclaim()::text"), "1");
    assert_eq!(
        where_(&mut db),
        "lease:failed_retryable:idempotency.requests_g1"
    );
}
