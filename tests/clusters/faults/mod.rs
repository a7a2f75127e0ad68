//! Shared by the fault tests (tests/clusters/chaos.rs, tests/clusters/failover.rs): servers that can be killed,
//! restarted and promoted, the client workflows, and the audit.
#![allow(dead_code)]

pub mod audit;
pub mod server;
pub mod workload;

/// The one Postgres major the fault tests run on in the test suite (they take a while); the
/// others print a note and pass. IDEM_FAULTS_MAJOR picks another.
pub fn chosen_major() -> Option<String> {
    let chosen = std::env::var("IDEM_FAULTS_MAJOR").unwrap_or_else(|_| "16".to_string());
    match std::env::var("IDEM_PG_MAJOR") {
        Ok(major) if major != chosen => {
            eprintln!(
                "skipped: the fault tests run on Postgres {chosen} only (this is {major}; \
                 set IDEM_FAULTS_MAJOR={major} to run them here)"
            );
            None
        }
        _ => Some(chosen),
    }
}

pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
