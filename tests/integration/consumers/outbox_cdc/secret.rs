//! The signing function and the secret against roles with some rights (the attacker's review
//! of issue 32, findings 1 and 3): the `app` profile calling `idempotency.cdc_message` directly
//! gets the put's checks, and members of `pg_read_all_data` / `pg_write_all_data`, or a role
//! given default privileges before the install, neither read nor plant the secret.

use super::*;

/// The cluster's roles, made once by whichever test comes first.
fn roles(db: &mut Client) {
    db.batch_execute(
        "DO $$ BEGIN CREATE ROLE cdc_sign_app LOGIN;
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;
         SELECT idem_grant('cdc_sign_app', 'app');",
    )
    .expect("roles");
}

fn state(c: &mut Client, sql: &str) -> String {
    match c.batch_execute(sql) {
        Ok(()) => "ok".to_string(),
        Err(e) => common::sqlstate(&e),
    }
}

/// docs/tenants.md's outbox policy, word for word.
const TENANT_OUTBOX: &str = "ALTER TABLE idempotency.outbox ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_outbox ON idempotency.outbox
    USING (pg_catalog.split_part(topic, '/', 1)
           OPERATOR(pg_catalog.=) pg_catalog.current_setting('app.tenant', true)
           AND pg_catalog.current_setting('app.tenant', true) OPERATOR(pg_catalog.<>) '')
    WITH CHECK (pg_catalog.split_part(topic, '/', 1)
           OPERATOR(pg_catalog.=) pg_catalog.current_setting('app.tenant', true)
           AND pg_catalog.current_setting('app.tenant', true) OPERATOR(pg_catalog.<>) '');";

on_both_editions! {
    /// The app role calling idempotency.cdc_message directly gets what a put would: the
    /// argument checks (P4000, P4001, 22023, 54000) and, under the tenant recipe, 0A000, so it
    /// signs no message for another tenant's topic; its puts still work, the tenant's too.
    fn cdc_message_signs_nothing_a_put_would_refuse => cdc_message_signs_nothing_a_put_would_refuse_in;
}

fn cdc_message_signs_nothing_a_put_would_refuse_in(edition: &str) {
    let mut db = database(edition, "cdc_sign");
    let name = format!("cdc_sign_{edition}");
    roles(&mut db);
    // A superuser's setting in the native edition.
    db.batch_execute(&format!(
        "ALTER DATABASE {name} SET idempotency.outbox_max_bytes = 16"
    ))
    .expect("a small cap");
    let mut app = logical().connect_as(&name, "cdc_sign_app");
    let sign =
        |c: &mut Client, args: &str| state(c, &format!("SELECT idempotency.cdc_message({args})"));
    // (topic, dedupe_key, payload, headers), and what both refuse them with.
    for ((t, k, p, h), want) in [
        (("''", "'k'", "'{}'", "NULL"), "P4000"),
        (("repeat('t', 256)", "'k'", "'{}'", "NULL"), "P4004"),
        (("'t'", "' '", "'{}'", "NULL"), "P4001"),
        (("'t'", "'k'", "NULL", "NULL"), "22004"),
        (("'t'", "'k'", "'{}'", "'[1]'"), "22023"),
        (("'t'", "'k'", "'\"abcdefghijklmnop\"'", "NULL"), "54000"),
    ] {
        let args = format!("{t}, {k}, {p}, {h}");
        assert_eq!(
            sign(&mut app, &args),
            want,
            "{edition}: cdc_message({args})"
        );
        let put = state(
            &mut app,
            &format!(
                "SET idempotency.outbox_delivery = cdc_message; SELECT idem_outbox_put({t}, {p}, {k}, {h})"
            ),
        );
        assert_eq!(put, want, "{edition}: the put refuses the same");
        app.batch_execute("RESET idempotency.outbox_delivery")
            .expect("reset");
    }
    assert_eq!(
        sign(&mut app, "'globex/orders', 'k', '{}', NULL"),
        "ok",
        "{edition}"
    );
    db.batch_execute(TENANT_OUTBOX).expect("the tenant recipe");
    app.batch_execute("SET app.tenant = 'acme'")
        .expect("tenant");
    // The finding: another tenant's topic, signed without the policy.
    assert_eq!(
        sign(&mut app, "'globex/orders', 'k', '{}', NULL"),
        "0A000",
        "{edition}"
    );
    assert_eq!(
        sign(&mut app, "'acme/orders', 'k', '{}', NULL"),
        "0A000",
        "{edition}"
    );
    assert_eq!(
        state(
            &mut app,
            "SET idempotency.outbox_delivery = cdc_message;
             SELECT idem_outbox_put('acme/orders', '{}', 'k')"
        ),
        "0A000",
        "{edition}: as a cdc_message put under the policies"
    );
    assert_eq!(
        state(
            &mut app,
            "SET idempotency.outbox_delivery = cdc_table;
             SELECT idem_outbox_put('acme/orders', '{}', 'k')"
        ),
        "ok",
        "{edition}: the tenant's cdc_table put"
    );
    assert_eq!(
        state(
            &mut app,
            "SELECT idem_outbox_put('globex/orders', '{}', 'k')"
        ),
        "42501",
        "{edition}: the policy checks the row"
    );
    db.batch_execute(
        "DROP POLICY tenant_outbox ON idempotency.outbox;
         ALTER TABLE idempotency.outbox DISABLE ROW LEVEL SECURITY;",
    )
    .expect("no tenants");
    assert_eq!(
        state(
            &mut app,
            "SET idempotency.outbox_delivery = cdc_message;
             SELECT idem_outbox_put('orders', '{}', 'k')"
        ),
        "ok",
        "{edition}: a cdc_message put without row-level security"
    );
}

on_both_editions! {
    /// Row-level security with no policy on idempotency.cdc_secret: a member of
    /// pg_read_all_data reads no row, a member of pg_write_all_data inserts nothing (42501)
    /// and changes nothing, so the ids stay those of the owner's secret (Postgres 14+).
    #[cfg_attr(feature = "pg13", ignore = "pg_read_all_data and pg_write_all_data: from 14")]
    fn predefined_roles_neither_read_nor_plant_the_secret => predefined_roles_neither_read_nor_plant_the_secret_in;
}

fn predefined_roles_neither_read_nor_plant_the_secret_in(edition: &str) {
    let mut db = database(edition, "cdc_allread");
    let name = format!("cdc_allread_{edition}");
    db.batch_execute(
        "DO $$ BEGIN CREATE ROLE cdc_all_reader LOGIN IN ROLE pg_read_all_data;
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;
         DO $$ BEGIN CREATE ROLE cdc_all_writer LOGIN IN ROLE pg_write_all_data;
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;",
    )
    .expect("roles");
    let id = "SELECT idempotency.cdc_message('t', 'k', '{}', NULL)::jsonb->>'message_id'";
    let before = common::answer(&mut db, id);
    let mut reader = logical().connect_as(&name, "cdc_all_reader");
    assert_eq!(
        common::answer(
            &mut reader,
            "SELECT count(*)::text FROM idempotency.cdc_secret"
        ),
        "0",
        "{edition}: pg_read_all_data reads no row"
    );
    let mut writer = logical().connect_as(&name, "cdc_all_writer");
    // An "oldest" row would become the secret.
    assert_eq!(
        state(
            &mut writer,
            "INSERT INTO idempotency.cdc_secret (secret, created_at) VALUES (sha256(''), '-infinity')"
        ),
        "42501",
        "{edition}: pg_write_all_data plants nothing"
    );
    assert_eq!(
        state(
            &mut writer,
            "UPDATE idempotency.cdc_secret SET secret = sha256(''), created_at = '-infinity';
             DELETE FROM idempotency.cdc_secret;"
        ),
        "ok",
        "{edition}: no row to update or delete"
    );
    assert_eq!(
        common::answer(&mut db, id),
        before,
        "{edition}: the same ids"
    );
    assert_eq!(
        count(&mut db, "SELECT count(*) FROM idempotency.cdc_secret"),
        1,
        "{edition}"
    );
}

on_both_editions! {
    /// Default privileges granted before the install (ALTER DEFAULT PRIVILEGES ... GRANT
    /// SELECT, INSERT ON TABLES) give the grantee nothing on idempotency.cdc_secret.
    fn default_privileges_do_not_leak_the_secret => default_privileges_do_not_leak_the_secret_in;
}

fn default_privileges_do_not_leak_the_secret_in(edition: &str) {
    let name = format!("cdc_defacl_{edition}");
    let mut db = logical().empty_database(&name);
    db.batch_execute(
        "DO $$ BEGIN CREATE ROLE cdc_defacl LOGIN;
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;
         ALTER DEFAULT PRIVILEGES GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO cdc_defacl;
         ALTER DEFAULT PRIVILEGES GRANT USAGE ON SCHEMAS TO cdc_defacl;",
    )
    .expect("default privileges");
    if edition == "native" {
        db.batch_execute("CREATE EXTENSION idempotency")
            .expect("install");
    } else {
        db.batch_execute(&common::portable_script(&[]))
            .expect("install");
    }
    assert_eq!(
        common::answer(
            &mut db,
            "SELECT has_table_privilege('cdc_defacl', 'idempotency.outbox', 'SELECT')::text
                 || ' ' || has_table_privilege('cdc_defacl', 'idempotency.cdc_secret', 'SELECT, INSERT, UPDATE, DELETE')::text"
        ),
        "true false",
        "{edition}: the default privileges applied, but not to the secret"
    );
    let mut c = logical().connect_as(&name, "cdc_defacl");
    assert_eq!(
        state(&mut c, "SELECT secret FROM idempotency.cdc_secret"),
        "42501",
        "{edition}"
    );
}

on_both_editions! {
    /// The secret is read inside the statement that uses it (idempotency.cdc_sign), never
    /// passed as an argument: with auto_explain logging every nested statement and its
    /// parameters, and log_statement = all, a put, a direct call and both checks leave no
    /// trace of it in the server's log (the portable edition's SQL HMAC took it as $1).
    #[cfg_attr(idem_no_auto_explain, ignore = "contrib's auto_explain is not installed")]
    fn the_secret_is_never_a_logged_parameter => the_secret_is_never_a_logged_parameter_in;
}

fn the_secret_is_never_a_logged_parameter_in(edition: &str) {
    let mut db = database(edition, "cdc_logged");
    let secret = common::answer(
        &mut db,
        "SELECT encode(secret, 'hex') FROM idempotency.cdc_secret",
    );
    db.batch_execute(
        "LOAD 'auto_explain';
         SET auto_explain.log_min_duration = 0;
         SET auto_explain.log_nested_statements = on;
         SET log_statement = 'all';
         SET idempotency.outbox_delivery = cdc_message;
         DO $$ BEGIN
             IF current_setting('server_version_num')::int >= 160000 THEN
                 SET auto_explain.log_parameter_max_length = -1;
             END IF;
         END $$;",
    )
    .expect("auto_explain");
    let signed = common::answer(
        &mut db,
        "SELECT idempotency.cdc_message('orders', 'order-1', '{\"n\": 1}', NULL)",
    );
    db.batch_execute("SELECT idem_outbox_put('orders', '{}', 'order-2')")
        .expect("put");
    let opened: Option<String> = db
        .query_one("SELECT idem_cdc_verified($1::text)::text", &[&signed])
        .expect("verified")
        .get(0);
    assert!(opened.is_some(), "{edition}: genuine");
    let checked: bool = db
        .query_one("SELECT idem_cdc_verify($1::text::jsonb)", &[&signed])
        .expect("verify")
        .get(0);
    assert!(checked, "{edition}");
    db.batch_execute("RESET log_statement").expect("reset");
    let log = logical().log();
    assert!(
        log.contains("idempotency.cdc_secret"),
        "{edition}: the nested statements are logged, or this test proves nothing"
    );
    assert!(
        !log.contains(&secret),
        "{edition}: the secret is in the server's log"
    );
}
