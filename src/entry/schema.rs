//! The extension's SQL files, in install order: tables and types (sql/bootstrap.sql) first,
//! then the declarations of every function, then the grants. The C functions declared in
//! sql/*.sql are defined in the module named in each comment (a `#[pg_extern]` has
//! `sql = false`: its declaration is here, as the portable edition's is, docs/architecture.md).

use pgrx::prelude::*;

extension_sql_file!("../../sql/bootstrap.sql", name = "bootstrap", bootstrap);

// claim.rs, finish.rs
extension_sql_file!(
    "../../sql/claim.sql",
    name = "claim_functions",
    requires = ["bootstrap"]
);

// canonical.rs, lock_key.rs
extension_sql_file!(
    "../../sql/canonical.sql",
    name = "canonical",
    requires = ["bootstrap"]
);

// call.rs
extension_sql_file!(
    "../../sql/call.sql",
    name = "call_functions",
    requires = ["bootstrap"]
);

// plain SQL (docs/http.md)
extension_sql_file!(
    "../../sql/http.sql",
    name = "http_functions",
    requires = ["claim_functions"]
);

// inbox.rs, versions.rs
extension_sql_file!(
    "../../sql/inbox.sql",
    name = "inbox_functions",
    requires = ["bootstrap"]
);

// outbox.rs
extension_sql_file!(
    "../../sql/outbox.sql",
    name = "outbox_functions",
    requires = ["bootstrap"]
);

// maintenance.rs
extension_sql_file!(
    "../../sql/maintenance.sql",
    name = "maintenance",
    requires = ["bootstrap"]
);

// metrics.rs, lib.rs
extension_sql_file!(
    "../../sql/metrics.sql",
    name = "metrics",
    requires = ["bootstrap"]
);

// steps/citus.rs
extension_sql_file!(
    "../../sql/citus.sql",
    name = "citus",
    requires = ["bootstrap", "maintenance"]
);

extension_sql_file!(
    "../../sql/consumers.sql",
    name = "consumers",
    requires = ["bootstrap"]
);

// plain SQL (docs/retention.md)
extension_sql_file!(
    "../../sql/layout.sql",
    name = "layout",
    requires = ["claim_functions"]
);

extension_sql_file!(
    "../../sql/rotate.sql",
    name = "rotate",
    requires = ["layout"]
);

// plain SQL (docs/cdc.md): the CDC secret
extension_sql_file!("../../sql/cdc.sql", name = "cdc", requires = ["consumers"]);

// outbox_cdc.rs (cdc_hmac)
extension_sql_file!(
    "../../sql/cdc_sign.sql",
    name = "cdc_sign",
    requires = ["cdc"]
);

extension_sql_file!(
    "../../sql/grants.sql",
    name = "grants",
    requires = [
        "consumers",
        "maintenance",
        "metrics",
        "layout",
        "rotate",
        "cdc_sign"
    ]
);
