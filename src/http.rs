//! The HTTP response contract (`sql/http.sql`, docs/http.md): SQL helpers that store an HTTP
//! response in one shape and read it back on a replay. They are off the hot path (one call per
//! finished request), so they are plain SQL with a pinned search_path.

use pgrx::prelude::*;

extension_sql_file!(
    "../sql/http.sql",
    name = "http_functions",
    requires = ["claim_functions"]
);
