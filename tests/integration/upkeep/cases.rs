//! One table of cases for the upkeep's decisions, run through `crates/idem-protocol`
//! (`reclaimable`, `reclaimed_expiry`, `purgeable`) and through both editions' `idem_reclaim`
//! then `idem_purge`: each record must end as the crate says, on both (issue 35: the
//! decisions stated in SQL and PL/pgSQL are checked against the crate's).

use crate::common;

use idem_protocol::plain::sample;
use idem_protocol::{Status, purgeable, reclaim_cutoff, reclaimable, reclaimed_expiry};

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
    let mut native = common::cluster().database("upkeep_cases");
    assert_eq!(named(through(&mut native)), expected, "native");
    let mut portable =
        crate::portable::owned_database(common::bare_cluster(), "upkeep_cases_portable");
    portable
        .batch_execute(&common::portable_script(&[]))
        .expect("the portable edition installs");
    assert_eq!(named(through(&mut portable)), expected, "portable");
}
