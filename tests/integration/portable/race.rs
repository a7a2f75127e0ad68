//! Races on the portable edition with real concurrent sessions: eight sessions claim one new
//! key at once (exactly one new_claim, the others processing_active, none waits), then take an
//! expired lease over at once (exactly one attempt 2), and run one idem_call at once (the
//! callee's effect happens once).

use crate::common;

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const SESSIONS: usize = 8;

/// `sql` (its first column as text) in SESSIONS sessions released together; each answer with
/// how long it took.
fn together(db: &str, user: &str, sql: &'static str) -> Vec<(String, Duration)> {
    let barrier = Arc::new(Barrier::new(SESSIONS));
    let threads: Vec<_> = (0..SESSIONS)
        .map(|_| {
            let barrier = barrier.clone();
            let mut client = super::cluster().connect_as(db, user);
            std::thread::spawn(move || {
                client
                    .batch_execute("SET statement_timeout = '5s'")
                    .expect("timeout");
                barrier.wait();
                let started = Instant::now();
                let answer = common::answer(&mut client, sql);
                (answer, started.elapsed())
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().expect("session"))
        .collect()
}

fn count(answers: &[(String, Duration)], what: &str) -> usize {
    answers.iter().filter(|(a, _)| a == what).count()
}

#[test]
fn concurrent_claims_takeovers_and_calls() {
    let c = super::cluster();
    c.drop_database("portable_race");
    let mut admin = c.connect("postgres");
    for sql in [
        "DROP ROLE IF EXISTS portable_race_owner",
        "CREATE ROLE portable_race_owner LOGIN",
        "CREATE DATABASE portable_race OWNER portable_race_owner",
    ] {
        admin.batch_execute(sql).expect(sql);
    }
    let mut owner = c.connect_as("portable_race", "portable_race_owner");
    owner
        .batch_execute(&common::portable_script(&[]))
        .expect("install");
    owner
        .batch_execute(
            "CREATE TABLE public.effects (n int); \
             CREATE FUNCTION public.effect(r jsonb) RETURNS jsonb LANGUAGE sql \
             AS $$ INSERT INTO public.effects VALUES (1) RETURNING '{}'::jsonb $$",
        )
        .expect("callee");
    let user = "portable_race_owner";

    // Each claim holds its transaction open a moment, so the others meet it uncommitted.
    let claims = together(
        "portable_race",
        user,
        "SELECT outcome::text FROM idem_claim('race', 'k', 'h', lease => '1 ms'), pg_sleep(0.2)",
    );
    assert_eq!(count(&claims, "new_claim"), 1, "{claims:?}");
    assert_eq!(
        count(&claims, "processing_active"),
        SESSIONS - 1,
        "{claims:?}"
    );
    for (answer, took) in &claims {
        assert!(
            *took < Duration::from_millis(1500),
            "{answer} took {took:?}"
        );
    }
    std::thread::sleep(Duration::from_millis(20));
    let takeovers = together(
        "portable_race",
        user,
        "SELECT outcome::text || ' ' || attempt FROM idem_claim('race', 'k', 'h'), pg_sleep(0.2)",
    );
    assert_eq!(count(&takeovers, "processing_stale 2"), 1, "{takeovers:?}");
    assert_eq!(
        count(&takeovers, "processing_active 1"),
        SESSIONS - 1,
        "{takeovers:?}"
    );

    let calls = together(
        "portable_race",
        user,
        "SELECT outcome::text FROM idem_call('race', 'call', '{}', 'public.effect(jsonb)'), pg_sleep(0.2)",
    );
    assert_eq!(count(&calls, "new_claim"), 1, "{calls:?}");
    assert_eq!(count(&calls, "ERROR P4029"), SESSIONS - 1, "{calls:?}");
    assert_eq!(
        common::count(&mut owner, "SELECT count(*) FROM public.effects"),
        1
    );
    assert_eq!(
        common::answer(
            &mut owner,
            "SELECT outcome::text FROM idem_call('race', 'call', '{}', 'public.effect(jsonb)')"
        ),
        "replay_success"
    );
}
