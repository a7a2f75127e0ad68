//! Compiles csrc/call_guard.c (idem_call's subtransaction guard) against the server headers
//! of the Postgres major chosen by the `pgNN` feature, found the way pgrx-pg-sys finds them:
//! the pg_config described by the environment (`PGRX_PG_CONFIG_PATH` /
//! `PGRX_PG_CONFIG_AS_ENV`), else `pgNN` from `$PGRX_HOME/config.toml` (`cargo pgrx init`).

use pgrx_pg_config::{PgConfig, Pgrx};

const MAJORS: std::ops::RangeInclusive<u16> = 13..=18;

fn main() {
    println!("cargo:rerun-if-changed=csrc/call_guard.c");
    for var in ["PGRX_PG_CONFIG_PATH", "PGRX_PG_CONFIG_AS_ENV", "PGRX_HOME"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let majors: Vec<u16> = MAJORS
        .filter(|major| std::env::var_os(format!("CARGO_FEATURE_PG{major}")).is_some())
        .collect();
    let [major] = majors[..] else {
        panic!("exactly one of the features pg13..pg18 must be enabled (found {majors:?})");
    };
    let pg_config = PgConfig::from_env()
        .or_else(|_| Pgrx::from_config().and_then(|pgrx| pgrx.get(&format!("pg{major}"))))
        .unwrap_or_else(|e| panic!("no pg_config for pg{major}: {e}"));
    let found = pg_config
        .major_version()
        .unwrap_or_else(|e| panic!("pg_config for pg{major}: {e}"));
    assert_eq!(
        found, major,
        "feature pg{major} but pg_config is for {found}"
    );
    let include = pg_config
        .includedir_server()
        .unwrap_or_else(|e| panic!("pg_config --includedir-server: {e}"));
    let cppflags = pg_config
        .cppflags()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();

    let mut build = cc::Build::new();
    build.file("csrc/call_guard.c").include(include);
    // -D and -I from pg_config --cppflags (e.g. -D_GNU_SOURCE), as Postgres' own PGXS does.
    for flag in cppflags.split_whitespace() {
        if flag.starts_with("-D") || flag.starts_with("-I") {
            build.flag(flag);
        }
    }
    build.flag_if_supported("-Wno-unused-parameter");
    build.compile("idem_call_guard");
}
