//! The client side of the fault tests: three workflows over a shared key set, each request
//! retried with the same key and payload until its outcome is known, as a real client does.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use postgres::config::TargetSessionAttrs;
use postgres::{Client, Config, NoTls};

mod flows;
use flows::{Step, call, on_error, one_tx, two_tx};

pub const SCOPE: &str = "chaos";
/// The role the clients of the native tests connect as.
pub const SUPERUSER: &str = "postgres";
/// Lease of the two-transaction workflow: short, so that late sessions are taken over.
pub const SHORT_LEASE: Duration = Duration::from_millis(1000);
/// Lease of the one-transaction workflows (only a committed claim holds one).
pub const LEASE: &str = "5 seconds";

/// The effects table and the function that `idem_call` runs. An effect names the attempt that
/// made it, read from the claim's own (uncommitted) record; the response carries both.
macro_rules! effects {
    () => {
        "
CREATE TABLE effects (
    id bigserial PRIMARY KEY,
    key text NOT NULL,
    attempt int NOT NULL,
    workflow text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE FUNCTION chaos_effect(request jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    n int;
    e bigint;
BEGIN
    SELECT r.attempt INTO STRICT n FROM idempotency.requests r
     WHERE r.scope = request->>'scope' AND r.key = request->>'key' AND r.status = 'processing';
    INSERT INTO effects (key, attempt, workflow) VALUES (request->>'key', n, 'c') RETURNING id INTO e;
    RETURN jsonb_build_object('attempt', n, 'effect', e, 'workflow', 'c');
END $$;
"
    };
}
/// The workload's tables and function, for an edition installed already.
pub const EFFECTS: &str = effects!();
/// The native extension and [`EFFECTS`].
pub const SCHEMA: &str = concat!("CREATE EXTENSION idempotency;", effects!());

/// A response as the client received it: the attempt and the effect it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answer {
    pub attempt: i32,
    pub effect: i64,
}

#[derive(Default)]
pub struct Stats {
    pub requests: AtomicU64,
    pub claims: AtomicU64,
    pub replays: AtomicU64,
    pub takeovers: AtomicU64,
    pub fenced: AtomicU64,
    pub lease_lost: AtomicU64,
    pub busy: AtomicU64,
    pub reconnects: AtomicU64,
    pub connection_errors: AtomicU64,
    pub late_sessions: AtomicU64,
    pub unfinished: AtomicU64,
    /// requests whose client went away when the load ended (the drive completes them)
    pub abandoned: AtomicU64,
    /// Errors a client should never see (e.g. 23505, XX000), with their SQLSTATE.
    pub unexpected: Mutex<Vec<String>>,
    /// Every key a request was made for, and what its client was told.
    pub keys: Mutex<HashSet<String>>,
    pub acked: Mutex<HashMap<String, Answer>>,
}

pub fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Relaxed);
}

pub fn get(counter: &AtomicU64) -> u64 {
    counter.load(Relaxed)
}

/// splitmix64: a small seeded generator, enough to make a run repeatable in its choices.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn millis(&mut self, from: u64, to: u64) -> Duration {
        Duration::from_millis(from + self.below(to - from + 1))
    }
}

pub fn request_of(key: &str) -> String {
    let amount: u64 = key.bytes().map(u64::from).sum();
    format!("{{\"scope\": \"{SCOPE}\", \"key\": \"{key}\", \"amount\": {amount}}}")
}

/// A client's connection to whichever listed server accepts writes; reconnected on demand.
pub struct Conn {
    config: Config,
    client: Option<Client>,
    stats: Arc<Stats>,
}

impl Conn {
    /// As the superuser `postgres`.
    pub fn new(ports: &[u16], stats: Arc<Stats>) -> Conn {
        Conn::as_user(ports, SUPERUSER, stats)
    }

    pub fn as_user(ports: &[u16], user: &str, stats: Arc<Stats>) -> Conn {
        let mut config = Config::new();
        for port in ports {
            config.host("127.0.0.1").port(*port);
        }
        config
            .user(user)
            .dbname("chaos")
            .application_name("idem-chaos")
            .connect_timeout(Duration::from_secs(2))
            .target_session_attrs(TargetSessionAttrs::ReadWrite);
        Conn {
            config,
            client: None,
            stats,
        }
    }

    /// The session, connecting (again) if it has none or it broke; `None` while no server
    /// takes connections.
    pub fn get(&mut self) -> Option<&mut Client> {
        if self.client.as_ref().is_some_and(|c| c.is_closed()) {
            self.client = None;
        }
        if self.client.is_none() {
            match self.config.connect(NoTls) {
                Ok(c) => {
                    add(&self.stats.reconnects, 1);
                    self.client = Some(c);
                }
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(100));
                    return None;
                }
            }
        }
        self.client.as_mut()
    }

    pub fn drop_session(&mut self) {
        self.client = None;
    }
}

#[derive(Clone, Copy, Debug)]
pub enum Workflow {
    /// claim + effect + complete in one transaction
    OneTx,
    /// claim committed; then effect + checkpoint + complete(attempt => n)
    TwoTx,
    /// idem_call of a function that writes the effect
    Call,
}

impl Stats {
    /// Counts a claim's outcome; `Some(attempt)` when this client now owns the key.
    fn owned(&self, outcome: &str, attempt: i32) -> Option<i32> {
        match outcome {
            "new_claim" => add(&self.claims, 1),
            "processing_stale" | "retryable_failure" => add(&self.takeovers, 1),
            _ => return None,
        }
        Some(attempt)
    }

    fn finished(&self, outcome: &str, answer: Option<Answer>, key: &str) -> Option<Step> {
        match outcome {
            "replay_success" => {
                add(&self.replays, 1);
                match answer {
                    Some(a) => Some(Step::Done(a)),
                    None => {
                        self.unexpected(format!("{key}: replay without attempt/effect"));
                        Some(Step::Busy)
                    }
                }
            }
            "processing_active" => {
                add(&self.busy, 1);
                Some(Step::Busy)
            }
            "final_failure" => {
                self.unexpected(format!("{key}: final_failure"));
                Some(Step::Busy)
            }
            _ => None,
        }
    }

    pub fn unexpected(&self, what: String) {
        if let Ok(mut all) = self.unexpected.lock() {
            all.push(what);
        }
    }
}

/// One request, retried with the same key and payload until its outcome is known, or `None`
/// once `give_up` has passed or `stop` is set (the client goes away, possibly between the two
/// transactions of its workflow, leaving a committed claim to the worker).
pub fn request(
    conn: &mut Conn,
    stats: &Stats,
    key: &str,
    workflow: Workflow,
    rng: &mut Rng,
    give_up: Instant,
    stop: &AtomicBool,
) -> Option<Answer> {
    add(&stats.requests, 1);
    if let Ok(mut keys) = stats.keys.lock() {
        keys.insert(key.to_string());
    }
    while Instant::now() < give_up {
        if stop.load(Relaxed) {
            // The load is over: the client goes away (the drive completes its key later).
            add(&stats.abandoned, 1);
            return None;
        }
        let Some(client) = conn.get() else { continue };
        let step = match workflow {
            Workflow::OneTx => one_tx(client, stats, key),
            Workflow::TwoTx => two_tx(client, stats, key, rng, stop),
            Workflow::Call => call(client, stats, key),
        };
        match step {
            Ok(Step::Done(answer)) => {
                let before = match stats.acked.lock() {
                    Ok(mut acked) => acked.insert(key.to_string(), answer),
                    Err(_) => None,
                };
                if let Some(before) = before
                    && before != answer
                {
                    stats.unexpected(format!("{key}: told {before:?} before, now {answer:?}"));
                }
                return Some(answer);
            }
            Ok(Step::Busy) => std::thread::sleep(rng.millis(10, 60)),
            Ok(Step::Abandoned) => {
                add(&stats.abandoned, 1);
                return None;
            }
            Err(e) => on_error(conn, stats, key, &e),
        }
    }
    add(&stats.unfinished, 1);
    None
}

/// A client session's loop until `stop`: pick a key (a new one, or one of the most recent,
/// which other sessions may be working on), pick a workflow, and see the request through.
pub fn session(
    mut conn: Conn,
    stats: Arc<Stats>,
    next_key: Arc<AtomicU64>,
    prefix: String,
    stop: Arc<AtomicBool>,
    seed: u64,
    finish_within: Duration,
) {
    let mut rng = Rng::new(seed);
    while !stop.load(Relaxed) {
        let newest = next_key.load(Relaxed);
        let n = if newest < 8 || rng.chance(40) {
            next_key.fetch_add(1, Relaxed)
        } else {
            newest - 1 - rng.below(newest.min(40))
        };
        let key = format!("{prefix}{n}");
        let workflow = match rng.below(100) {
            0..40 => Workflow::OneTx,
            40..75 => Workflow::TwoTx,
            _ => Workflow::Call,
        };
        let give_up = Instant::now() + finish_within;
        request(&mut conn, &stats, &key, workflow, &mut rng, give_up, &stop);
    }
}

/// Client [`session`]s under load on scoped threads, sharing their counters, the stop flag and
/// the key sequence (tests/clusters/chaos.rs, tests/clusters/failover.rs).
pub struct Load {
    pub ports: Vec<u16>,
    /// The role the sessions connect as ([`SUPERUSER`] unless set).
    pub user: &'static str,
    pub stats: Arc<Stats>,
    pub stop: Arc<AtomicBool>,
    pub next_key: Arc<AtomicU64>,
}

impl Load {
    /// Nothing running yet; sessions connect to whichever of `ports` accepts writes.
    pub fn new(ports: Vec<u16>) -> Load {
        Load {
            ports,
            user: SUPERUSER,
            stats: Arc::new(Stats::default()),
            stop: Arc::new(AtomicBool::new(false)),
            next_key: Arc::new(AtomicU64::new(0)),
        }
    }

    /// `n` sessions in `scope` with keys named `prefix<n>`, the i-th seeded with `seed(i)`,
    /// each seeing its last request through within `finish_within` once [`Load::stop`] is set.
    pub fn spawn<'scope>(
        &self,
        scope: &'scope std::thread::Scope<'scope, '_>,
        n: u64,
        prefix: &str,
        seed: impl Fn(u64) -> u64,
        finish_within: Duration,
    ) -> Vec<std::thread::ScopedJoinHandle<'scope, ()>> {
        (0..n)
            .map(|i| {
                let (ports, stats, next_key, stop) = (
                    self.ports.clone(),
                    self.stats.clone(),
                    self.next_key.clone(),
                    self.stop.clone(),
                );
                let conn = Conn::as_user(&ports, self.user, stats.clone());
                let (prefix, seed) = (prefix.to_string(), seed(i));
                scope.spawn(move || {
                    session(conn, stats, next_key, prefix, stop, seed, finish_within)
                })
            })
            .collect()
    }
}
