//! Interleavings of concurrent sessions written as permutations, the way pg_isolation_regress
//! specs read: named steps (`"s1 claim"`: session `s1`, step `claim`), then an order of steps,
//! each with the answer it must give.
//!
//! ```text
//! let spec = Spec::new(&[
//!     ("s1 begin", "BEGIN"),
//!     ("s1 claim", "SELECT outcome, attempt FROM idem_claim('s', 'k', 'h')"),
//!     ("s1 commit", "COMMIT"),
//!     ("s2 claim", "SELECT outcome, attempt FROM idem_claim('s', 'k', 'h')"),
//! ]);
//! spec.permutation(|| cluster().session(), &[
//!     ("s1 begin", ""),
//!     ("s1 claim", "new_claim 1"),
//!     ("s2 claim", "processing_active NULL"),
//!     ("s1 commit", ""),
//!     ("s2 claim", "processing_active 1"),
//! ]);
//! ```
//!
//! An answer is the rows of the step's statements as text (columns joined by a space, NULL as
//! `NULL`, rows by `; `), or `ERROR <SQLSTATE>`. Each session is a real connection on a thread
//! of its own. A step expected to answer must not wait on a lock: the step fails if its backend
//! waits (pg_locks), as isolation tests do. A step expected to wait is written `"waiting"`; the
//! permutation goes on, and a later entry naming only the session (`("s1", "...")`) waits for
//! that step's answer. New specs: docs/developing.md, "Integration tests".

use std::collections::BTreeMap;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::common::{Client, sqlstate};
use postgres::SimpleQueryMessage;

/// How long a step may take before the permutation fails (or, waiting, to be seen waiting).
const LIMIT: Duration = Duration::from_secs(60);

/// The steps of a spec: "session step" -> SQL.
pub struct Spec {
    steps: BTreeMap<String, String>,
    /// Every answered step must answer within this (e.g. "a claim never waits").
    quick: Option<Duration>,
}

struct Session {
    pid: i32,
    to: Sender<String>,
    from: Receiver<String>,
    thread: JoinHandle<()>,
    /// The step sent and not yet answered (a step seen waiting).
    pending: Option<String>,
}

impl Spec {
    pub fn new(steps: &[(&str, &str)]) -> Spec {
        let steps = steps
            .iter()
            .map(|(name, sql)| {
                assert!(name.contains(' '), "step {name:?}: \"session step\"");
                (name.to_string(), sql.to_string())
            })
            .collect();
        Spec { steps, quick: None }
    }

    /// Every step answered must answer within `limit`, waits on anything included.
    pub fn quick(mut self, limit: Duration) -> Spec {
        self.quick = Some(limit);
        self
    }

    /// Run `order` with one new session per session name (from `connect`), checking each
    /// step's answer; panics at the first difference, naming the step.
    pub fn permutation(&self, connect: impl Fn() -> Client, order: &[(&str, &str)]) {
        let mut observer = connect();
        let mut sessions: BTreeMap<&str, Session> = BTreeMap::new();
        for (step, _) in order {
            let name = step.split(' ').next().unwrap_or(step);
            if !sessions.contains_key(name) {
                sessions.insert(name, open(connect()));
            }
        }
        let mut done = Vec::new();
        for (step, expected) in order {
            let (name, sql) = match step.split_once(' ') {
                Some((name, _)) => {
                    let sql = self
                        .steps
                        .get(*step)
                        .unwrap_or_else(|| panic!("no step {step:?} in the spec"));
                    (name, Some(sql))
                }
                None => (*step, None),
            };
            let session = sessions.get_mut(name).expect("a session");
            let what = format!("{:?} (after {done:?})", step);
            let Some(sql) = sql else {
                let pending = session
                    .pending
                    .take()
                    .unwrap_or_else(|| panic!("{what}: session {name} has no waiting step"));
                let answer = session
                    .from
                    .recv_timeout(LIMIT)
                    .unwrap_or_else(|_| panic!("{what}: {pending:?} still waits"));
                assert_eq!(answer, *expected, "{what}: the answer of {pending:?}");
                done.push(step.to_string());
                continue;
            };
            assert!(
                session.pending.is_none(),
                "{what}: session {name} still waits in {:?}",
                session.pending
            );
            session.to.send(sql.clone()).expect("the session's thread");
            let started = Instant::now();
            loop {
                match session.from.recv_timeout(Duration::from_millis(10)) {
                    Ok(answer) => {
                        assert_ne!(*expected, "waiting", "{what}: answered {answer:?}");
                        assert_eq!(answer, *expected, "{what}");
                        if let Some(limit) = self.quick {
                            let took = started.elapsed();
                            assert!(took < limit, "{what}: took {took:?}");
                        }
                        break;
                    }
                    Err(RecvTimeoutError::Disconnected) => panic!("{what}: the session died"),
                    Err(RecvTimeoutError::Timeout) => {}
                }
                if waits(&mut observer, session.pid) {
                    assert_eq!(*expected, "waiting", "{what}: waits on a lock");
                    session.pending = Some(step.to_string());
                    break;
                }
                assert!(started.elapsed() < LIMIT, "{what}: no answer in {LIMIT:?}");
            }
            done.push(step.to_string());
        }
        for (name, session) in sessions {
            assert!(
                session.pending.is_none(),
                "session {name} still waits in {:?} at the end",
                session.pending
            );
            drop(session.to);
            session.thread.join().expect("the session's thread");
        }
    }
}

/// A session's thread: runs each SQL text it receives, sends back its answer.
fn open(mut client: Client) -> Session {
    let pid: i32 = client
        .query_one("SELECT pg_backend_pid()", &[])
        .expect("pid")
        .get(0);
    let (to, steps) = mpsc::channel::<String>();
    let (answers, from) = mpsc::channel();
    let thread = thread::spawn(move || {
        for sql in steps {
            if answers.send(answer(&mut client, &sql)).is_err() {
                return;
            }
        }
    });
    Session {
        pid,
        to,
        from,
        thread,
        pending: None,
    }
}

/// Whether backend `pid` waits for a lock (a heavyweight or advisory one: pg_locks).
fn waits(observer: &mut Client, pid: i32) -> bool {
    observer
        .query_one(
            "SELECT EXISTS (SELECT FROM pg_locks WHERE pid = $1 AND NOT granted)",
            &[&pid],
        )
        .expect("pg_locks")
        .get(0)
}

/// The rows of `sql` as text, or `ERROR <SQLSTATE>`.
fn answer(client: &mut Client, sql: &str) -> String {
    match client.simple_query(sql) {
        Ok(messages) => messages
            .iter()
            .filter_map(|m| match m {
                SimpleQueryMessage::Row(row) => Some(
                    (0..row.len())
                        .map(|i| row.get(i).unwrap_or("NULL"))
                        .collect::<Vec<_>>()
                        .join(" "),
                ),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("; "),
        Err(e) => format!("ERROR {}", sqlstate(&e)),
    }
}

crate::own_database!();

/// The harness itself: a step that waits on a lock where an answer is expected fails the
/// permutation (what the claim specs rely on for "a claim never waits").
#[test]
#[should_panic(expected = "\"b lock\" (after [\"a lock\"]): waits on a lock")]
fn a_step_that_waits_where_an_answer_is_expected_fails() {
    Spec::new(&[
        ("a lock", "SELECT pg_advisory_lock(740201)"),
        ("b lock", "SELECT pg_advisory_lock(740201)"),
    ])
    .permutation(|| cluster().session(), &[("a lock", ""), ("b lock", "")]);
}

/// The harness itself: a wrong answer fails, naming the step.
#[test]
#[should_panic(expected = "\"a one\" (after [])")]
fn a_wrong_answer_fails() {
    Spec::new(&[("a one", "SELECT 1")]).permutation(|| cluster().session(), &[("a one", "2")]);
}
