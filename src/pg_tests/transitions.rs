//! The direct path and the SQL path write the same record for every transition
//! (src/steps/transition.rs), and `record::COLUMNS` is the table in the catalog.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::base::datum::text_datum;
    use crate::base::errors;
    use crate::base::record::{COLUMNS, Outcome, Record, Status};
    use crate::direct::lookup::Lookup;
    use crate::direct::writer::Writer;
    use crate::entry::claim::claim_at;
    use crate::pg_tests::helpers::{one, run, set_time, sqlstate, text};
    use crate::spi::{Conn, LazyConn};
    use crate::steps::change::{Path, Target, change_attempt_at};
    use crate::steps::transition::{ClaimArgs, Clock, Transition};

    /// Two identical records, keys `d` (for the direct path) and `s` (for SQL), of `scope`, in
    /// state `status`, claimed an hour ago; `lease_ended`: its lease ended a minute ago.
    fn seed_pair(scope: &str, status: &str, lease_ended: bool) {
        for key in ["d", "s"] {
            Spi::run_with_args(
                "INSERT INTO idempotency.requests VALUES ($1, $2, 'h', $3::idem_status, 2,
                    CASE WHEN $3 = 'succeeded' THEN '{\"r\": 1}'::jsonb END, 'rp1',
                    CASE WHEN $3 LIKE 'failed%' THEN 'E1' END, CASE WHEN $3 LIKE 'failed%' THEN 'm' END,
                    'w0', now() - interval '1 hour',
                    CASE WHEN $3 = 'processing' THEN now() + CASE WHEN $4 THEN interval '-1 minute'
                         ELSE interval '1 minute' END END,
                    interval '5 minutes', interval '2 hours', now() - interval '1 hour',
                    now() - interval '1 hour', now() + interval '30 minutes')",
                &[scope.into(), key.into(), status.into(), lease_ended.into()],
            )
            .unwrap_or_else(|e| panic!("seed {scope}/{key}: {e}"));
        }
    }

    /// The columns of (scope, `d`) and (scope, `s`) that differ, other than the key.
    fn differing_columns(scope: &str) -> Vec<String> {
        let mut differing = Vec::new();
        for (name, _, _) in COLUMNS {
            let name = name.to_str().unwrap_or_default();
            if name == "key" {
                continue;
            }
            let same = Spi::get_one_with_args::<bool>(
                &format!(
                    "SELECT d.{name} IS NOT DISTINCT FROM s.{name} FROM idempotency.requests d,
                     idempotency.requests s WHERE d.scope = $1 AND s.scope = $1
                     AND d.key = 'd' AND s.key = 's'"
                ),
                &[scope.into()],
            )
            .unwrap_or_else(|e| panic!("compare {name}: {e}"));
            if same != Some(true) {
                differing.push(name.to_string());
            }
        }
        differing
    }

    /// Write `transition` of (scope, key) straight through the table AM, as the direct path does.
    fn write_directly(scope: &str, key: &str, transition: &Transition, clock: Clock) {
        let mut lookup = Lookup::open()
            .unwrap()
            .expect("the direct path is open here");
        let stored = lookup
            .find(text_datum(scope.as_bytes()), text_datum(key.as_bytes()))
            .unwrap();
        let new = transition.apply(stored.as_ref(), clock).unwrap();
        let privilege = if stored.is_some() {
            pgrx::pg_sys::ACL_UPDATE
        } else {
            pgrx::pg_sys::ACL_INSERT
        };
        let mut writer = Writer::open(&lookup, privilege).expect("a direct writer");
        let values =
            crate::base::record::to_values(&new, |status| lookup.catalog.status_datum(status));
        if stored.is_some() {
            let (tid, snapshot) = lookup.found();
            assert!(writer.update(tid, snapshot, &values));
        } else {
            writer.insert(&values).unwrap();
        }
    }

    /// Write `transition` of (scope, key) with the SQL path's statements.
    fn write_through_sql(scope: &str, key: &str, transition: &Transition, clock: Clock) {
        let mut conn = LazyConn::default();
        let conn = conn.get_with(Conn::open).unwrap();
        let stored: Option<Record> =
            crate::spi::record_sql::lock_for_claim(conn, scope.as_bytes(), key.as_bytes()).unwrap();
        let new = transition.apply(stored.as_ref(), clock).unwrap();
        let written = match stored {
            Some(_) => crate::spi::record_sql::update(conn, &new),
            None => crate::spi::record_sql::insert(conn, &new),
        };
        assert!(written.unwrap());
    }

    fn claim_args<'a>(scope: &'a str, key: &'a str) -> (String, ClaimArgs<'a>) {
        let interval = |text: &str| {
            Spi::get_one::<pgrx::datum::Interval>(&format!("SELECT interval '{text}'"))
                .unwrap()
                .unwrap()
        };
        let lease = pgrx::IntoDatum::into_datum(interval("7 minutes")).unwrap();
        let retention = pgrx::IntoDatum::into_datum(interval("3 hours")).unwrap();
        (
            key.to_string(),
            ClaimArgs {
                scope: scope.as_bytes(),
                key: key.as_bytes(),
                hash: b"h",
                lease,
                retention,
                claimed_by: Some(b"w9"),
            },
        )
    }

    /// Mutations `sql-update-expiry`, `sql-update-recovery-point`, `fail-sql-retryable`: the SQL
    /// statements write every value `Transition::apply` computed, as the direct path does.
    #[pg_test]
    fn every_transition_writes_the_same_row_both_ways() {
        // A fixed clock, a little after the transaction's start (as a real call's is).
        let clock = Clock {
            txn: crate::steps::transition::now().txn,
            call: crate::steps::transition::now().txn + 1_234_567,
        };
        // SAFETY: jsonb's input function on a C string.
        let response = unsafe {
            pgrx::direct_function_call::<pgrx::pg_sys::Datum>(
                pgrx::pg_sys::jsonb_in,
                &[Some(pgrx::pg_sys::Datum::from(c"{\"ok\": true}".as_ptr()))],
            )
        };
        let code = Some(text_datum(b"E9"));
        let message = Some(text_datum(b"gone"));
        let lease = pgrx::IntoDatum::into_datum(
            Spi::get_one::<pgrx::datum::Interval>("SELECT interval '90 seconds'")
                .unwrap()
                .unwrap(),
        );
        let changes: [(&str, Transition); 5] = [
            ("complete", Transition::Complete { response }),
            (
                "fail-retryable",
                Transition::Fail {
                    status: Status::FailedRetryable,
                    code,
                    message,
                },
            ),
            (
                "fail-final",
                Transition::Fail {
                    status: Status::FailedFinal,
                    code: None,
                    message: None,
                },
            ),
            (
                "checkpoint",
                Transition::Checkpoint {
                    recovery_point: Some(text_datum(b"rp2")),
                    lease,
                },
            ),
            (
                "checkpoint-keep",
                Transition::Checkpoint {
                    recovery_point: None,
                    lease: None,
                },
            ),
        ];
        for (name, transition) in &changes {
            let scope = format!("eq-{name}");
            seed_pair(&scope, "processing", false);
            let mut conn = LazyConn::default();
            for (key, path) in [("d", Path::DirectOrSql), ("s", Path::Sql)] {
                let target = Target {
                    scope: scope.as_bytes(),
                    key: key.as_bytes(),
                    attempt: Some(2),
                };
                let changed = change_attempt_at(&mut conn, target, transition, path, clock)
                    .unwrap()
                    .unwrap_or_else(|_| panic!("{name}: nothing changed on {key}"));
                assert_eq!(changed.direct, path == Path::DirectOrSql, "{name} on {key}");
            }
            assert_eq!(differing_columns(&scope), Vec::<String>::new(), "{name}");
        }

        // The claim's transitions: a new key, a takeover, a reset.
        for (name, status, lease_ended) in [
            ("new-claim", None, false),
            ("take-over-stale", Some("processing"), true),
            ("take-over-retryable", Some("failed_retryable"), false),
            ("reset", Some("succeeded"), false),
        ] {
            let scope = format!("eq-{name}");
            if let Some(status) = status {
                seed_pair(&scope, status, lease_ended);
            }
            if name == "reset" {
                run(
                    "UPDATE idempotency.requests SET expires_at = now() - interval '1 second'
                     WHERE scope = 'eq-reset'",
                );
            }
            for key in ["d", "s"] {
                let (_, args) = claim_args(&scope, key);
                let transition = match name {
                    "new-claim" => Transition::NewClaim(args.terms()),
                    "reset" => Transition::Reset(args.terms()),
                    _ => Transition::TakeOver(args.terms()),
                };
                if key == "d" {
                    write_directly(&scope, key, &transition, clock);
                } else {
                    write_through_sql(&scope, key, &transition, clock);
                }
            }
            assert_eq!(differing_columns(&scope), Vec::<String>::new(), "{name}");
        }
        claims_answer_and_write_the_same_both_ways(clock);
    }

    /// Whole claims through the seam (`claim::claim_at`): key `d` where the direct path may
    /// act, key `s` forced through SQL. The answers and the rows are the same; only a new key
    /// is written directly (a takeover takes a row lock, which only SQL does).
    fn claims_answer_and_write_the_same_both_ways(clock: Clock) {
        for (name, status, hash, answer) in [
            ("new-claim", None, "h", Ok((Outcome::NewClaim, true))),
            (
                "take-over-stale",
                Some("processing"),
                "h",
                Ok((Outcome::ProcessingStale, false)),
            ),
            (
                "take-over-retryable",
                Some("failed_retryable"),
                "h",
                Ok((Outcome::RetryableFailure, false)),
            ),
            (
                "reset",
                Some("succeeded"),
                "h",
                Ok((Outcome::NewClaim, false)),
            ),
            (
                "replay",
                Some("succeeded"),
                "h",
                Ok((Outcome::ReplaySuccess, false)),
            ),
            (
                "live",
                Some("processing"),
                "h",
                Ok((Outcome::ProcessingActive, false)),
            ),
            (
                "final",
                Some("failed_final"),
                "h",
                Ok((Outcome::FinalFailure, false)),
            ),
            (
                "mismatch",
                Some("succeeded"),
                "other",
                Err(errors::HASH_MISMATCH),
            ),
        ] {
            let scope = format!("eq-claim-{name}");
            if let Some(status) = status {
                seed_pair(&scope, status, name == "take-over-stale");
            }
            if name == "reset" {
                run(&format!(
                    "UPDATE idempotency.requests SET expires_at = now() - interval '1 second'
                     WHERE scope = '{scope}'"
                ));
            }
            let mut answers = Vec::new();
            for (key, path) in [("d", Path::DirectOrSql), ("s", Path::Sql)] {
                let (_, mut args) = claim_args(&scope, key);
                args.hash = hash.as_bytes();
                let got = claim_at(&args, path, clock).map(|(claimed, _held)| {
                    let direct = claimed.direct;
                    let outcome = claimed.outcome.expect("an outcome");
                    let summary = (claimed.attempt, claimed.locked_until, claimed.expires_at);
                    (outcome, direct, summary)
                });
                let expected = answer.map(|(outcome, direct)| (outcome, direct && key == "d"));
                assert_eq!(
                    got.as_ref().map(|(o, d, _)| (*o, *d)).map_err(|e| e.code),
                    expected,
                    "{name} on {key}"
                );
                answers.push(got.ok().map(|(_, _, summary)| summary));
            }
            assert_eq!(answers[0], answers[1], "{name}: the answers");
            assert_eq!(differing_columns(&scope), Vec::<String>::new(), "{name}");
            if !matches!(name, "new-claim" | "reset") && !name.starts_with("take-over") {
                // Nothing was written: the seeded attempt is still there, both ways.
                let kept = one::<i64>(&format!(
                    "SELECT count(*) FROM idempotency.requests WHERE scope = '{scope}'
                     AND attempt = 2 AND updated_at = now() - interval '1 hour'"
                ));
                assert_eq!(kept, Some(2), "{name}: written");
            }
        }
    }

    #[pg_test]
    fn record_columns_match_the_catalog() {
        let status_type = one::<pgrx::pg_sys::Oid>("SELECT 'idem_status'::regtype::oid").unwrap();
        let catalog: Vec<(String, pgrx::pg_sys::Oid, bool)> = Spi::connect(|client| {
            client
                .select(
                    "SELECT attname::text, atttypid, attnotnull FROM pg_catalog.pg_attribute
                     WHERE attrelid = 'idempotency.requests'::regclass AND attnum > 0
                       AND NOT attisdropped ORDER BY attnum",
                    None,
                    &[],
                )
                .unwrap()
                .map(|row| {
                    (
                        row.get::<String>(1).unwrap().unwrap(),
                        row.get::<pgrx::pg_sys::Oid>(2).unwrap().unwrap(),
                        row.get::<bool>(3).unwrap().unwrap(),
                    )
                })
                .collect()
        });
        let described: Vec<(String, pgrx::pg_sys::Oid, bool)> = COLUMNS
            .iter()
            .map(|(name, ty, not_null)| {
                (
                    name.to_str().unwrap().to_string(),
                    ty.oid(status_type),
                    *not_null,
                )
            })
            .collect();
        assert_eq!(described, catalog);
        // The SQL path's record parameters are the same columns (the status as its label).
        for (i, (_, ty, _)) in COLUMNS.iter().enumerate() {
            assert_eq!(
                crate::spi::record_sql::RECORD_ARGS[i],
                ty.oid(pgrx::pg_sys::TEXTOID),
                "parameter {}",
                i + 1
            );
        }
        // idem_status's labels, in order.
        let labels = one::<String>(
            "SELECT string_agg(e::text, ',') FROM unnest(enum_range(NULL::idem_status)) e",
        )
        .unwrap();
        let ours: Vec<&str> = Status::ALL
            .iter()
            .map(|s| s.label().to_str().unwrap())
            .collect();
        assert_eq!(labels, ours.join(","));
    }

    #[pg_test]
    fn a_takeover_past_the_last_attempt_number_is_22003_and_writes_nothing() {
        seed_pair("eq-max", "failed_retryable", false);
        run("UPDATE idempotency.requests SET attempt = 2147483647 WHERE scope = 'eq-max'");
        assert_eq!(sqlstate("SELECT idem_claim('eq-max', 'd', 'h')"), "22003");
        let kept = one::<String>(
            "SELECT status || ' ' || attempt FROM idempotency.requests
             WHERE scope = 'eq-max' AND key = 'd'",
        );
        assert_eq!(kept.as_deref(), Some("failed_retryable 2147483647"));
    }

    /// A takeover starts the record's retention again with the new call's `retention`: the
    /// returned and the stored `expires_at` are now() + that retention, for both kinds of
    /// takeover, whether the new retention is longer or shorter than the old one.
    #[pg_test]
    fn a_takeover_expires_by_its_own_retention() {
        for (key, old, new) in [
            ("long", "1 hour", "30 days"),
            ("short", "30 days", "10 minutes"),
        ] {
            let stale = format!("stale-{key}");
            run(&format!(
                "SELECT idem_claim('tk-exp', '{stale}', 'h', retention => '{old}')"
            ));
            set_time("tk-exp", &stale, "locked_until", "-1 minute");
            let retry = format!("retry-{key}");
            run(&format!(
                "SELECT idem_claim('tk-exp', '{retry}', 'h', retention => '{old}')"
            ));
            run(&format!("SELECT idem_fail('tk-exp', '{retry}', true)"));
            for (k, outcome) in [(&stale, "processing_stale"), (&retry, "retryable_failure")] {
                let got = text(&format!(
                    "SELECT outcome || ' ' || (expires_at = now() + '{new}'::interval)
                     FROM idem_claim('tk-exp', '{k}', 'h', retention => '{new}')"
                ));
                assert_eq!(got, format!("{outcome} true"), "{k}: returned expires_at");
                let stored = text(&format!(
                    "SELECT retention::text || ' ' || (expires_at = now() + '{new}'::interval)
                     FROM idempotency.requests WHERE scope = 'tk-exp' AND key = '{k}'"
                ));
                let retention = text(&format!("SELECT '{new}'::interval::text"));
                assert_eq!(
                    stored,
                    format!("{retention} true"),
                    "{k}: stored expires_at"
                );
            }
        }
    }
}
