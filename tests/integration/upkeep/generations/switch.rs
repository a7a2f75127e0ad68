//! idem_set_layout both ways on a table with records, its refusals and SQLSTATEs, the grants
//! the generations carry (idem_grant and idem_revoke after the switch too), and pg_dump /
//! pg_restore of a database in the generations layout.

use super::{Edition, both_editions, current, switch, where_are};
use crate::common;

use common::{Client, answer, count};

both_editions!(
    set_layout_switches_both_ways_and_refuses_what_it_cannot_carry => "layout",
    a_dump_restores_every_generation => "dump",
);

/// A login role of the app profile, new: its session in `db`.
fn app_role(ed: Edition, owner: &mut Client, db: &str, role: &str) -> Client {
    let mut admin = ed.cluster().connect("postgres");
    admin
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS {role}; CREATE ROLE {role} LOGIN"
        ))
        .expect("role");
    owner
        .batch_execute(&format!("SELECT idem_grant('{role}', 'app')"))
        .expect("idem_grant");
    ed.cluster().connect_as(db, role)
}

fn set_layout_switches_both_ways_and_refuses_what_it_cannot_carry(ed: Edition, name: &str) {
    let mut db = ed.install(name);
    db.batch_execute(
        "SELECT idem_claim('s', 'done', 'h', retention => '1 hour'); SELECT idem_complete('s', 'done', '{\"n\": 1}'); \
         SELECT idem_claim('s', 'proc', 'h', lease => '1 hour')",
    )
    .expect("records");
    let mut app = app_role(ed, &mut db, name, &format!("{name}_app"));

    // Bad arguments and the wrong layout write nothing.
    for (sql, state) in [
        ("SELECT idem_rotate()", "55000"),
        ("SELECT idem_set_layout(NULL)", "22004"),
        ("SELECT idem_set_layout('daily')", "22023"),
        (
            "SELECT idem_set_layout('generations', lock_wait => '0 s')",
            "22023",
        ),
        (
            "SELECT idem_set_layout('generations', lock_wait => NULL)",
            "22023",
        ),
    ] {
        assert_eq!(answer(&mut db, sql), format!("ERROR {state}"), "{sql}");
    }
    // Only the tables' owner switches and rotates: refused before any lock.
    assert_eq!(
        answer(&mut app, "SELECT idem_set_layout('generations')"),
        "ERROR 42501"
    );
    // Row-level security and triggers are not carried onto the generations yet: refused.
    db.batch_execute("ALTER TABLE idempotency.requests ENABLE ROW LEVEL SECURITY")
        .expect("rls");
    assert_eq!(
        answer(&mut db, "SELECT idem_set_layout('generations')"),
        "ERROR 0A000"
    );
    db.batch_execute(
        "ALTER TABLE idempotency.requests DISABLE ROW LEVEL SECURITY; \
         CREATE FUNCTION public.noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$; \
         CREATE TRIGGER noop BEFORE INSERT ON idempotency.requests FOR EACH ROW EXECUTE FUNCTION public.noop()",
    )
    .expect("a trigger");
    assert_eq!(
        answer(&mut db, "SELECT idem_set_layout('generations')"),
        "ERROR 0A000"
    );
    db.batch_execute(
        "DROP TRIGGER noop ON idempotency.requests; \
         CREATE UNIQUE INDEX requests_key ON idempotency.requests (key, scope)",
    )
    .expect("another unique index");
    // A claim's insert into a generation has no arbiter, so it would swallow this index's
    // violations: refused too.
    assert_eq!(
        answer(&mut db, "SELECT idem_set_layout('generations')"),
        "ERROR 0A000"
    );
    // A foreign key either way: not copied onto the generations, blind to them, and in the
    // way of the rotation's TRUNCATE of the table's own rows.
    db.batch_execute(
        "DROP INDEX idempotency.requests_key; \
         CREATE TABLE public.tenants (scope text PRIMARY KEY); \
         ALTER TABLE idempotency.requests ADD CONSTRAINT requests_tenant \
           FOREIGN KEY (scope) REFERENCES public.tenants NOT VALID",
    )
    .expect("a foreign key on the table");
    assert_eq!(
        answer(&mut db, "SELECT idem_set_layout('generations')"),
        "ERROR 0A000"
    );
    db.batch_execute(
        "ALTER TABLE idempotency.requests DROP CONSTRAINT requests_tenant; \
         CREATE TABLE public.effects (scope text, key text, \
           FOREIGN KEY (scope, key) REFERENCES idempotency.requests)",
    )
    .expect("a foreign key to the table");
    assert_eq!(
        answer(&mut db, "SELECT idem_set_layout('generations')"),
        "ERROR 0A000"
    );
    assert_eq!(
        answer(&mut db, "SELECT idempotency.layout_refusal(false)"),
        "idempotency.requests has a foreign key, or one refers to it"
    );
    db.batch_execute("DROP TABLE public.effects, public.tenants")
        .expect("drop the foreign keys");
    assert_eq!(
        answer(&mut db, "SELECT idempotency.layout_refusal(false)"),
        "NULL"
    );
    assert_eq!(
        count(&mut db, "SELECT count(*) FROM pg_inherits"),
        0,
        "nothing was made"
    );

    assert_eq!(
        answer(&mut db, "SELECT idem_set_layout('generations')"),
        "generations"
    );
    assert_eq!(
        answer(&mut db, "SELECT idem_set_layout('generations')"),
        "generations"
    );
    assert_eq!(
        answer(&mut db, "SELECT idem_rotate(batch => 0)"),
        "ERROR 22023"
    );
    assert_eq!(
        answer(&mut db, "SELECT idem_rotate(force => NULL)"),
        "ERROR 22004"
    );
    assert_eq!(answer(&mut db, "SELECT idem_rotate()"), "idle");
    assert_eq!(
        answer(&mut app, "SELECT idem_rotate(force => true)"),
        "ERROR 42501"
    );
    // What was there answers as before.
    assert_eq!(common::claim(&mut app, "s", "done", "h"), "replay_success");
    assert_eq!(
        common::claim(&mut app, "s", "proc", "h"),
        "processing_active"
    );
    assert_eq!(
        answer(
            &mut app,
            "SELECT outcome::text FROM idem_claim('s', 'done', 'other')"
        ),
        "ERROR P4002"
    );

    // The first rotation empties the table's own rows (from before the switch): the live ones
    // move to generation 1, the expired one goes with a TRUNCATE; then generation 2 is current,
    // and the app role claims, completes, fails and forgets there.
    db.batch_execute("INSERT INTO idempotency.requests SELECT * FROM idempotency.requests_g1")
        .expect("nothing");
    db.batch_execute(
        "INSERT INTO idempotency.requests (scope, key, request_hash, status, attempt, response, claimed_at, \
             lease, retention, created_at, updated_at, expires_at) \
         VALUES ('s', 'old', 'h', 'succeeded', 1, '{}', now() - interval '2 days', '5 minutes', '1 day', \
                 now() - interval '2 days', now() - interval '2 days', now() - interval '1 day')",
    )
    .expect("an expired record from before the switch");
    assert_eq!(switch(&mut db), ["moved 2", "emptied", "switched"]);
    assert_eq!(current(&mut db), 2);
    app.batch_execute(
        "SELECT idem_claim('s', 'new', 'h', retention => '1 hour'); SELECT idem_checkpoint('s', 'new', 'half'); \
         SELECT idem_complete('s', 'new', '{}'); SELECT idem_claim('s', 'bad', 'h'); \
         SELECT idem_fail('s', 'bad', true, 'no', 'no'); SELECT idem_claim('s', 'bad', 'h'); \
         SELECT idem_claim('s', 'gone', 'h'); SELECT idem_forget('s', 'gone'); \
         SELECT idem_claim('s', 'slow', 'h', lease => '1 hour', retention => '1 ms')",
    )
    .expect("the app role in generation 2");
    assert_eq!(
        where_are(&mut db, "s"),
        "bad:requests_g2,done:requests_g1,new:requests_g2,proc:requests_g1,slow:requests_g2"
    );
    assert_eq!(
        answer(
            &mut db,
            "SELECT attempt::text FROM idempotency.requests WHERE key = 'bad'"
        ),
        "2"
    );
    // A role granted after the switch may claim there; once revoked, it may not.
    let late = format!("{name}_late");
    let mut late_app = app_role(ed, &mut db, name, &late);
    assert_eq!(common::claim(&mut late_app, "late", "1", "h"), "new_claim");
    db.batch_execute(&format!("SELECT idem_revoke('{late}', 'app')"))
        .expect("revoke");
    assert_eq!(
        answer(
            &mut late_app,
            "SELECT outcome::text FROM idem_claim('late', '2', 'h')"
        ),
        "ERROR 42501"
    );
    // INSERT revoked on the table by hand (the generations keep theirs until the next rotation
    // step, grants.rs): new keys are refused at once; the role's records still replay.
    let by_hand = format!("{name}_hand");
    let mut hand_app = app_role(ed, &mut db, name, &by_hand);
    assert_eq!(common::claim(&mut hand_app, "hand", "1", "h"), "new_claim");
    db.batch_execute(&format!(
        "REVOKE INSERT ON idempotency.requests FROM {by_hand}"
    ))
    .expect("revoke by hand");
    assert_eq!(
        answer(
            &mut hand_app,
            "SELECT outcome::text FROM idem_claim('hand', '2', 'h')"
        ),
        "ERROR 42501"
    );
    assert_eq!(
        common::claim(&mut hand_app, "hand", "1", "h"),
        "processing_active"
    );
    // Row-level security or a trigger added after the switch would be bypassed by an insert
    // into a generation: new keys and rotations are refused until it goes (replays go on).
    db.batch_execute(
        "ALTER TABLE idempotency.requests ENABLE ROW LEVEL SECURITY; \
         CREATE POLICY all_rows ON idempotency.requests USING (true) WITH CHECK (true)",
    )
    .expect("rls after the switch");
    assert_eq!(
        answer(
            &mut app,
            "SELECT outcome::text FROM idem_claim('s', 'rls', 'h')"
        ),
        "ERROR 0A000"
    );
    assert_eq!(common::claim(&mut app, "s", "done", "h"), "replay_success");
    assert_eq!(
        answer(&mut db, "SELECT idem_rotate(force => true)"),
        "ERROR 0A000"
    );
    if matches!(ed, Edition::Portable) {
        // pg_cron's round leaves the table (a WARNING) and goes on with the inbox and outbox.
        assert_eq!(
            answer(
                &mut db,
                "SELECT format('%s|%s|%s|%s', reclaimed, purged, inbox_purged, outbox_purged) FROM idem_upkeep()"
            ),
            "||0|0"
        );
    }
    db.batch_execute(
        "DROP POLICY all_rows ON idempotency.requests; \
         ALTER TABLE idempotency.requests DISABLE ROW LEVEL SECURITY; \
         CREATE TRIGGER noop BEFORE INSERT ON idempotency.requests FOR EACH ROW EXECUTE FUNCTION public.noop()",
    )
    .expect("a trigger after the switch");
    assert_eq!(
        answer(
            &mut app,
            "SELECT outcome::text FROM idem_claim('s', 'trg', 'h')"
        ),
        "ERROR 0A000"
    );
    db.batch_execute("DROP TRIGGER noop ON idempotency.requests")
        .expect("drop trigger");

    // The generations carry INSERT only: a role given every right on the table cannot attach
    // code to a generation, and code the owner attaches stops the upkeep there.
    let role = format!("{name}_app");
    db.batch_execute(&format!(
        "GRANT ALL ON idempotency.requests TO {role}; SELECT idempotency.layout_sync_grants()"
    ))
    .expect("every right on the table");
    assert_eq!(
        answer(
            &mut db,
            &format!(
                "SELECT string_agg(p, ',' ORDER BY p) FROM unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', \
                 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']) AS p \
                 WHERE has_table_privilege('{role}', 'idempotency.requests_g1', p)"
            )
        ),
        "INSERT"
    );
    assert_eq!(
        answer(
            &mut db,
            &format!(
                "SELECT count(*)::text FROM pg_attribute \
                 WHERE attrelid = 'idempotency.requests_g1'::regclass AND attnum > 0 \
                   AND has_column_privilege('{role}', attrelid, attnum, 'SELECT')"
            )
        ),
        "0"
    );
    assert_eq!(
        answer(
            &mut app,
            "CREATE TRIGGER mine BEFORE INSERT ON idempotency.requests_g1 FOR EACH ROW \
             EXECUTE FUNCTION public.noop()"
        )
        .replace("NULL", ""),
        "ERROR 42501"
    );
    db.batch_execute(
        "CREATE TRIGGER noop BEFORE UPDATE ON idempotency.requests_g3 FOR EACH ROW EXECUTE FUNCTION public.noop()",
    )
    .expect("the owner's trigger on a generation");
    assert_eq!(
        answer(&mut db, "SELECT idem_purge(10)::text"),
        "ERROR 0A000"
    );
    assert_eq!(
        answer(&mut db, "SELECT idem_reclaim(10)::text"),
        "ERROR 0A000"
    );
    db.batch_execute(&format!(
        "DROP TRIGGER noop ON idempotency.requests_g3; REVOKE ALL ON idempotency.requests FROM {role}; \
         SELECT idem_grant('{role}', 'app')"
    ))
    .expect("back as it was");

    // Back to flat: the live records come back into the table; the generations go.
    db.batch_execute(
        "UPDATE idempotency.requests SET expires_at = now() - interval '1 s', updated_at = created_at \
          WHERE key = 'new'",
    )
    .expect("expire one");
    assert_eq!(answer(&mut db, "SELECT idem_set_layout('flat')"), "flat");
    assert_eq!(answer(&mut db, "SELECT idem_set_layout('flat')"), "flat");
    assert_eq!(
        where_are(&mut db, "s"),
        "bad:requests,done:requests,proc:requests,slow:requests",
        "a processing record is live whatever its expires_at says"
    );
    assert_eq!(count(&mut db, "SELECT count(*) FROM pg_inherits"), 0);
    assert_eq!(
        answer(&mut db, "SELECT to_regclass('idempotency.layout')::text"),
        "NULL"
    );
    assert_eq!(common::claim(&mut app, "s", "done", "h"), "replay_success");
    assert_eq!(common::claim(&mut app, "s", "fresh", "h"), "new_claim");
}

fn a_dump_restores_every_generation(ed: Edition, name: &str) {
    let mut db = ed.install(name);
    db.batch_execute(
        "SELECT idem_claim('d', 'old', 'h'); SELECT idem_complete('d', 'old', '{\"g\": 0}')",
    )
    .expect("a record from before the switch");
    assert_eq!(
        answer(&mut db, "SELECT idem_set_layout('generations')"),
        "generations"
    );
    db.batch_execute(
        "SELECT idem_claim('d', 'one', 'h'); SELECT idem_complete('d', 'one', '{\"g\": 1}'); \
         SELECT idem_claim('d', 'busy', 'h', lease => '1 hour')",
    )
    .expect("generation 1");
    let before = where_are(&mut db, "d");
    assert_eq!(before, "busy:requests_g1,old:requests,one:requests_g1");
    drop(db);

    let c = ed.cluster();
    let dump = std::env::temp_dir().join(format!("{name}-{}.pgdump", std::process::id()));
    let dump = dump.to_string_lossy().into_owned();
    crate::portable::move_up::tool(c, "pg_dump", &["-Fc", "-d", name, "-f", &dump]);
    let restored = format!("{name}_restored");
    c.drop_database(&restored);
    c.connect("postgres")
        .batch_execute(&format!("CREATE DATABASE {restored} TEMPLATE template0"))
        .expect("create the target database");
    crate::portable::move_up::tool(
        c,
        "pg_restore",
        &["--exit-on-error", "-d", &restored, &dump],
    );
    let _ = std::fs::remove_file(&dump);

    let mut db = c.connect_as(&restored, &ed.owner(name));
    assert_eq!(
        where_are(&mut db, "d"),
        before,
        "every record in its generation"
    );
    assert_eq!(current(&mut db), 1);
    assert_eq!(
        answer(
            &mut db,
            "SELECT response::text FROM idem_claim('d', 'old', 'h')"
        ),
        "{\"g\": 0}"
    );
    assert_eq!(
        common::claim(&mut db, "d", "busy", "h"),
        "processing_active"
    );
    assert_eq!(common::claim(&mut db, "d", "two", "h"), "new_claim");
    // The rotation goes on from where it was: the table's own rows first, then generations 2,
    // 3 and 1 (its survivors moved to 3).
    assert_eq!(switch(&mut db), ["moved 1", "switched"]);
    switch(&mut db);
    assert_eq!(current(&mut db), 3);
    assert_eq!(switch(&mut db), ["moved 4", "switched"]);
    assert_eq!(current(&mut db), 1);
    assert_eq!(
        where_are(&mut db, "d"),
        "busy:requests_g3,old:requests_g3,one:requests_g3,two:requests_g3"
    );
}
