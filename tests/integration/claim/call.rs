//! idem_call's privilege checks across real sessions.

use crate::common;

use common::sqlstate;

crate::own_database!();

/// A function given by OID skips the name lookup; idem_call checks USAGE on its schema
/// itself, which also keeps other sessions' temporary schemas out of reach (security audit,
/// finding 6). The owner session can still call its own temporary function by OID, as it
/// could as `pg_temp.name(jsonb)`.
#[test]
fn call_by_oid_cannot_reach_another_sessions_temporary_function() {
    let mut admin = cluster().session();
    admin
        .batch_execute(
            "CREATE ROLE call_temp_user LOGIN; \
             GRANT USAGE ON SCHEMA idempotency TO call_temp_user; \
             GRANT SELECT, INSERT, UPDATE ON idempotency.requests TO call_temp_user; \
             CREATE TABLE public.call_temp_effects (request jsonb)",
        )
        .expect("setup");
    let mut owner = cluster().session();
    owner
        .batch_execute(
            "CREATE FUNCTION pg_temp.temp_definer(request jsonb) RETURNS jsonb \
             LANGUAGE plpgsql SECURITY DEFINER AS $fn$ \
             BEGIN INSERT INTO public.call_temp_effects VALUES (request); RETURN request; END $fn$",
        )
        .expect("temporary function");
    let oid: i64 = owner
        .query_one(
            "SELECT 'pg_temp.temp_definer(jsonb)'::regprocedure::oid::int8",
            &[],
        )
        .expect("oid")
        .get(0);
    let call =
        "SELECT outcome::text FROM idem_call('call_temp', $1, '{}', $2::int8::oid::regprocedure)";

    let mut user = cluster().connect_as(&cluster().name, "call_temp_user");
    let denied = match user.query_one(call, &[&"user", &oid]) {
        Ok(row) => panic!(
            "another session's temporary function: {}",
            row.get::<_, String>(0)
        ),
        Err(e) => e,
    };
    assert_eq!(sqlstate(&denied), "42501", "{denied:?}");
    let written: i64 = admin
        .query_one(
            "SELECT (SELECT count(*) FROM idempotency.requests WHERE scope = 'call_temp') \
             + (SELECT count(*) FROM public.call_temp_effects)",
            &[],
        )
        .expect("count")
        .get(0);
    assert_eq!(written, 0, "nothing is recorded or done");

    let own: String = owner
        .query_one(call, &[&"owner", &oid])
        .expect("own temporary function")
        .get(0);
    assert_eq!(own, "new_claim");
}
