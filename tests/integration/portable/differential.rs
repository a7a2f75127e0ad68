//! The two engines in lockstep (issue 21): database `diff_native` has the native extension,
//! `diff_portable` the portable edition; one seeded random sequence of operations (claims with
//! random keys, hashes, leases and retentions, completes, fails and checkpoints with right and
//! wrong attempts, forgets, takeovers, expiries, upkeep, inbox, idem_advance, the outbox and
//! idem_call, and some bad arguments) runs against both, and every answer (the result, or the
//! SQLSTATE, message, DETAIL and HINT) and, every 50 operations and at the end, every row of the
//! four tables must be equal.
//!
//! One controllable clock: time "passes" by shifting every stored timestamp of both databases
//! back by the same whole number of hours. Leases, retentions and delays are whole hours too,
//! so a stored time is (the real moment it was written) + (k hours), and a test that runs for
//! less than an hour can never see a deadline fall between the two databases' calls. Rows are
//! compared with each timestamp as that k (hours from now, rounded).
//!
//! IDEM_DIFF_OPS (default 5000) and IDEM_DIFF_SEED (default 21) choose the run.

use crate::common;

use common::{Client, sqlstate};

crate::own_database!();

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

/// A timestamp column as whole hours from now.
fn hours(column: &str) -> String {
    format!("round(extract(epoch FROM {column} - now()) / 3600)::int")
}

fn snapshot_sql() -> String {
    format!(
        "SELECT concat_ws(E'\\n', \
           (SELECT string_agg(concat_ws('|', tableoid::regclass, scope, key, request_hash, status, attempt, response, recovery_point, \
              failure_code, regexp_replace(failure_message, 'ended at .*$', 'ended at T'), claimed_by, {}, {}, lease, \
              retention, {}, {}, {}), E'\\n' ORDER BY scope, key) FROM idempotency.requests), \
           (SELECT string_agg(concat_ws('|', consumer, message_id, message_hash, {}, {}), E'\\n' \
              ORDER BY consumer, message_id) FROM idempotency.inbox), \
           (SELECT string_agg(concat_ws('|', stream, entity, version, {}), E'\\n' ORDER BY stream, entity) \
              FROM idempotency.versions), \
           (SELECT string_agg(concat_ws('|', id, topic, dedupe_key, payload, headers, status, attempts, {}, {}, \
              last_error, {}, {}), E'\\n' ORDER BY id) FROM idempotency.outbox))",
        hours("claimed_at"),
        hours("locked_until"),
        hours("created_at"),
        hours("updated_at"),
        hours("expires_at"),
        hours("processed_at"),
        hours("expires_at"),
        hours("updated_at"),
        hours("available_at"),
        hours("leased_until"),
        hours("created_at"),
        hours("published_at"),
    )
}

const SHIFT: &str = "UPDATE idempotency.requests SET claimed_at = claimed_at - $1::interval, \
    locked_until = locked_until - $1::interval, created_at = created_at - $1::interval, \
    updated_at = updated_at - $1::interval, expires_at = expires_at - $1::interval; \
    UPDATE idempotency.inbox SET processed_at = processed_at - $1::interval, expires_at = expires_at - $1::interval; \
    UPDATE idempotency.versions SET updated_at = updated_at - $1::interval; \
    UPDATE idempotency.outbox SET available_at = available_at - $1::interval, \
    leased_until = leased_until - $1::interval, created_at = created_at - $1::interval, \
    published_at = published_at - $1::interval";

const CALLEES: &str = "CREATE FUNCTION public.diff_ok(r jsonb) RETURNS jsonb LANGUAGE sql AS $$ SELECT jsonb_build_object('got', r) $$; \
    CREATE FUNCTION public.diff_bad(r jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused %', r USING ERRCODE = '23514'; END $$; \
    CREATE FUNCTION public.diff_busy(r jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'later' USING ERRCODE = '40001'; END $$;";

/// One random operation: SQL whose first column (text) is the answer to compare.
fn operation(rng: &mut Rng, step: usize) -> String {
    let scope = rng.pick(&["a", "b"]);
    let key = format!("k{}", rng.below(12));
    let hash = if rng.below(10) == 0 { "h2" } else { "h1" };
    let attempt = rng.pick(&["NULL", "NULL", "1", "2", "3"]);
    let lease = rng.pick(&["1 hour", "3 hours", "10 hours"]);
    let retention = rng.pick(&["2 hours", "1 day", "3 days"]);
    match rng.below(100) {
        0..=27 => format!(
            "SELECT concat_ws('|', outcome, attempt, response, recovery_point, failure_code, \
             regexp_replace(failure_message, 'ended at .*$', 'ended at T'), {}, {}) \
             FROM idem_claim('{scope}', '{key}', '{hash}', lease => '{lease}', retention => '{retention}', claimed_by => {})",
            hours("locked_until"),
            hours("expires_at"),
            rng.pick(&["NULL", "'w1'"])
        ),
        28..=39 => format!(
            "SELECT idem_complete('{scope}', '{key}', '{}', attempt => {attempt})::text",
            rng.pick(&["{\"n\": 1}", "{\"n\": 2}", "null"])
        ),
        40..=47 => format!(
            "SELECT idem_fail('{scope}', '{key}', {}, {}, {}, attempt => {attempt})::text",
            rng.pick(&["true", "false"]),
            rng.pick(&["NULL", "'E1'"]),
            rng.pick(&["NULL", "'down'"])
        ),
        48..=53 => format!(
            "SELECT ({})::text FROM idem_checkpoint('{scope}', '{key}', {}, attempt => {attempt}, lease => {}) AS t",
            hours("t"),
            rng.pick(&["NULL", "'p1'", "'p2'"]),
            rng.pick(&["NULL", "'2 hours'"])
        ),
        54..=56 => format!("SELECT idem_forget('{scope}', '{key}')::text"),
        57..=60 => format!("SELECT 'shift {step}'"), // see run(): shifts the clock
        61..=62 => format!("SELECT idem_reclaim({})::text", 1 + rng.below(4)),
        // Purges take every eligible row: records finished in one statement (a reclaim, an ack
        // of several ids) share expires_at / published_at, and which of equal rows a LIMIT
        // takes depends on where they lie in the heap, in either edition.
        63..=64 => "SELECT idem_purge(100000)::text".into(),
        65..=71 => format!(
            "SELECT idem_inbox_accept('{}', 'm{}', '{hash}', '{}')::text",
            rng.pick(&["c1", "c2"]),
            rng.below(8),
            rng.pick(&["1 hour", "1 day"])
        ),
        72..=75 => format!(
            "SELECT idem_advance('s1', 'e{}', {})::text",
            rng.below(4),
            rng.below(8)
        ),
        76..=80 => format!(
            "SELECT idem_outbox_put('{}', '{{\"i\": {step}}}', {}, {})::text",
            rng.pick(&["t1", "t2"]),
            rng.pick(&["NULL", "NULL", "'d1'", "'d2'", "'d3'"]),
            rng.pick(&["NULL", "'{}'"])
        ),
        81..=84 => format!(
            "SELECT coalesce(string_agg(concat_ws('|', id, topic, payload, headers, attempts), ';' ORDER BY id), '-') \
             FROM idem_outbox_take({}, '{}', {})",
            1 + rng.below(3),
            rng.pick(&["1 hour", "2 hours"]),
            rng.pick(&["NULL", "'t1'"])
        ),
        85..=86 => format!(
            "SELECT idem_outbox_ack(ARRAY[{}, {}]::bigint[])::text",
            1 + rng.below(20),
            1 + rng.below(20)
        ),
        87 => format!(
            "SELECT idem_outbox_nack({}, 'err', '{}')::text",
            1 + rng.below(20),
            rng.pick(&["0 hours", "1 hour"])
        ),
        88 => "SELECT idem_inbox_purge(100000)::text || idem_outbox_purge(100000)::text".into(),
        89..=95 => format!(
            "SELECT concat_ws('|', outcome, response, failure_code, failure_message, attempt) \
             FROM idem_call('call', 'c{}', '{}', '{}', lease => '{lease}')",
            rng.below(8),
            rng.pick(&["{\"a\": 1}", "{\"a\": 1}", "{\"a\": 2}"]),
            rng.pick(&[
                "diff_ok(jsonb)",
                "diff_ok(jsonb)",
                "diff_bad(jsonb)",
                "diff_busy(jsonb)"
            ])
        ),
        _ => rng
            .pick(&[
                "SELECT idem_claim('a', ' ', 'h1')::text",
                "SELECT idem_claim('a', 'k1', 'h1', lease => '0')::text",
                "SELECT idem_claim('a', 'k1', 'h1', retention => '100 years 1 day')::text",
                "SELECT idem_outbox_take(1, '1200 months 1 second')::text",
                "SELECT idem_complete(NULL, 'k1', '{}')::text",
                "SELECT idem_fail('a', 'k1', NULL)::text",
                "SELECT idem_checkpoint('a', 'k1', repeat('r', 8193))::text",
                "SELECT idem_inbox_accept('c1', '', 'h1')::text",
                "SELECT idem_outbox_take(0)::text",
                "SELECT idem_outbox_put('t1', '{}', NULL, '[1]')::text",
                "SELECT idem_reclaim(0)::text",
                "SELECT idem_retryable('4000')::text",
            ])
            .to_string(),
    }
}

/// The answer of `sql`: its text, or the error's SQLSTATE, message, DETAIL and HINT.
/// One forced rotation step, asked again while it is `busy`: a transient answer (another
/// session, such as the background worker or autovacuum, held the layout row or a generation's
/// lock for longer than the step's 100 ms), not a difference between the editions.
fn rotate_step(db: &mut Client) -> String {
    for _ in 0..100 {
        let answer = run_one(db, "SELECT idem_rotate(force => true)");
        if answer != "busy" {
            return answer;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    "busy for 5 s".into()
}

fn run_one(db: &mut Client, sql: &str) -> String {
    match db.query_one(sql, &[]) {
        Ok(row) => row
            .get::<_, Option<String>>(0)
            .unwrap_or_else(|| "NULL".into()),
        Err(e) => match e.as_db_error() {
            Some(d) => format!(
                "ERROR {} {} | {:?} | {:?}",
                d.code().code(),
                d.message(),
                d.detail(),
                d.hint()
            ),
            None => format!("ERROR {}", sqlstate(&e)),
        },
    }
}

fn snapshot(db: &mut Client) -> String {
    run_one(db, &snapshot_sql())
}

#[test]
fn native_and_portable_agree_on_random_operations() {
    agree("diff_native", "diff_portable", None);
}

/// The same in the generations layout (sql/layout.sql), with a forced rotation every 40
/// operations: the same answers, and every record in the same generation.
#[test]
fn native_and_portable_agree_in_the_generations_layout() {
    agree("diff_native_gen", "diff_portable_gen", Some(40));
}

fn agree(native_db: &str, portable_db: &str, rotate_every: Option<usize>) {
    let ops: usize = std::env::var("IDEM_DIFF_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    let seed: u64 = std::env::var("IDEM_DIFF_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(21);
    let c = cluster();
    let mut native = c.database(native_db);
    let mut portable = c.empty_database(portable_db);
    let out =
        std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/portable.sh"))
            .output()
            .expect("scripts/portable.sh");
    assert!(out.status.success());
    portable
        .batch_execute(std::str::from_utf8(&out.stdout).expect("utf8"))
        .expect("install the portable edition");
    for db in [&mut native, &mut portable] {
        db.batch_execute(CALLEES).expect("callees");
        // Same session settings on both: messages print timestamps.
        db.batch_execute("SET TimeZone = 'UTC'").expect("timezone");
        if rotate_every.is_some() {
            let layout = common::answer(db, "SELECT idem_set_layout('generations')");
            assert_eq!(layout, "generations");
        }
    }
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let started = std::time::Instant::now();
    let mut answers = 0usize;
    for step in 0..ops {
        let sql = operation(&mut rng, step);
        if sql.starts_with("SELECT 'shift") {
            let shift = rng.pick(&["1 hour", "5 hours", "1 day", "3 days"]);
            for db in [&mut native, &mut portable] {
                db.batch_execute(&SHIFT.replace("$1::interval", &format!("'{shift}'::interval")))
                    .expect("shift the clock");
            }
            continue;
        }
        if rotate_every.is_some_and(|n| step % n == n - 1) {
            let rotate = "SELECT idem_rotate(force => true)";
            let (a, b) = (rotate_step(&mut native), rotate_step(&mut portable));
            assert_eq!(a, b, "step {step} (seed {seed}): {rotate}");
        }
        let a = run_one(&mut native, &sql);
        let b = run_one(&mut portable, &sql);
        assert_eq!(
            a, b,
            "step {step} (seed {seed}): {sql}\n native: {a}\n portable: {b}"
        );
        answers += 1;
        if step % 50 == 49 || step + 1 == ops {
            let (sa, sb) = (snapshot(&mut native), snapshot(&mut portable));
            if sa != sb {
                let diff: Vec<String> = sa
                    .lines()
                    .zip(sb.lines())
                    .filter(|(x, y)| x != y)
                    .take(5)
                    .map(|(x, y)| format!(" native:   {x}\n portable: {y}"))
                    .collect();
                panic!(
                    "rows differ after step {step} (seed {seed}):\n{}",
                    diff.join("\n")
                );
            }
        }
    }
    let rows = common::count(
        &mut native,
        "SELECT (SELECT count(*) FROM idempotency.requests) + (SELECT count(*) FROM idempotency.outbox)",
    );
    println!(
        "portable_differential ({native_db}): {ops} operations ({answers} compared answers), seed {seed}, {rows} rows at the end, {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Nothing is granted to PUBLIC (or anyone) in the portable edition that the native extension
/// does not grant: the ACLs of every function both editions have, and of schema idempotency and
/// its tables, view and sequence, are the same.
#[test]
fn the_same_privileges_as_the_native_extension() {
    let c = cluster();
    let mut native = c.database("acl_native");
    let mut portable = c.empty_database("acl_portable");
    let out =
        std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/portable.sh"))
            .output()
            .expect("scripts/portable.sh");
    portable
        .batch_execute(std::str::from_utf8(&out.stdout).expect("utf8"))
        .expect("install the portable edition");
    let functions = "SELECT string_agg(p.oid::regprocedure::text || ' ' || coalesce(p.proacl::text, 'default') \
         || ' ' || p.prosecdef::text, E'\\n' ORDER BY p.oid::regprocedure::text) FROM pg_proc p \
         WHERE p.pronamespace = 'public'::regnamespace AND p.proname LIKE 'idem%' \
           AND p.oid::regprocedure::text IN (SELECT oid::regprocedure::text FROM pg_proc WHERE proname LIKE 'idem%')";
    let native_functions = run_one(&mut native, functions);
    let portable_functions = run_one(&mut portable, functions);
    let relations = "SELECT string_agg(c.relname || ' ' || c.relkind || ' ' || coalesce(c.relacl::text, 'default'), E'\\n' ORDER BY c.relname) \
         FROM pg_class c WHERE c.relnamespace = 'idempotency'::regnamespace AND c.relkind IN ('r', 'v', 'S')";
    let schema = "SELECT nspacl::text FROM pg_namespace WHERE nspname = 'idempotency'";
    assert_eq!(
        run_one(&mut native, relations),
        run_one(&mut portable, relations)
    );
    assert_eq!(run_one(&mut native, schema), run_one(&mut portable, schema));
    // Every native function exists in the portable edition with the same ACL.
    let portable_lines: std::collections::BTreeSet<&str> = portable_functions.lines().collect();
    let missing: Vec<&str> = native_functions
        .lines()
        .filter(|line| !portable_lines.contains(line))
        .collect();
    assert!(
        missing.is_empty(),
        "native functions missing or with other privileges in the portable edition:\n{}",
        missing.join("\n")
    );
    // A role with no grant at all gets the same answers from both: the pure functions work
    // (no USAGE on schema idempotency needed), the rest is 42501.
    c.connect("postgres")
        .batch_execute("DROP ROLE IF EXISTS acl_nobody; CREATE ROLE acl_nobody LOGIN")
        .expect("role");
    let calls = [
        "SELECT idem_hash('{\"a\": [1, 2.5]}'::jsonb)",
        "SELECT idem_canonical('{\"b\": 1, \"a\": \"x\"}'::jsonb)",
        "SELECT idem_lock_key('a', 'b')::text",
        "SELECT idem_retryable('40001')::text",
        "SELECT idem_retryable('4000')::text",
        "SELECT idem_http_response(201)::text",
        "SELECT outcome::text FROM idem_claim('a', 'b', 'c')",
        "SELECT idem_inbox_accept('a', 'b', 'c')::text",
        "SELECT count(*)::text FROM idem_metrics()",
    ];
    let answers = |db: &str| -> Vec<String> {
        let mut nobody = c.connect_as(db, "acl_nobody");
        calls
            .iter()
            .map(|sql| {
                let got = run_one(&mut nobody, sql);
                // The SQLSTATE only: messages name the objects that refused.
                if got.starts_with("ERROR") {
                    got[..11].to_string()
                } else {
                    got
                }
            })
            .collect()
    };
    let (a, b) = (answers("acl_native"), answers("acl_portable"));
    assert_eq!(a, b);
    assert_eq!(a[0].len(), 64, "{}", a[0]);
    assert_eq!(a[6], "ERROR 42501");
}
