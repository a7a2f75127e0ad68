//! What both editions must read, cut and print alike (issue 35's outside survivors, and what
//! hunting them found): the unit of `idempotency.reclaim_grace` (milliseconds), where
//! `idem_outbox_nack` cuts an error (8,192 bytes, on a character boundary; the portable
//! edition cut at 2,048, `OPERATOR(...)` having one precedence), and an interval in a DETAIL.
//! Each case runs on the native extension and on the portable edition.

use super::generations::Edition;

use crate::common::answer;

const EDITIONS: [(Edition, &str); 2] = [
    (Edition::Native, "units_native"),
    (Edition::Portable, "units_portable"),
];

/// A lease that ended 5 s ago is reclaimed with a grace of 2000 (ms: 2 s) and kept with 10000
/// (10 s); read as seconds, 2000 would keep it. The portable edition's placeholder setting: the
/// native one is defined in milliseconds (`GucFlags::UNIT_MS`) and is reloaded, not SET.
#[test]
fn reclaim_grace_is_in_milliseconds() {
    for (edition, name) in &EDITIONS[1..] {
        let (edition, name) = (*edition, *name);
        let db = format!("{name}_grace");
        let mut c = edition.install(&db);
        let stale = "SELECT idem_claim('g', 'k', 'h'); \
                     UPDATE idempotency.requests SET locked_until = now() - interval '5 s'";
        c.batch_execute(stale).expect("a lease that ended 5 s ago");
        c.batch_execute("SET idempotency.reclaim_grace = 10000")
            .expect("10 s");
        assert_eq!(
            answer(&mut c, "SELECT idem_reclaim()::text"),
            "0",
            "{edition:?}"
        );
        c.batch_execute("SET idempotency.reclaim_grace = 2000")
            .expect("2 s");
        assert_eq!(
            answer(&mut c, "SELECT idem_reclaim()::text"),
            "1",
            "{edition:?}"
        );
    }
}

/// An error of exactly 8,192 bytes is kept whole; one byte more is cut to 8,192; a two-byte
/// character across the limit goes whole.
#[test]
fn nack_cuts_an_error_past_8192_bytes() {
    for (edition, name) in EDITIONS {
        let db = format!("{name}_nack");
        let mut c = edition.install(&db);
        for (error, kept) in [
            ("repeat('x', 8192)", "8192"),
            ("repeat('x', 8193)", "8192"),
            ("repeat('é', 4097)", "8192"),
            ("'x' || repeat('é', 4096)", "8191"),
        ] {
            let sql = format!(
                "SELECT idem_outbox_put('t', '{{}}'); \
                 SELECT idem_outbox_nack(max(id), {error}) FROM idempotency.outbox"
            );
            c.batch_execute(&sql).expect("put and nack");
            assert_eq!(
                answer(
                    &mut c,
                    "SELECT octet_length(last_error)::text FROM idempotency.outbox ORDER BY id DESC LIMIT 1"
                ),
                kept,
                "{edition:?}: {error}"
            );
        }
    }
}

/// The DETAIL naming a refused interval, the same in both editions (the portable edition
/// once summed hours and minutes in the wrong order).
#[test]
fn a_refused_interval_is_printed_alike() {
    let mut details = Vec::new();
    for (edition, name) in EDITIONS {
        let mut c = edition.install(&format!("{name}_interval"));
        let mut shown = Vec::new();
        for lease in [
            "-1 hour -1 minute",
            "-1 hour 1 minute 2.5 seconds",
            "101 years 2 months 3 days 4 hours 5 minutes",
        ] {
            let err = c
                .query_one(
                    "SELECT idem_claim('s', 'k', 'h', lease => $1::text::interval)",
                    &[&lease],
                )
                .expect_err("refused");
            shown.push(format!(
                "{lease}: {:?}",
                err.as_db_error().and_then(|d| d.detail())
            ));
        }
        details.push(shown);
    }
    assert_eq!(details[0], details[1], "native (left) and portable (right)");
}
