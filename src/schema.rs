//! The extension's tables and types (sql/bootstrap.sql): first in the install script.

use pgrx::prelude::*;

extension_sql_file!("../sql/bootstrap.sql", name = "bootstrap", bootstrap);

extension_sql_file!(
    "../sql/consumers.sql",
    name = "consumers",
    requires = ["bootstrap"]
);

extension_sql_file!(
    "../sql/grants.sql",
    name = "grants",
    requires = ["consumers", "maintenance", "metrics"]
);
