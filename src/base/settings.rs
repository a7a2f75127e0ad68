//! Every `idempotency.*` setting, defined by [`init`] (called from `_PG_init`), one function
//! per area: the maintenance worker's (all reloadable, SIGHUP) and the outbox's (superuser).
//! The test build's `idempotency_test.*` settings live in `test_points.rs`.

use std::ffi::CString;

use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

/// Time between maintenance rounds, in milliseconds.
pub static NAPTIME: GucSetting<i32> = GucSetting::<i32>::new(10_000);
/// Comma-separated database names to maintain; empty means every database with the extension.
pub static DATABASES: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(c""));
/// Most rows one maintenance transaction changes.
pub static BATCH_SIZE: GucSetting<i32> = GucSetting::<i32>::new(10_000);
/// How long after its lease ended a processing row is reclaimed, in milliseconds.
pub static RECLAIM_GRACE: GucSetting<i32> = GucSetting::<i32>::new(0);
/// Percent of its time a maintenance worker works on a backlog; it rests the rest, so upkeep
/// never takes more than this share of a core from the claims (like autovacuum's cost delay).
pub static MAINTENANCE_SHARE: GucSetting<i32> = GucSetting::<i32>::new(25);
/// Whether the launcher runs maintenance rounds.
pub static WORKER_ENABLED: GucSetting<bool> = GucSetting::<bool>::new(true);

/// `idempotency.citus_upkeep`: who reclaims and purges a distributed `idempotency.requests`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, pgrx::PostgresGucEnum)]
pub enum CitusUpkeep {
    /// The coordinator's worker, every shard through the coordinator.
    #[name = c"coordinator"]
    Coordinator,
    /// Every node's worker, the shard placements it holds, locally.
    #[name = c"shards"]
    Shards,
}
pub static CITUS_UPKEEP: GucSetting<CitusUpkeep> =
    GucSetting::<CitusUpkeep>::new(CitusUpkeep::Coordinator);

/// `idempotency.outbox_retention`: how long published outbox rows are kept, in seconds.
pub static OUTBOX_RETENTION: GucSetting<i32> = GucSetting::<i32>::new(7 * 24 * 60 * 60);

/// `idempotency.outbox_max_bytes`: the longest outbox message, payload and headers as JSON text.
pub static OUTBOX_MAX_BYTES: GucSetting<i32> = GucSetting::<i32>::new(1_000_000);

/// `idempotency.outbox_delivery`: how `idem_outbox_put` hands a message on (`outbox_cdc.rs`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, pgrx::PostgresGucEnum)]
pub enum OutboxDelivery {
    /// A pending row, for `idem_outbox_take`.
    #[name = c"poll"]
    Poll,
    /// A row written already published, for a CDC connector reading the table's inserts.
    #[name = c"cdc_table"]
    CdcTable,
    /// No row: a transactional logical-decoding message.
    #[name = c"cdc_message"]
    CdcMessage,
}
pub static OUTBOX_DELIVERY: GucSetting<OutboxDelivery> =
    GucSetting::<OutboxDelivery>::new(OutboxDelivery::Poll);

const DAY_MS: i32 = 86_400_000;

/// Define every setting. Called from `_PG_init` in every process that loads the library.
pub fn init() {
    maintenance();
    outbox();
}

/// The maintenance worker's settings (`worker.rs`, `maintenance_worker.rs`, `maintenance.rs`).
fn maintenance() {
    GucRegistry::define_int_guc(
        c"idempotency.naptime",
        c"Time between two maintenance rounds of the idempotency background worker.",
        c"Each round reclaims expired leases and purges expired records in every database with the extension.",
        &NAPTIME,
        100,
        DAY_MS,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_string_guc(
        c"idempotency.databases",
        c"Comma-separated names of the databases the idempotency worker maintains.",
        c"Empty: every database that allows connections and has the extension installed.",
        &DATABASES,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"idempotency.batch_size",
        c"Most rows one maintenance transaction reclaims or purges.",
        c"",
        &BATCH_SIZE,
        1,
        1_000_000,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"idempotency.reclaim_grace",
        c"How long after its lease ended a processing record is reclaimed as failed_retryable.",
        c"",
        &RECLAIM_GRACE,
        0,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"idempotency.maintenance_share",
        c"Percent of its time the maintenance worker spends working through a backlog.",
        c"After each full batch it rests in proportion, so upkeep takes at most this share of a core.",
        &MAINTENANCE_SHARE,
        1,
        100,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_enum_guc(
        c"idempotency.citus_upkeep",
        c"Who reclaims and purges a Citus-distributed idempotency.requests: coordinator or shards.",
        c"coordinator: the coordinator's worker, row by row through the coordinator. shards: every node's worker, the shard placements it holds, set-based and locally (set it on every node).",
        &CITUS_UPKEEP,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"idempotency.worker_enabled",
        c"Whether the idempotency background worker runs maintenance rounds.",
        c"Needs the library in shared_preload_libraries.",
        &WORKER_ENABLED,
        GucContext::Sighup,
        GucFlags::default(),
    );
}

/// The outbox's settings (`outbox.rs`).
fn outbox() {
    GucRegistry::define_int_guc(
        c"idempotency.outbox_retention",
        c"How long published outbox messages are kept before idem_outbox_purge deletes them.",
        c"Also how long an idem_outbox_put dedupe_key keeps deduplicating after publication.",
        &OUTBOX_RETENTION,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"idempotency.outbox_max_bytes",
        c"The longest message idem_outbox_put takes: its payload and headers as JSON text, in bytes.",
        c"Longer ones are refused (54000). A CDC pipeline refuses messages past its limits (Kafka's message.max.bytes).",
        &OUTBOX_MAX_BYTES,
        1,
        0x3FFF_FFFF,
        GucContext::Suset,
        GucFlags::UNIT_BYTE,
    );
    // Per session: a database or role is switched with ALTER DATABASE/ROLE ... SET.
    GucRegistry::define_enum_guc(
        c"idempotency.outbox_delivery",
        c"How idem_outbox_put hands a message on: poll, cdc_table or cdc_message.",
        c"poll: a pending row for idem_outbox_take. cdc_table: a row written already published, for a CDC connector (Debezium's outbox event router). cdc_message: no row, a transactional logical-decoding message with prefix idempotency.outbox.",
        &OUTBOX_DELIVERY,
        GucContext::Userset,
        GucFlags::default(),
    );
}

/// The names in `idempotency.databases` (trimmed, empty entries dropped); empty means all.
pub fn database_names() -> Vec<String> {
    let raw = DATABASES
        .get()
        .map(|v| v.to_string_lossy().into_owned())
        .unwrap_or_default();
    parse_names(&raw)
}

fn parse_names(raw: &str) -> Vec<String> {
    raw.split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::parse_names;

    #[test]
    fn names_are_trimmed_and_blank_entries_dropped() {
        assert_eq!(parse_names(""), Vec::<String>::new());
        assert_eq!(parse_names(" , "), Vec::<String>::new());
        assert_eq!(parse_names("app, Billing ,,x"), vec!["app", "Billing", "x"]);
    }
}
