//! The three workflows a client runs for one attempt at a request, and what it does with an
//! error: each answers a `Step`.

use super::*;

pub(super) enum Step {
    Done(Answer),
    Busy,
    Abandoned,
}

fn claim_row(
    client: &mut impl postgres::GenericClient,
    key: &str,
    lease: &str,
) -> Result<(String, i32, Option<Answer>), postgres::Error> {
    let row = client.query_one(
        "SELECT outcome::text, attempt, (response->>'attempt')::int, (response->>'effect')::bigint \
         FROM idem_claim($1, $2, idem_hash($3::text::jsonb), lease => $4::text::interval)",
        &[&SCOPE, &key, &request_of(key), &lease],
    )?;
    let answer = match (row.get::<_, Option<i32>>(2), row.get::<_, Option<i64>>(3)) {
        (Some(attempt), Some(effect)) => Some(Answer { attempt, effect }),
        _ => None,
    };
    Ok((
        row.get(0),
        row.get::<_, Option<i32>>(1).unwrap_or(0),
        answer,
    ))
}

pub(super) fn one_tx(
    client: &mut Client,
    stats: &Stats,
    key: &str,
) -> Result<Step, postgres::Error> {
    let mut tx = client.transaction()?;
    let (outcome, attempt, answer) = claim_row(&mut tx, key, LEASE)?;
    if let Some(step) = stats.finished(&outcome, answer, key) {
        return Ok(step);
    }
    let Some(n) = stats.owned(&outcome, attempt) else {
        stats.unexpected(format!("{key}: outcome {outcome}"));
        return Ok(Step::Busy);
    };
    let effect: i64 = tx
        .query_one(
            "INSERT INTO effects (key, attempt, workflow) VALUES ($1, $2, 'a') RETURNING id",
            &[&key, &n],
        )?
        .get(0);
    tx.execute(
        "SELECT idem_complete($1, $2, jsonb_build_object('attempt', $3::int, 'effect', $4::bigint, \
         'workflow', 'a'), attempt => $3)",
        &[&SCOPE, &key, &n, &effect],
    )?;
    tx.commit()?;
    Ok(Step::Done(Answer { attempt: n, effect }))
}

pub(super) fn two_tx(
    client: &mut Client,
    stats: &Stats,
    key: &str,
    rng: &mut Rng,
    stop: &AtomicBool,
) -> Result<Step, postgres::Error> {
    let lease = format!("{} milliseconds", SHORT_LEASE.as_millis());
    let (outcome, attempt, answer) = claim_row(client, key, &lease)?;
    if let Some(step) = stats.finished(&outcome, answer, key) {
        return Ok(step);
    }
    let Some(n) = stats.owned(&outcome, attempt) else {
        stats.unexpected(format!("{key}: outcome {outcome}"));
        return Ok(Step::Busy);
    };
    // The claim is committed. Some sessions now outlive their lease on purpose.
    if rng.chance(20) {
        add(&stats.late_sessions, 1);
        std::thread::sleep(SHORT_LEASE + rng.millis(100, 900));
    } else {
        std::thread::sleep(rng.millis(0, 30));
    }
    if stop.load(Relaxed) {
        // The load is over: this client goes away, leaving its claim to the worker.
        return Ok(Step::Abandoned);
    }
    let mut tx = client.transaction()?;
    let effect: i64 = tx
        .query_one(
            "INSERT INTO effects (key, attempt, workflow) VALUES ($1, $2, 'b') RETURNING id",
            &[&key, &n],
        )?
        .get(0);
    // Half the attempts complete without a checkpoint first, whose own fence would otherwise
    // stop every late session before idem_complete's is tested.
    if rng.chance(50) {
        tx.execute(
            "SELECT idem_checkpoint($1, $2, 'effect written', attempt => $3)",
            &[&SCOPE, &key, &n],
        )?;
    }
    tx.execute(
        "SELECT idem_complete($1, $2, jsonb_build_object('attempt', $3::int, 'effect', $4::bigint, \
         'workflow', 'b'), attempt => $3)",
        &[&SCOPE, &key, &n, &effect],
    )?;
    tx.commit()?;
    Ok(Step::Done(Answer { attempt: n, effect }))
}

pub(super) fn call(client: &mut Client, stats: &Stats, key: &str) -> Result<Step, postgres::Error> {
    let row = client.query_one(
        "SELECT outcome::text, attempt, (response->>'attempt')::int, (response->>'effect')::bigint \
         FROM idem_call($1, $2, $3::text::jsonb, 'chaos_effect(jsonb)'::regprocedure, \
         lease => $4::text::interval)",
        &[&SCOPE, &key, &request_of(key), &LEASE],
    )?;
    let outcome: String = row.get(0);
    let answer = match (row.get::<_, Option<i32>>(2), row.get::<_, Option<i64>>(3)) {
        (Some(attempt), Some(effect)) => Some(Answer { attempt, effect }),
        _ => None,
    };
    if let Some(step) = stats.finished(&outcome, answer, key) {
        return Ok(step);
    }
    if stats
        .owned(&outcome, row.get::<_, Option<i32>>(1).unwrap_or(0))
        .is_none()
    {
        stats.unexpected(format!("{key}: idem_call outcome {outcome}"));
        return Ok(Step::Busy);
    }
    match answer {
        Some(a) => Ok(Step::Done(a)),
        None => {
            stats.unexpected(format!("{key}: idem_call response without attempt/effect"));
            Ok(Step::Busy)
        }
    }
}

/// Classifies a failed step: connection lost, fenced off, busy, or unexpected.
pub(super) fn on_error(conn: &mut Conn, stats: &Stats, key: &str, err: &postgres::Error) {
    let code = err.code().map(|c| c.code().to_string());
    match code.as_deref() {
        None => {
            add(&stats.connection_errors, 1);
            conn.drop_session();
        }
        // admin_shutdown (terminated), crash_shutdown, cannot_connect_now, read-only standby
        Some(c) if c.starts_with("57P") || c.starts_with("08") || c == "25006" => {
            add(&stats.connection_errors, 1);
            conn.drop_session();
        }
        Some("P4012") => add(&stats.fenced, 1),
        // The worker reclaimed the record before the late session completed it.
        Some("P4010") | Some("P4013") => add(&stats.lease_lost, 1),
        Some("P4029") => add(&stats.busy, 1),
        Some(c) if c == "40001" || c == "40P01" => add(&stats.busy, 1),
        Some(c) => {
            let message = err.as_db_error().map(|e| e.message()).unwrap_or_default();
            stats.unexpected(format!("{key}: {c} {message}"));
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
