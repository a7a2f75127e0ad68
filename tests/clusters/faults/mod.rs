//! Shared by the fault tests (tests/clusters/chaos.rs, tests/clusters/failover.rs): servers that can be killed,
//! restarted and promoted, the client workflows, and the audit.
#![allow(dead_code)]

pub mod audit;
pub mod server;
pub mod workload;

pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
