//! The upkeep and the rotation decide after they lock (issue 32, finding 1). A role with only
//! `TRIGGER` on `idempotency.requests` creates its trigger in a transaction it keeps open until
//! the owner's upkeep (the portable edition's, from pg_cron) or rotation (both editions: the
//! SQL of sql/rotate.sql) waits for the table, then commits: the trigger is seen and refused,
//! never run with the owner's rights. Before the fix the portable upkeep read the triggers,
//! found none, waited in its `UPDATE`, and then ran the new one as the owner. The native
//! worker locks first too (clusters/worker/).

use super::generations::Edition;
use crate::common;

use std::time::Duration;

use common::Client;

/// The edition in `name`, its owner's session, and a session of `{name}_attacker`, which has
/// `TRIGGER` on the table and a trigger function that notes who ran it.
fn setup(edition: Edition, name: &str) -> (Client, Client) {
    let cluster = || edition.cluster();
    let mut owner = edition.install(name);
    let attacker = format!("{name}_attacker");
    let mut admin = cluster().connect("postgres");
    admin
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS {attacker}; CREATE ROLE {attacker} LOGIN"
        ))
        .expect("attacker");
    owner
        .batch_execute(&format!(
            "GRANT USAGE ON SCHEMA idempotency TO {attacker};
             GRANT TRIGGER ON idempotency.requests TO {attacker};
             CREATE TABLE public.fired (who text);
             GRANT INSERT ON public.fired TO PUBLIC;"
        ))
        .expect("grants");
    cluster()
        .connect(name)
        .batch_execute(&format!("CREATE SCHEMA atk AUTHORIZATION {attacker}"))
        .expect("the attacker's schema");
    let mut a = cluster().connect_as(name, &attacker);
    a.batch_execute(
        "CREATE FUNCTION atk.note() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN INSERT INTO public.fired VALUES (current_user); RETURN NULL; END $$",
    )
    .expect("the trigger function");
    (owner, a)
}

const TRIGGER: &str =
    "CREATE TRIGGER note BEFORE UPDATE OR DELETE OR TRUNCATE ON idempotency.requests
     FOR EACH STATEMENT EXECUTE FUNCTION atk.note()";

/// The attacker opens `TRIGGER`; `run` (the owner's statement, in another session)
/// starts and waits for the table's lock; the attacker commits. Returns what `run` answered.
fn race(edition: Edition, name: &str, attacker: &mut Client, run: &'static str) -> String {
    race_with(edition, name, attacker, TRIGGER, run)
}

/// `race` with another open change (`ddl`) of `holder`'s.
fn race_with(
    edition: Edition,
    name: &str,
    holder: &mut Client,
    ddl: &str,
    run: &'static str,
) -> String {
    let cluster = move || edition.cluster();
    holder
        .batch_execute(&format!("BEGIN; {ddl}"))
        .expect("the open change");
    let attacker = holder;
    let owner_role = edition.owner(name);
    let db = name.to_string();
    let upkeep = std::thread::spawn(move || {
        let mut o = cluster().connect_as(&db, &owner_role);
        o.batch_execute("SET application_name = 'lock_first_upkeep'")
            .expect("name");
        common::answer(&mut o, run)
    });
    let mut admin = cluster().connect(name);
    common::wait_for(
        "the owner's statement waits for the table",
        Duration::from_secs(30),
        || {
            common::count(
                &mut admin,
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND application_name = 'lock_first_upkeep' AND wait_event_type = 'Lock'",
            ) > 0
        },
    );
    attacker.batch_execute("COMMIT").expect("commit");
    upkeep.join().expect("the owner's statement")
}

#[test]
fn the_portable_upkeep_refuses_a_trigger_committed_while_it_waits() {
    let name = "lf_upkeep";
    let (mut owner, mut attacker) = setup(Edition::Portable, name);
    let run = "SELECT (reclaimed IS NULL AND purged IS NULL)::text FROM idem_upkeep()";
    assert_eq!(
        race(Edition::Portable, name, &mut attacker, run),
        "true",
        "requests left alone"
    );
    assert_eq!(
        common::count(&mut owner, "SELECT count(*) FROM public.fired"),
        0
    );
}

#[test]
fn the_rotation_refuses_a_trigger_committed_while_it_waits() {
    for (edition, name) in [
        (Edition::Native, "lf_rotate_native"),
        (Edition::Portable, "lf_rotate_portable"),
    ] {
        let (mut owner, mut attacker) = setup(edition, name);
        // A live record from before the switch: the first rotation moves it out of the table.
        owner
            .batch_execute(
                "SELECT idem_claim('s', 'k', 'h'); SELECT idem_set_layout('generations');",
            )
            .expect("a record, then the layout");
        let run = "SELECT idem_rotate(force => true, lock_wait => '60s')";
        assert_eq!(
            race(edition, name, &mut attacker, run),
            "ERROR 0A000",
            "{edition:?}"
        );
        assert_eq!(
            common::count(&mut owner, "SELECT count(*) FROM public.fired"),
            0,
            "{edition:?}"
        );
        if edition == Edition::Portable {
            // Its upkeep leaves the table alone too.
            let run = "SELECT (reclaimed IS NULL AND purged IS NULL)::text FROM idem_upkeep()";
            assert_eq!(common::answer(&mut owner, run), "true");
            assert_eq!(
                common::count(&mut owner, "SELECT count(*) FROM public.fired"),
                0
            );
        }
    }
}

/// The same decision after the lock for what only the owner can add: a row-level security
/// policy opened in another session of the owner's while the rotation waits is refused (the
/// layout does not carry policies to the generations), not bypassed.
#[test]
fn the_rotation_refuses_a_policy_committed_while_it_waits() {
    for (edition, name) in [
        (Edition::Native, "lf_policy_native"),
        (Edition::Portable, "lf_policy_portable"),
    ] {
        let (mut owner, _attacker) = setup(edition, name);
        owner
            .batch_execute(
                "SELECT idem_claim('s', 'k', 'h'); SELECT idem_set_layout('generations');",
            )
            .expect("a record, then the layout");
        let mut other = edition.cluster().connect_as(name, &edition.owner(name));
        let policy = "CREATE POLICY p ON idempotency.requests USING (true)";
        let run = "SELECT idem_rotate(force => true, lock_wait => '60s')";
        assert_eq!(
            race_with(edition, name, &mut other, policy, run),
            "ERROR 0A000",
            "{edition:?}"
        );
    }
}
