//! Privileges before anything else (round 6 of the audit): a role without rights gets 42501
//! before a function locks the table, and an extension schema others may write to is named
//! loudly at install time.

use crate::common;

use common::{Client, answer};

crate::own_database!();

/// Privileges are checked before the table's lock is taken: a role without USAGE on schema
/// `idempotency`, or without any privilege on the table, gets 42501 at once and does not queue
/// behind a session holding ACCESS EXCLUSIVE on it (round 6, finding 5): every function that
/// reads or writes one of the four tables.
#[test]
fn no_rights_no_queueing_for_the_lock() {
    let mut db = cluster().database("sec_lock_first");
    no_rights_no_queueing(&mut db, &|role| {
        cluster().connect_as("sec_lock_first", role)
    });
}

/// The same on the portable edition, installed by a database owner who is not a superuser.
#[test]
fn no_rights_no_queueing_for_the_lock_portable() {
    let name = "sec_lock_first_portable";
    let c = common::bare_cluster();
    let mut db = crate::portable::owned_database(c, name);
    db.batch_execute(&common::portable_script(&[]))
        .expect("the portable edition installs");
    no_rights_no_queueing(&mut db, &|role| c.connect_as(name, role));
}

/// `db`: a session of the tables' owner; `connect(role)`: a session of `role` in that database
/// (`postgres`: a superuser's).
fn no_rights_no_queueing(db: &mut Client, connect: &dyn Fn(&str) -> Client) {
    connect("postgres")
        .batch_execute(
            "DO $$ BEGIN CREATE ROLE nobody LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
             DO $$ BEGIN CREATE ROLE usage_only LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;",
        )
        .expect("roles");
    db.batch_execute(
        "GRANT USAGE ON SCHEMA idempotency TO usage_only;
         CREATE FUNCTION public.sec_echo(r jsonb) RETURNS jsonb LANGUAGE sql AS 'SELECT r';",
    )
    .expect("roles");
    db.batch_execute(
        "BEGIN; LOCK TABLE idempotency.requests, idempotency.inbox, idempotency.outbox, \
         idempotency.versions IN ACCESS EXCLUSIVE MODE",
    )
    .expect("lock");
    for role in ["nobody", "usage_only"] {
        let mut c = connect(role);
        c.batch_execute("SET lock_timeout = '5s'").expect("timeout");
        for sql in [
            "SELECT idem_claim('s', 'k', 'h')::text",
            "SELECT idem_complete('s', 'k', '{}')::text",
            "SELECT idem_fail('s', 'k', true)::text",
            "SELECT idem_checkpoint('s', 'k', 'p')::text",
            "SELECT idem_forget('s', 'k')::text",
            "SELECT idem_call('s', 'k', '{}', 'public.sec_echo(jsonb)')::text",
            "SELECT idem_reclaim()::text",
            "SELECT idem_purge()::text",
            "SELECT idem_inbox_accept('c', 'm', 'h')::text",
            "SELECT idem_inbox_purge()::text",
            "SELECT idem_advance('s', 'e', 1)::text",
            "SELECT idem_outbox_put('t', '{}')::text",
            "SELECT idem_outbox_take()::text",
            "SELECT idem_outbox_ack(ARRAY[1]::bigint[])::text",
            "SELECT idem_outbox_nack(1, 'e')::text",
            "SELECT idem_outbox_purge()::text",
        ] {
            assert_eq!(answer(&mut c, sql), "ERROR 42501", "{role}: {sql}");
        }
    }
    db.batch_execute("ROLLBACK").expect("rollback");
}

/// Installed into a schema PUBLIC may create in, the extension warns at CREATE EXTENSION and
/// names who may write there; installed into a private schema, it says nothing.
#[test]
fn a_writable_extension_schema_is_named_at_install() {
    let mut db = cluster().empty_database("sec_writable_schema");
    db.batch_execute(
        "CREATE SCHEMA open_to_all; GRANT CREATE ON SCHEMA open_to_all TO PUBLIC;
         CREATE SCHEMA private;",
    )
    .expect("schemas");
    drop(db);
    let (mut owner, notices) = cluster().connect_collecting("sec_writable_schema", "postgres");
    owner
        .batch_execute("CREATE EXTENSION idempotency SCHEMA open_to_all")
        .expect("create extension");
    let warned = notices.lock().expect("notices").clone();
    assert!(
        warned
            .iter()
            .any(|n| n.contains("schema open_to_all is writable by PUBLIC")),
        "{warned:?}"
    );
    notices.lock().expect("notices").clear();
    owner
        .batch_execute("DROP EXTENSION idempotency; CREATE EXTENSION idempotency SCHEMA private")
        .expect("create extension");
    let warned = notices.lock().expect("notices").clone();
    assert!(
        !warned.iter().any(|n| n.contains("is writable by")),
        "{warned:?}"
    );
}
