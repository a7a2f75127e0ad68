//! The SQL-level fuzzer (issue #16): every function of the extension, found in the catalog (and
//! of the portable edition, in databases of its own),
//! called with random and hostile arguments: NULL in each position, empty and blank texts,
//! texts at and past every length limit up to 1 MB (and 100 MB in the long form), invalid
//! encodings (in a SQL_ASCII database), extreme intervals and timestamps, negative and huge
//! numbers, JSON nested at and past Postgres' own limits, huge numbers, every escape.
//!
//! Each call must either succeed or raise a documented SQLSTATE (the table of
//! docs/reference.md, or Postgres' own input errors listed in docs/errors.md); never `XX000`,
//! never a crash. A call
//! that fails must write nothing: the extension's tables, the effects table of `idem_call`'s
//! targets and the session's advisory locks are fingerprinted after every call.
//!
//! IDEM_SQL_FUZZ_CALLS (default 6,000, the short form CI runs), IDEM_SQL_FUZZ_SEED (random
//! unless given; printed), IDEM_SQL_FUZZ_THREADS (default 2, one database each, alternately
//! UTF8 and SQL_ASCII), IDEM_SQL_FUZZ_HUGE=1 (also 100 MB texts). docs/fuzzing.md has the long
//! form's command and figures.

use crate::common;

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Instant;

use common::Client;

crate::own_database!();
use postgres::types::Type;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

mod tally;
mod values;
use tally::{Tally, untouched};
use values::{Arg, Gen};

/// A code in backticks at the start of each row of a markdown table in `text`.
fn table_codes(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect()
}

/// The SQLSTATEs of docs/reference.md's table, but for the ones that mean a bug, and the
/// errors Postgres raises while reading an argument (docs/errors.md, "Before the call").
fn documented() -> BTreeSet<String> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/reference.md"))
        .expect("docs/reference.md");
    let table = text.split("## SQLSTATEs").nth(1).expect("## SQLSTATEs");
    let mut codes = table_codes(table.split("\n## ").next().unwrap_or(table));
    assert!(codes.contains("P4000"), "the SQLSTATE table was not found");
    codes.remove("XX000");
    codes.remove("XX001");
    let errors = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/errors.md"))
        .expect("docs/errors.md");
    let before = errors
        .split("\n## Before the call\n")
        .nth(1)
        .expect("## Before the call");
    let before = table_codes(before.split("\n## ").next().unwrap_or(before));
    assert!(
        before.contains("22P02"),
        "docs/errors.md's Before the call table was not found"
    );
    codes.extend(before);
    codes
}

struct Function {
    /// `idempotency.name(type, ...)`, for messages.
    signature: String,
    /// `schema.name`, quoted.
    name: String,
    args: Vec<(String, String)>, // (name, type)
}

/// The edition a fuzz database holds: the extension, or the portable edition's plain script
/// (scripts/portable.sh) in a database of the same cluster. One suite, both editions.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Edition {
    Native,
    Portable,
}

/// The edition's functions a statement can call (a trigger function cannot be): the
/// extension's members, or the portable edition's functions in its two schemas.
fn functions(db: &mut Client, edition: Edition) -> Vec<Function> {
    let members = match edition {
        Edition::Native => {
            "EXISTS (SELECT FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid \
             WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid \
               AND e.extname = 'idempotency' AND d.deptype = 'e')"
        }
        // Its own helpers (`portable_*`, which the API functions call with checked
        // arguments) are not API; the helpers both editions share are fuzzed in both.
        Edition::Portable => {
            "p.pronamespace::regnamespace::text IN ('public', 'idempotency') \
             AND p.proname NOT LIKE 'portable\\_%'"
        }
    };
    db.query(
        &format!(
            "SELECT p.oid::regprocedure::text, \
                quote_ident(p.pronamespace::regnamespace::text) || '.' || quote_ident(p.proname), \
                ARRAY(SELECT pg_catalog.format_type(t, NULL) \
                      FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY u(t, i) ORDER BY i), \
                ARRAY(SELECT coalesce(p.proargnames[i], '') \
                      FROM generate_series(1, p.pronargs) i) \
         FROM pg_proc p WHERE {members} \
           AND p.pronamespace::regnamespace::text <> 'tests' \
           AND p.prorettype <> 'trigger'::regtype ORDER BY 1"
        ),
        &[],
    )
    .expect("the extension's functions")
    .into_iter()
    .map(|row| {
        let types: Vec<String> = row.get(2);
        let names: Vec<String> = row.get(3);
        Function {
            signature: row.get(0),
            name: row.get(1),
            args: names.into_iter().zip(types).collect(),
        }
    })
    .collect()
}

/// A database of its own for one thread: the targets `idem_call` may be given, two roles.
fn prepare(admin: &mut Client, db: &str, ascii: bool, edition: Edition) {
    let encoding = if ascii { "SQL_ASCII" } else { "UTF8" };
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {db}"))
        .expect("drop");
    admin
        .batch_execute(&format!(
            "CREATE DATABASE {db} TEMPLATE template0 ENCODING '{encoding}' LC_COLLATE 'C' LC_CTYPE 'C'"
        ))
        .expect("create database");
    let mut c = cluster().connect(db);
    match edition {
        Edition::Native => c.batch_execute("CREATE EXTENSION idempotency"),
        Edition::Portable => c.batch_execute(&common::portable_script(&[])),
    }
    .expect("the edition");
    c.batch_execute(
        "CREATE SCHEMA fuzz;
         CREATE TABLE fuzz.effects (request jsonb);
         CREATE FUNCTION fuzz.effect(r jsonb) RETURNS jsonb LANGUAGE sql
           AS $$ INSERT INTO fuzz.effects VALUES (r) RETURNING jsonb_build_object('ok', true) $$;
         CREATE FUNCTION fuzz.fails(r jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
           BEGIN INSERT INTO fuzz.effects VALUES (r); RAISE EXCEPTION 'final' USING ERRCODE = 'P0001'; END $$;
         CREATE FUNCTION fuzz.retryable(r jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
           BEGIN INSERT INTO fuzz.effects VALUES (r); RAISE EXCEPTION 'again' USING ERRCODE = '40001'; END $$;
         CREATE FUNCTION fuzz.returns_null(r jsonb) RETURNS jsonb LANGUAGE sql AS $$ SELECT NULL::jsonb $$;
         CREATE FUNCTION fuzz.wrong(i integer) RETURNS jsonb LANGUAGE sql AS $$ SELECT '1'::jsonb $$;
         CREATE FUNCTION fuzz.setof(r jsonb) RETURNS SETOF jsonb LANGUAGE sql AS $$ SELECT r $$;
         CREATE FUNCTION fuzz.definer(r jsonb) RETURNS jsonb LANGUAGE sql SECURITY DEFINER
           AS $$ INSERT INTO fuzz.effects VALUES (r) RETURNING r $$;
         SELECT idem_grant('fuzz_app', 'app');
         GRANT USAGE ON SCHEMA fuzz TO fuzz_app;
         GRANT INSERT ON fuzz.effects TO fuzz_app;
         GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA fuzz TO fuzz_app;",
    )
    .expect("prepare the fuzz database");
}

/// Everything a call could have written, as one text.
const FINGERPRINT: &str = "SELECT concat_ws('|', \
    (SELECT count(*) || ':' || coalesce(sum(hashtext(r::text)::int8), 0) FROM idempotency.requests r), \
    (SELECT count(*) || ':' || coalesce(sum(hashtext(r::text)::int8), 0) FROM idempotency.inbox r), \
    (SELECT count(*) || ':' || coalesce(sum(hashtext(r::text)::int8), 0) FROM idempotency.versions r), \
    (SELECT count(*) || ':' || coalesce(sum(hashtext(r::text)::int8), 0) FROM idempotency.outbox r), \
    (SELECT count(*) || ':' || coalesce(sum(hashtext(r::text)::int8), 0) FROM fuzz.effects r), \
    (SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database \
     WHERE l.locktype = 'advisory' AND d.datname = current_database()))";

/// The statement calling `f` with `args`: each argument a text parameter cast to its type.
fn statement(f: &Function, args: &[Arg], in_from: bool) -> (String, Vec<Type>) {
    let mut types = Vec::new();
    let exprs: Vec<String> = args
        .iter()
        .zip(&f.args)
        .map(|(arg, (_, ty))| match arg {
            Arg::Null => format!("NULL::{ty}"),
            Arg::Text(_) => {
                types.push(Type::TEXT);
                format!("(${}::text)::{ty}", types.len())
            }
            Arg::Bytes(_) => {
                types.push(Type::BYTEA);
                format!("convert_from(${}::bytea, 'SQL_ASCII')::{ty}", types.len())
            }
        })
        .collect();
    let call = format!("{}({})", f.name, exprs.join(", "));
    let sql = if in_from {
        format!("SELECT count(*) FROM {call} AS r")
    } else {
        format!("SELECT ({call}) IS NULL")
    };
    (sql, types)
}

fn run_thread(
    edition: Edition,
    index: usize,
    calls: u64,
    seed: u64,
    huge: bool,
    allowed: &BTreeSet<String>,
    focus: &[String],
) -> Tally {
    let ascii = index % 2 == 1;
    let db = match edition {
        Edition::Native => format!("fuzz_{index}"),
        Edition::Portable => format!("fuzz_portable_{index}"),
    };
    prepare(&mut cluster().connect("postgres"), &db, ascii, edition);
    let mut admin = cluster().connect(&db);
    let mut app = cluster().connect_as(&db, "fuzz_app");
    for c in [&mut admin, &mut app] {
        c.batch_execute("SET statement_timeout = '10s'; SET lock_timeout = '5s'")
            .expect("timeouts");
    }
    let list = functions(&mut admin, edition);
    assert!(list.len() >= 20, "only {} functions found", list.len());
    let mut g = Gen {
        rng: StdRng::seed_from_u64(seed ^ (index as u64).wrapping_mul(0x9e37_79b9)),
        ascii_db: ascii,
        huge,
        last: None,
        finish_last: false,
    };
    let mut tally = Tally::default();
    let mut before: String = admin
        .query_one(FINGERPRINT, &[])
        .expect("fingerprint")
        .get(0);
    for n in 0..calls {
        if n > 0 && n % 50_000 == 0 {
            eprintln!("sql fuzz: thread {index}: {n} of {calls} calls");
        }
        if n % 400 == 399 {
            admin
                .batch_execute(
                    "TRUNCATE idempotency.requests, idempotency.inbox, idempotency.versions, \
                     idempotency.outbox, fuzz.effects",
                )
                .expect("truncate");
            before = admin
                .query_one(FINGERPRINT, &[])
                .expect("fingerprint")
                .get(0);
        }
        // A top-up pass calls the functions no call of the first got through half the time.
        let focused: Vec<&Function> = list.iter().filter(|f| focus.contains(&f.name)).collect();
        let f = match focused.len() {
            n if n > 0 && g.rng.random_bool(0.5) => focused[g.rng.random_range(0..n)],
            _ => &list[g.rng.random_range(0..list.len())],
        };
        let finisher = [
            "idem_complete",
            "idem_fail",
            "idem_checkpoint",
            "idem_http_fail",
        ]
        .iter()
        .any(|n| f.name.ends_with(&format!(".{n}")));
        g.finish_last = finisher && g.rng.random_bool(0.7);
        let args = g.args(f);
        let in_from = g.rng.random_bool(0.5);
        let (sql, types) = statement(f, &args, in_from);
        let as_app = g.rng.random_bool(0.3);
        let client = if as_app { &mut app } else { &mut admin };
        let shown = || {
            format!(
                "{} as {} with ({}) [seed {seed:#x}, thread {index}, call {n}]",
                f.signature,
                if as_app { "fuzz_app" } else { "postgres" },
                args.iter().map(Arg::show).collect::<Vec<_>>().join(", ")
            )
        };
        let params: Vec<Box<dyn postgres::types::ToSql + Sync>> = args
            .iter()
            .filter_map(|a| match a {
                Arg::Null => None,
                Arg::Text(t) => Some(Box::new(t.clone()) as Box<dyn postgres::types::ToSql + Sync>),
                Arg::Bytes(b) => {
                    Some(Box::new(b.clone()) as Box<dyn postgres::types::ToSql + Sync>)
                }
            })
            .collect();
        let refs: Vec<&(dyn postgres::types::ToSql + Sync)> =
            params.iter().map(|b| b.as_ref()).collect();
        let result = client
            .prepare_typed(&sql, &types)
            .and_then(|stmt| client.query(&stmt, &refs));
        assert!(!client.is_closed(), "the session closed after {}", shown());
        // Postgres sends an error before it releases the failed transaction's locks: one more
        // round trip on the same session makes sure the abort is over before the fingerprint.
        if let Err(e) = client.batch_execute("") {
            panic!("the session is unusable after {}: {e:?}", shown());
        }
        tally.calls += 1;
        let entry = tally.per_function.entry(f.name.clone()).or_default();
        let after: String = match admin.query_one(FINGERPRINT, &[]) {
            Ok(row) => row.get(0),
            Err(e) => panic!("the fingerprint failed after {}: {e:?}", shown()),
        };
        match result {
            Ok(_) => {
                tally.ok += 1;
                entry.0 += 1;
                if f.name.ends_with(".idem_claim")
                    && let (Arg::Text(scope), Arg::Text(key)) = (&args[0], &args[1])
                {
                    g.last = Some((scope.clone(), key.clone()));
                }
            }
            Err(e) => {
                entry.1 += 1;
                let Some(code) = e.code().map(|c| c.code().to_string()) else {
                    panic!("no SQLSTATE (connection lost?) from {}: {e}", shown());
                };
                // idem_call re-raises its target's transient errors unchanged (documented).
                let transient = f.name.ends_with(".idem_call")
                    && admin
                        .query_one("SELECT idem_retryable($1)", &[&code])
                        .map(|r| r.get::<_, bool>(0))
                        .unwrap_or(false);
                assert!(
                    allowed.contains(&code) || transient,
                    "{} raised {code}, which is not documented: {e:?}",
                    shown()
                );
                assert_eq!(before, after, "{} failed with {code} but wrote", shown());
                *tally.errors.entry(code).or_default() += 1;
            }
        }
        before = after;
    }
    tally
}

#[test]
fn every_function_survives_hostile_arguments() {
    fuzz(Edition::Native, env("IDEM_SQL_FUZZ_CALLS", 6_000));
}

/// The same on the portable edition: every function of its two schemas, its helpers too.
#[test]
fn every_function_of_the_portable_edition_survives_hostile_arguments() {
    fuzz(
        Edition::Portable,
        env("IDEM_SQL_FUZZ_PORTABLE_CALLS", 4_000),
    );
}

fn fuzz(edition: Edition, calls: u64) {
    let threads: usize = env("IDEM_SQL_FUZZ_THREADS", 2) as usize;
    let seed = std::env::var("IDEM_SQL_FUZZ_SEED")
        .ok()
        .and_then(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok())
        .unwrap_or_else(rand::random);
    let huge = std::env::var("IDEM_SQL_FUZZ_HUGE").is_ok_and(|v| v == "1");
    eprintln!(
        "sql fuzz ({edition:?}): {calls} calls, {threads} threads, IDEM_SQL_FUZZ_SEED={seed:#x}"
    );
    let allowed = documented();
    // Both editions' tests share the roles: whichever comes first makes them.
    cluster()
        .connect("postgres")
        .batch_execute(
            "DO $$ BEGIN CREATE ROLE fuzz_app LOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;
             DO $$ BEGIN CREATE ROLE fuzz_other; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$;",
        )
        .expect("roles");
    let started = Instant::now();
    let pass = |calls: u64, seed: u64, focus: &[String]| {
        let total = Mutex::new(Tally::default());
        std::thread::scope(|s| {
            for index in 0..threads {
                let (allowed, total) = (&allowed, &total);
                let share =
                    calls / threads as u64 + u64::from((index as u64) < calls % threads as u64);
                s.spawn(move || {
                    let t = run_thread(edition, index, share, seed, huge, allowed, focus);
                    total.lock().expect("tally").add(t);
                });
            }
        });
        total.into_inner().expect("tally")
    };
    let mut total = pass(calls, seed, &[]);
    // A function whose calls rarely get through every input rule (a finish of the last claim
    // with an HTTP response, the owner's layout switch) may draw none in the first pass: up to
    // two more passes of a quarter of the calls each give it half their calls.
    let mut expected = calls;
    for round in 1..=2u64 {
        let focus: Vec<String> = untouched(&total, edition).into_iter().cloned().collect();
        if calls < 3000 || focus.is_empty() {
            break;
        }
        eprintln!("sql fuzz: top-up pass {round} for {focus:?}");
        total.add(pass(
            calls / 4,
            seed ^ round.wrapping_mul(0x5851_f42d),
            &focus,
        ));
        expected += calls / 4;
    }
    let log = cluster().log();
    for bad in ["terminated by signal", "PANIC", "was terminated", "TRAP:"] {
        assert!(!log.contains(bad), "the server log has {bad:?}:\n{log}");
    }
    eprintln!(
        "sql fuzz: {} calls in {:.0?}: {} succeeded; errors by SQLSTATE: {:?}",
        total.calls,
        started.elapsed(),
        total.ok,
        total.errors
    );
    for (f, (ok, err)) in &total.per_function {
        eprintln!("  {f:<28} {ok:>8} ok {err:>8} errors");
    }
    assert_eq!(total.calls, expected);
    // A fuzzer that never gets past the input rules tests nothing.
    let untouched = untouched(&total, edition);
    assert!(
        calls < 3000 || untouched.is_empty(),
        "no call of {untouched:?} succeeded"
    );
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
