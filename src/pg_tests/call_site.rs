//! In-backend tests of the result-row cache of idem_claim / idem_call (src/steps/result_row.rs).
//! Its cross-transaction behaviour is tested with real
//! sessions in tests/integration/claim/call_site.rs, which uses the hook below.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::pg_tests::helpers::*;

    /// Test hook: the next result-row build of this backend sees every cache invalidated midway.
    #[pg_extern]
    fn invalidate_during_next_build() {
        crate::steps::result_row::invalidate_during_next_build();
    }

    #[pg_test]
    fn call_site_invalidated_during_its_build_still_serves_correct_rows() {
        run("CREATE FUNCTION call_site_echo(jsonb) RETURNS jsonb LANGUAGE sql AS 'SELECT $1'");
        let claim = |key: &str| {
            one::<String>(&format!(
                "SELECT concat_ws('|', outcome, attempt, coalesce(response::text, '-')) \
                 FROM idem_claim('call_site', '{key}', 'h')"
            ))
            .unwrap_or_default()
        };
        let call = |key: &str| {
            one::<String>(&format!(
                "SELECT concat_ws('|', outcome, response, attempt) \
                 FROM idem_call('call_site_call', '{key}', '{{\"v\": 1}}', 'call_site_echo(jsonb)')"
            ))
            .unwrap_or_default()
        };
        for key in ["a", "b"] {
            run("SELECT tests.invalidate_during_next_build()");
            assert_eq!(claim(key), "new_claim|1|-");
            run("SELECT tests.invalidate_during_next_build()");
            assert_eq!(call(key), r#"new_claim|{"v": 1}|1"#);
        }
        run("SELECT idem_complete('call_site', 'a', '{\"done\": true}')");
        assert_eq!(claim("a"), r#"replay_success|1|{"done": true}"#);
        assert_eq!(call("b"), r#"replay_success|{"v": 1}|1"#);
    }
}
