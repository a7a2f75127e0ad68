//! The generations layout under load: one record per (scope, key) while sessions claim and a
//! session rotates; and sessions claiming new keys and replaying old ones while another
//! switches to generations, rotates, and switches back to flat, twice (no claim fails, no key
//! gets two records, every completed record still replays).

use super::{Edition, both_editions};
use crate::common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{answer, count};

both_editions!(
    claims_go_on_while_the_layout_switches_both_ways => "live",
    one_record_per_key_while_sessions_claim_and_a_session_rotates => "race",
);

fn claims_go_on_while_the_layout_switches_both_ways(ed: Edition, name: &str) {
    const CLAIMERS: usize = 4;
    let mut db = ed.install(name);
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(Mutex::new(HashSet::new()));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let claimers: Vec<_> = (0..CLAIMERS)
        .map(|n| {
            let mut c = ed.session(name);
            let (stop, done, errors) = (stop.clone(), done.clone(), errors.clone());
            std::thread::spawn(move || {
                let mut i = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    // Mostly new keys; every fourth call replays one of this session's.
                    let key = if i.is_multiple_of(4) { format!("{n}-{}", i / 2) } else { format!("{n}-{i}") };
                    let step = c
                        .query_one(
                            "SELECT outcome::text, attempt FROM idem_claim('live', $1, 'h', retention => '1 hour')",
                            &[&key],
                        )
                        .and_then(|row| {
                            let (outcome, attempt): (String, Option<i32>) = (row.get(0), row.get(1));
                            if outcome == "new_claim" {
                                c.execute("SELECT idem_complete('live', $1, '{}', attempt => $2)", &[&key, &attempt])?;
                                done.lock().unwrap().insert(key.clone());
                            }
                            Ok(())
                        });
                    if let Err(e) = step {
                        errors.lock().unwrap().push(format!("{key}: {e}"));
                    }
                }
            })
        })
        .collect();
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(
            answer(&mut db, "SELECT idem_set_layout('generations')"),
            "generations"
        );
        std::thread::sleep(Duration::from_millis(300));
        for _ in 0..3 {
            answer(
                &mut db,
                "SELECT idem_rotate(force => true, lock_wait => '200 ms')",
            );
        }
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(answer(&mut db, "SELECT idem_set_layout('flat')"), "flat");
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    for t in claimers {
        t.join().expect("claimer");
    }
    assert!(
        errors.lock().unwrap().is_empty(),
        "{:?}",
        errors.lock().unwrap()
    );
    assert_eq!(
        count(
            &mut db,
            "SELECT count(*) FROM (SELECT 1 FROM idempotency.requests GROUP BY scope, key HAVING count(*) > 1) AS d"
        ),
        0
    );
    let done = done.lock().unwrap();
    assert!(done.len() > 200, "only {} new claims", done.len());
    let kept = count(
        &mut db,
        "SELECT count(*) FROM idempotency.requests WHERE scope = 'live' AND status = 'succeeded'",
    );
    assert_eq!(kept, done.len() as i64, "every completed record kept");
    for key in done.iter().take(50) {
        assert_eq!(
            common::claim(&mut db, "live", key, "h"),
            "replay_success",
            "{key}"
        );
    }
}

fn one_record_per_key_while_sessions_claim_and_a_session_rotates(ed: Edition, name: &str) {
    const CLAIMERS: usize = 6;
    const KEYS: usize = 12;
    let mut db = ed.generations(name);
    // Claims in flight throughout: rotations move them, never drop them.
    db.batch_execute(
        "SELECT idem_claim('held', k, 'h', lease => '1 hour') FROM (VALUES ('a'), ('b')) AS v(k)",
    )
    .expect("processing records");
    let stop = Arc::new(AtomicBool::new(false));
    let new_claims = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(Mutex::new(Vec::new()));
    let claimers: Vec<_> = (0..CLAIMERS)
        .map(|n| {
            let mut c = ed.session(name);
            let (stop, new_claims, failures) = (stop.clone(), new_claims.clone(), failures.clone());
            std::thread::spawn(move || {
                let mut i = n;
                while !stop.load(Ordering::Relaxed) {
                    i = (i * 7 + 3) % KEYS;
                    let key = format!("k{i}");
                    // The claim's transaction stays open a moment, so switches land inside it.
                    let mut tx = c.transaction().expect("begin");
                    let row = tx
                        .query_one(
                            "SELECT outcome::text, attempt FROM idem_claim('r', $1, 'h', retention => '1 ms'), \
                             pg_sleep(0.002)",
                            &[&key],
                        )
                        .expect("claim");
                    let (outcome, attempt): (String, Option<i32>) = (row.get(0), row.get(1));
                    if outcome == "new_claim" {
                        new_claims.fetch_add(1, Ordering::Relaxed);
                    }
                    if outcome != "processing_active"
                        && outcome != "replay_success"
                        && let Err(e) = tx.execute(
                            "SELECT idem_complete('r', $1, '{}', attempt => $2)",
                            &[&key, &attempt],
                        )
                    {
                        failures.lock().unwrap().push(format!("{key} {outcome}: {e}"));
                    }
                    tx.commit().expect("commit");
                }
            })
        })
        .collect();
    let started = Instant::now();
    let mut switches = 0;
    let mut worst = 0;
    let duplicates = "SELECT count(*) FROM (SELECT 1 FROM idempotency.requests \
                      GROUP BY scope, key HAVING count(*) > 1) AS d";
    // At least 6 s of load, and until ten switches (a busy machine gives fewer a second),
    // within a minute.
    while (started.elapsed() < Duration::from_secs(6) || switches < 10)
        && started.elapsed() < Duration::from_secs(60)
    {
        worst = worst.max(count(&mut db, duplicates));
        if answer(
            &mut db,
            "SELECT idem_rotate(force => true, lock_wait => '20 ms')",
        ) == "switched"
        {
            switches += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in claimers {
        t.join().expect("claimer");
    }
    worst = worst.max(count(&mut db, duplicates));
    let new_claims = new_claims.load(Ordering::Relaxed);
    eprintln!("{ed:?}: {switches} switches, {new_claims} new claims");
    assert_eq!(worst, 0, "a key had two records");
    assert!(
        failures.lock().unwrap().is_empty(),
        "{:?}",
        failures.lock().unwrap()
    );
    assert!(switches >= 10, "only {switches} switches");
    assert_eq!(
        answer(
            &mut db,
            "SELECT string_agg(key || ' ' || status || ' ' || attempt, ',' ORDER BY key) \
                         FROM idempotency.requests WHERE scope = 'held'"
        ),
        "a processing 1,b processing 1"
    );
    assert!(new_claims > KEYS * 3, "only {new_claims} new claims");
}
