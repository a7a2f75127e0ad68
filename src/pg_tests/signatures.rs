//! The signature contract of the `LANGUAGE c` functions: each body reads its arguments by
//! position, so the types declared next to it (`args::Signature`) must be `pg_proc`'s.

#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::steps::args::Signature;

    /// Every C function's declared signature.
    const ALL: [&Signature; 15] = [
        &crate::entry::claim::CLAIM_ARGS,
        &crate::entry::finish::COMPLETE_ARGS,
        &crate::entry::finish::FAIL_ARGS,
        &crate::entry::finish::CHECKPOINT_ARGS,
        &crate::entry::finish::FORGET_ARGS,
        &crate::entry::call::CALL_ARGS,
        &crate::entry::call::RETRYABLE_ARGS,
        &crate::entry::inbox::ACCEPT_ARGS,
        &crate::entry::inbox::PURGE_ARGS,
        &crate::entry::versions::ADVANCE_ARGS,
        &crate::entry::outbox::PUT_ARGS,
        &crate::entry::outbox::TAKE_ARGS,
        &crate::entry::outbox::ACK_ARGS,
        &crate::entry::outbox::NACK_ARGS,
        &crate::entry::outbox::PURGE_ARGS,
    ];

    /// The extension's hand-declared C functions (`sql/`) in `pg_proc`: name and argument
    /// types, by position.
    fn c_functions() -> Vec<(String, Vec<String>)> {
        Spi::connect(|client| {
            client
                .select(
                    "SELECT p.proname::pg_catalog.text,
                        ARRAY(SELECT pg_catalog.format_type(t, NULL)
                              FROM pg_catalog.unnest(p.proargtypes::pg_catalog.oid[])
                                   WITH ORDINALITY AS a(t, i) ORDER BY a.i)
                     FROM pg_catalog.pg_proc p
                     JOIN pg_catalog.pg_depend d
                       ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                      AND d.objid OPERATOR(pg_catalog.=) p.oid
                      AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                      AND d.deptype OPERATOR(pg_catalog.=) 'e'::pg_catalog.char
                     JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
                     JOIN pg_catalog.pg_language l ON l.oid OPERATOR(pg_catalog.=) p.prolang
                     WHERE e.extname OPERATOR(pg_catalog.=) 'idempotency'::pg_catalog.name
                       AND l.lanname OPERATOR(pg_catalog.=) 'c'::pg_catalog.name
                       -- pgrx's own functions (#[pg_extern], #[pg_test]) call a `_wrapper`.
                       AND p.prosrc NOT LIKE '%\\_wrapper'
                     ORDER BY 1",
                    None,
                    &[],
                )
                .unwrap()
                .map(|row| {
                    (
                        row.get::<String>(1).unwrap().unwrap(),
                        row.get::<Vec<String>>(2).unwrap().unwrap(),
                    )
                })
                .collect()
        })
    }

    /// `types` as `format_type` spells them.
    fn normalized(types: &[&str]) -> Vec<String> {
        let types: Vec<String> = types.iter().map(|t| t.to_string()).collect();
        Spi::get_one_with_args::<Vec<String>>(
            "SELECT ARRAY(SELECT pg_catalog.format_type(t::pg_catalog.regtype::pg_catalog.oid, NULL)
                          FROM pg_catalog.unnest($1::pg_catalog.text[]) WITH ORDINALITY AS a(t, i)
                          ORDER BY a.i)",
            &[types.into()],
        )
        .unwrap()
        .unwrap()
    }

    #[pg_test]
    fn c_function_signatures_match_pg_proc() {
        let catalog = c_functions();
        let names: Vec<&str> = catalog.iter().map(|(name, _)| name.as_str()).collect();
        let mut declared: Vec<&str> = ALL.iter().map(|s| s.name).collect();
        declared.sort_unstable();
        assert_eq!(
            names, declared,
            "every C function has a signature, once (no overloads)"
        );
        for signature in ALL {
            let (_, in_catalog) = catalog
                .iter()
                .find(|(name, _)| name == signature.name)
                .unwrap();
            assert_eq!(
                *in_catalog,
                normalized(signature.args),
                "{}: the arguments its body reads by position",
                signature.name
            );
        }
    }

    /// The check fails on a shifted argument: `idem_fail` with `retryable` moved last.
    #[pg_test]
    fn a_shifted_argument_is_seen() {
        let shifted = normalized(&["text", "text", "text", "text", "int4", "bool"]);
        let catalog = c_functions();
        let (_, fail) = catalog
            .iter()
            .find(|(name, _)| name == "idem_fail")
            .unwrap();
        assert_ne!(*fail, shifted);
        assert_eq!(*fail, normalized(crate::entry::finish::FAIL_ARGS.args));
    }
}
