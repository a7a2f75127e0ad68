//! The audit: every key driven to completion, then counted from the effects table, not from
//! what the clients were told.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use postgres::Client;

use super::workload::{Answer, Conn, Rng, SCOPE, Stats, Workflow, request};

#[derive(Debug, Default)]
pub struct Audit {
    pub keys: usize,
    pub succeeded: usize,
    pub effects: usize,
    /// effects beyond the first of a key
    pub duplicates: usize,
    /// succeeded keys without an effect, and acknowledged answers the records do not hold
    pub lost: usize,
    /// effects of keys that are not `succeeded`
    pub orphans: usize,
    /// a stored response that does not name its effect's attempt and id
    pub mismatched: usize,
    /// keys not `succeeded` after the drive
    pub unfinished: usize,
    pub problems: Vec<String>,
}

impl Audit {
    pub fn clean(&self) -> bool {
        self.duplicates == 0
            && self.lost == 0
            && self.orphans == 0
            && self.mismatched == 0
            && self.unfinished == 0
    }
}

/// Requests every key once more with the one-transaction workflow, as `user`, until each has
/// its outcome.
pub fn drive_to_completion(ports: &[u16], user: &str, stats: &Arc<Stats>, keys: &[String]) {
    let mut conn = Conn::as_user(ports, user, stats.clone());
    let mut rng = Rng::new(1);
    for key in keys {
        let give_up = Instant::now() + Duration::from_secs(60);
        request(
            &mut conn,
            stats,
            key,
            Workflow::OneTx,
            &mut rng,
            give_up,
            &AtomicBool::new(false),
        );
    }
}

/// The records and effects of `keys`; `acked` is what clients were told.
pub fn audit(db: &mut Client, keys: &[String], acked: &HashMap<String, Answer>) -> Audit {
    let mut a = Audit {
        keys: keys.len(),
        ..Audit::default()
    };
    let mut records: HashMap<String, (String, i32, Option<Answer>)> = HashMap::new();
    for row in db
        .query(
            "SELECT key, status::text, attempt, (response->>'attempt')::int, \
             (response->>'effect')::bigint FROM idempotency.requests WHERE scope = $1",
            &[&SCOPE],
        )
        .expect("read the records")
    {
        let answer = match (row.get::<_, Option<i32>>(3), row.get::<_, Option<i64>>(4)) {
            (Some(attempt), Some(effect)) => Some(Answer { attempt, effect }),
            _ => None,
        };
        records.insert(row.get(0), (row.get(1), row.get(2), answer));
    }
    let mut effects: HashMap<String, Vec<Answer>> = HashMap::new();
    for row in db
        .query("SELECT key, attempt, id FROM effects ORDER BY id", &[])
        .expect("read the effects")
    {
        a.effects += 1;
        effects.entry(row.get(0)).or_default().push(Answer {
            attempt: row.get(1),
            effect: row.get(2),
        });
    }
    for (key, list) in &effects {
        let status = records.get(key).map(|r| r.0.as_str());
        if status != Some("succeeded") {
            a.orphans += list.len();
            a.problems.push(format!(
                "{key}: {} effect(s), record {status:?}",
                list.len()
            ));
        } else if list.len() > 1 {
            a.duplicates += list.len() - 1;
            a.problems
                .push(format!("{key}: {} effects {list:?}", list.len()));
        }
    }
    for key in keys {
        let Some((status, attempt, stored)) = records.get(key) else {
            a.unfinished += 1;
            a.problems.push(format!("{key}: no record"));
            continue;
        };
        if status != "succeeded" {
            a.unfinished += 1;
            a.problems.push(format!("{key}: left {status}"));
            continue;
        }
        a.succeeded += 1;
        let list = effects.get(key).map(Vec::as_slice).unwrap_or(&[]);
        let Some(first) = list.first() else {
            a.lost += 1;
            a.problems
                .push(format!("{key}: succeeded without an effect"));
            continue;
        };
        if *stored != Some(*first) || *attempt != first.attempt {
            a.mismatched += 1;
            a.problems.push(format!(
                "{key}: record attempt {attempt}, response {stored:?}, effect {first:?}"
            ));
        }
        if let Some(told) = acked.get(key)
            && Some(*told) != *stored
        {
            a.lost += 1;
            a.problems.push(format!(
                "{key}: client was told {told:?}, record has {stored:?}"
            ));
        }
    }
    a
}

/// Lines of a server log that report a crashed process, except those of `killed` pids.
pub fn crashes(log: &str, killed: &[u32]) -> Vec<String> {
    log.lines()
        .filter(|line| line.contains("terminated by signal") || line.contains("PANIC"))
        .filter(|line| {
            !killed
                .iter()
                .any(|pid| line.contains(&format!("(PID {pid}) was terminated by signal 9")))
        })
        .map(str::to_string)
        .collect()
}

/// Waits until no record is `processing` (the maintenance worker reclaims stale leases);
/// the number still processing at `deadline`.
pub fn wait_no_processing(db: &mut Client, deadline: Instant) -> i64 {
    loop {
        let left: i64 = db
            .query_one(
                "SELECT count(*) FROM idempotency.requests WHERE status = 'processing'",
                &[],
            )
            .expect("count processing")
            .get(0);
        if left == 0 || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
