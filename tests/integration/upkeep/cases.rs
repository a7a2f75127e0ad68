//! Tables of cases for the protocol's decisions that SQL and PL/pgSQL restate, each case run
//! through `crates/idem-protocol` and through both editions (issue 35: the decisions stated in
//! SQL and PL/pgSQL are checked against the crate's):
//! - the upkeep's (`reclaimable`, `reclaimed_expiry`, `purgeable`) through `idem_reclaim`
//!   then `idem_purge`: each record must end as the crate says;
//! - a finish's ("is current", `Record::is_current`, which the native SQL path's lock and the
//!   portable functions' WHERE restate; the repeat rules, `is_repeat`; `diagnose`) through
//!   `idem_complete`, `idem_fail` and `idem_checkpoint`: each call must change the record,
//!   accept a repeat, or raise the SQLSTATE the crate's reason maps to.

use crate::common;

use idem_protocol::plain::{Plain, sample};
use idem_protocol::{
    Diagnosis, Finish, Record, Status, diagnose, is_repeat, purgeable, reclaim_cutoff, reclaimable,
    reclaimed_expiry,
};

use common::Client;

const HOUR: i64 = 3_600_000_000;
const RETENTION_HOURS: i64 = 24;

/// (key, status, lease ended this many hours ago (negative: ends later), expires in hours)
const CASES: [(&str, Status, Option<i64>, i64); 10] = [
    ("lease-ended", Status::Processing, Some(1), 20),
    ("lease-ended-expired", Status::Processing, Some(1), -1),
    ("lease-running", Status::Processing, Some(-1), 20),
    ("lease-running-expired", Status::Processing, Some(-1), -1),
    ("succeeded-expired", Status::Succeeded, None, -1),
    ("succeeded-kept", Status::Succeeded, None, 1),
    ("retryable-expired", Status::FailedRetryable, None, -1),
    ("retryable-kept", Status::FailedRetryable, None, 1),
    ("final-expired", Status::FailedFinal, None, -1),
    ("final-kept", Status::FailedFinal, None, 1),
];

/// What a record ends as: gone, or (status, failure_code, expires in whole hours from now).
type End = Option<(String, Option<String>, i64)>;

/// The crate's answer for each case, at a `now` with no grace (the tests' settings).
fn predicted() -> Vec<End> {
    let now = sample(Status::Processing, 1).claimed_at + 100 * HOUR;
    CASES
        .iter()
        .map(|&(_, status, ended, expires)| {
            let mut r = sample(status, 1);
            r.locked_until = ended.map(|h| now - h * HOUR);
            r.expires_at = now + expires * HOUR;
            let mut code = r.failure_code.map(|_| "E".to_string());
            if reclaimable(&r, reclaim_cutoff(now, 0)) {
                r.status = Status::FailedRetryable;
                r.locked_until = None;
                r.expires_at = reclaimed_expiry(r.expires_at, now, (RETENTION_HOURS * HOUR).into());
                code = Some("lease_expired".into());
            }
            (!purgeable(&r, now)).then(|| {
                let label = r.status.label().to_str().expect("utf8").to_string();
                (label, code, (r.expires_at - now) / HOUR)
            })
        })
        .collect()
}

/// The cases written into `db`'s table, then one reclaim and one purge: how each ended.
fn through(db: &mut Client) -> Vec<End> {
    db.batch_execute("SET idempotency.reclaim_grace = 0").ok();
    for &(key, status, ended, expires) in &CASES {
        let label = status.label().to_str().expect("utf8");
        db.execute(
            "INSERT INTO idempotency.requests (scope, key, request_hash, status, attempt, response,
                 failure_code, claimed_at, locked_until, lease, retention, created_at, updated_at, expires_at)
             SELECT 'cases', $1::text, 'h', $2::text::idem_status, 1,
                    CASE WHEN $2::text = 'succeeded' THEN '{}'::jsonb END,
                    CASE WHEN $2::text LIKE 'failed%' THEN 'E' END,
                    now() - interval '2 days',
                    now() - $3::float8 * interval '1 hour', interval '1 minute',
                    $5::float8 * interval '1 hour', now() - interval '2 days', now() - interval '2 days',
                    now() + $4::float8 * interval '1 hour'",
            &[
                &key,
                &label,
                &ended.map(|h| h as f64),
                &(expires as f64),
                &(RETENTION_HOURS as f64),
            ],
        )
        .unwrap_or_else(|e| panic!("{key}: {e}"));
    }
    db.batch_execute("SELECT idem_reclaim(); SELECT idem_purge();")
        .expect("reclaim, then purge");
    CASES
        .iter()
        .map(|&(key, ..)| {
            db.query_opt(
                "SELECT status::text, failure_code,
                        round(extract(epoch FROM expires_at - now()) / 3600)::int8
                   FROM idempotency.requests WHERE scope = 'cases' AND key = $1",
                &[&key],
            )
            .expect("read back")
            .map(|row| (row.get(0), row.get(1), row.get(2)))
        })
        .collect()
}

fn named(ends: Vec<End>) -> Vec<(&'static str, End)> {
    CASES.iter().map(|c| c.0).zip(ends).collect()
}

#[test]
fn the_upkeep_ends_each_case_as_the_crate_says_on_both_editions() {
    let expected = named(predicted());
    assert!(
        expected.iter().any(|(_, e)| e.is_none())
            && expected.iter().any(|(_, e)| e
                .as_ref()
                .is_some_and(|(_, c, _)| c.as_deref() == Some("lease_expired"))),
        "the table has cases of both kinds: {expected:?}"
    );
    on_both("upkeep_cases", |db, edition| {
        assert_eq!(named(through(db)), expected, "{edition}")
    });
}

/// `check` on a new database of each edition named after `name` (the portable one installed
/// by a non-superuser owner on a server without the library).
fn on_both(name: &str, check: impl Fn(&mut Client, &str)) {
    check(&mut common::cluster().database(name), "native");
    let portable = format!("{name}_portable");
    let mut db = crate::portable::owned_database(common::bare_cluster(), &portable);
    db.batch_execute(&common::portable_script(&[]))
        .expect("the portable edition installs");
    check(&mut db, "portable");
}

/// A finishing call of the table below: complete, fail (retryable or not) or checkpoint.
#[derive(Clone, Copy, Debug)]
enum Call {
    Complete,
    Fail(bool),
    Checkpoint,
}

/// (key, the record (attempt 2; `None`: no record), the call, its `attempt`, whether it
/// gives the stored values (the response; the failure code and message))
type FinishCase = (&'static str, Option<Status>, Call, Option<i32>, bool);

#[rustfmt::skip]
const FINISHES: [FinishCase; 21] = [
    ("run-complete", Some(Status::Processing), Call::Complete, None, true),
    ("run-complete-2", Some(Status::Processing), Call::Complete, Some(2), false),
    ("run-complete-1", Some(Status::Processing), Call::Complete, Some(1), true),
    ("run-checkpoint-3", Some(Status::Processing), Call::Checkpoint, Some(3), true),
    ("run-fail", Some(Status::Processing), Call::Fail(true), None, false),
    ("run-checkpoint", Some(Status::Processing), Call::Checkpoint, None, false),
    ("ok-same", Some(Status::Succeeded), Call::Complete, None, true),
    ("ok-same-2", Some(Status::Succeeded), Call::Complete, Some(2), true),
    ("ok-other", Some(Status::Succeeded), Call::Complete, None, false),
    ("ok-same-1", Some(Status::Succeeded), Call::Complete, Some(1), true),
    ("ok-fail", Some(Status::Succeeded), Call::Fail(false), None, true),
    ("ok-checkpoint", Some(Status::Succeeded), Call::Checkpoint, None, true),
    ("retry-same", Some(Status::FailedRetryable), Call::Fail(true), None, true),
    ("retry-other", Some(Status::FailedRetryable), Call::Fail(true), None, false),
    ("retry-final", Some(Status::FailedRetryable), Call::Fail(false), None, true),
    ("final-same-2", Some(Status::FailedFinal), Call::Fail(false), Some(2), true),
    ("final-complete", Some(Status::FailedFinal), Call::Complete, None, true),
    ("retry-checkpoint", Some(Status::FailedRetryable), Call::Checkpoint, Some(2), true),
    ("none-complete", None, Call::Complete, None, true),
    ("none-fail", None, Call::Fail(true), Some(1), true),
    ("none-checkpoint", None, Call::Checkpoint, None, true),
];

fn not_processing(call: Call) -> &'static str {
    match call {
        Call::Complete => "P4010",
        Call::Fail(_) => "P4011",
        Call::Checkpoint => "P4013",
    }
}

/// The crate's answer for each finishing case: `changed` (the current attempt,
/// `Record::is_current`), `repeat` (`is_repeat`), or the SQLSTATE of `diagnose`'s reason.
fn finish_predicted() -> Vec<String> {
    FINISHES
        .iter()
        .map(|&(_, status, call, attempt, same)| {
            let found = status.map(|s| sample(s, 2));
            if found.is_some_and(|r| r.is_current(attempt)) {
                return "changed".to_string();
            }
            let finish = match call {
                Call::Complete => Finish::Complete,
                Call::Fail(true) => Finish::Fail(Status::FailedRetryable),
                Call::Fail(false) => Finish::Fail(Status::FailedFinal),
                Call::Checkpoint => Finish::Checkpoint,
            };
            let repeat = |r: &Record<Plain>| Ok::<_, ()>(is_repeat(finish, r.status, same));
            match diagnose(found.as_ref(), attempt, repeat) {
                Ok(Diagnosis::Repeat) => "repeat".into(),
                Ok(Diagnosis::Stale { .. }) => "P4012".into(),
                Ok(Diagnosis::NotProcessing) | Err(()) => not_processing(call).into(),
            }
        })
        .collect()
}

/// Each finishing case through `db`'s functions: `changed` or `repeat` (the call succeeded and
/// the record changed, or not), or the SQLSTATE it raised.
fn finish_through(db: &mut Client) -> Vec<String> {
    const ROW: &str = "SELECT concat_ws('|', status, attempt, response, failure_code, \
        failure_message, recovery_point, locked_until) FROM idempotency.requests \
        WHERE scope = 'fin' AND key = $1";
    FINISHES
        .iter()
        .map(|&(key, status, call, attempt, same)| {
            if let Some(status) = status {
                db.execute(
                    "INSERT INTO idempotency.requests (scope, key, request_hash, status, attempt,
                         response, failure_code, failure_message, claimed_at, locked_until, lease,
                         retention, created_at, updated_at, expires_at)
                     SELECT 'fin', $1::text, 'h', $2::text::idem_status, 2,
                            CASE WHEN $2::text = 'succeeded' THEN '{\"r\": 1}'::jsonb END,
                            CASE WHEN $2::text LIKE 'failed%' THEN 'E' END,
                            CASE WHEN $2::text LIKE 'failed%' THEN 'm' END,
                            now() - interval '1 minute',
                            CASE WHEN $2::text = 'processing' THEN now() + interval '1 hour' END,
                            interval '1 hour', interval '1 day', now() - interval '1 minute',
                            now() - interval '1 minute', now() + interval '1 day'",
                    &[&key, &status.label().to_str().expect("utf8")],
                )
                .unwrap_or_else(|e| panic!("{key}: {e}"));
            }
            let attempt = attempt.map_or("NULL".into(), |a| a.to_string());
            let sql = match call {
                Call::Complete => format!(
                    "SELECT idem_complete('fin', '{key}', '{}', attempt => {attempt})",
                    if same { "{\"r\": 1}" } else { "{\"r\": 2}" }
                ),
                Call::Fail(retryable) => format!(
                    "SELECT idem_fail('fin', '{key}', {retryable}, 'E', '{}', attempt => {attempt})",
                    if same { "m" } else { "other" }
                ),
                Call::Checkpoint => {
                    format!("SELECT idem_checkpoint('fin', '{key}', 'p', attempt => {attempt})")
                }
            };
            let row = |db: &mut Client| -> Option<String> {
                db.query_opt(ROW, &[&key]).expect("the row").map(|r| r.get(0))
            };
            let before = row(db);
            match db.batch_execute(&sql) {
                Ok(()) if row(db) != before => "changed".into(),
                Ok(()) => "repeat".into(),
                Err(e) => common::sqlstate(&e),
            }
        })
        .collect()
}

/// "Is current" and the repeat rules: each finishing case ends as the crate says
/// (`Record::is_current`, `is_repeat`, `diagnose`), on both editions.
#[test]
fn each_finish_ends_as_the_crate_says_on_both_editions() {
    let named = |answers: Vec<String>| -> Vec<(&str, String)> {
        FINISHES.iter().map(|c| c.0).zip(answers).collect()
    };
    let expected = named(finish_predicted());
    for answer in ["changed", "repeat", "P4010", "P4011", "P4012", "P4013"] {
        assert!(
            expected.iter().any(|(_, a)| a == answer),
            "the table has a case answered {answer}: {expected:?}"
        );
    }
    on_both("finish_cases", |db, edition| {
        assert_eq!(named(finish_through(db)), expected, "{edition}")
    });
}
