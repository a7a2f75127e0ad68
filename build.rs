//! Compiles csrc/call_guard.c (idem_call's subtransaction guard) against the server headers
//! of the Postgres major chosen by the `pgNN` feature, found the way pgrx-pg-sys finds them:
//! the pg_config described by the environment (`PGRX_PG_CONFIG_PATH` /
//! `PGRX_PG_CONFIG_AS_ENV`), else `pgNN` from `$PGRX_HOME/config.toml` (`cargo pgrx init`).
//! Also decides which tests this build cannot run (`test_cfgs`).

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
    test_cfgs(major, &pg_config);
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

/// The tests this build cannot run, as cfgs their `#[cfg_attr(idem_no_x, ignore = "why")]` read:
/// libtest then reports them ignored, with the reason, instead of letting them return early and
/// count as passed (docs/developing.md, "Where each test runs"). Decided when this script runs:
/// after installing pg_cron or Citus into a Postgres, `touch build.rs`. Its folders are not
/// watched, since every `cargo pgrx test` installs the extension into them.
fn test_cfgs(major: u16, pg_config: &PgConfig) {
    let env = |name: &str| {
        println!("cargo:rerun-if-env-changed={name}");
        std::env::var(name).ok()
    };
    let lib = pg_config.pkglibdir().ok();
    let has_lib = |name: &str| lib.as_ref().is_some_and(|d| d.join(name).exists());
    let share = pg_config.sharedir().ok();
    let has_ext = |name: &str| {
        share
            .as_ref()
            .is_some_and(|d| d.join("extension").join(format!("{name}.control")).exists())
    };
    // The chaos and failover tests take minutes: one major runs them.
    let faults = env("IDEM_FAULTS_MAJOR").unwrap_or_else(|| "16".into()) == major.to_string();
    // Citus 14 supports 16-18; IDEM_CITUS=1 builds it (pgrx-config/test.sh: on 17), unset uses
    // one already installed.
    let citus = (16..=18).contains(&major)
        && match env("IDEM_CITUS").as_deref() {
            Some("1") => true,
            Some("0") => false,
            _ => has_ext("citus"),
        };
    let runs = [
        ("idem_no_faults", faults),
        ("idem_no_citus", citus),
        ("idem_no_pgtle", env("IDEM_PGTLE").as_deref() == Some("1")),
        ("idem_no_pg_cron", has_lib("pg_cron.so")),
        // contrib, absent from the Postgres builds without it.
        ("idem_no_test_decoding", has_lib("test_decoding.so")),
        ("idem_no_auto_explain", has_lib("auto_explain.so")),
        ("idem_no_refint", has_ext("refint")),
    ];
    for (cfg, runs) in runs {
        println!("cargo:rustc-check-cfg=cfg({cfg})");
        if !runs {
            println!("cargo:rustc-cfg={cfg}");
        }
    }
}
