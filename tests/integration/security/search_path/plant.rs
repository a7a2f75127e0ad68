//! The attacker's look-alikes: every `pg_catalog` signature of the operators and functions a
//! statement uses, in schema hijack, each telling, trying to escalate, then answering.

use crate::common::Client;

use std::collections::BTreeSet;

/// The body of every look-alike: tell, try to escalate, then answer.
const BODY: &str = "BEGIN RAISE WARNING 'HIJACKED %', TG_NAME_PLACEHOLDER; \
    BEGIN EXECUTE 'ALTER ROLE attacker SUPERUSER'; EXCEPTION WHEN OTHERS THEN NULL; END; \
    RETURN RESULT_PLACEHOLDER; END";

/// Plant look-alikes of `symbols` and `names` in schema hijack; how many.
pub(crate) fn plant(
    attacker: &mut Client,
    symbols: &BTreeSet<String>,
    names: &BTreeSet<String>,
) -> usize {
    let mut planted = 0;
    // Operators: every signature pg_catalog has for the symbol among these types, plus the
    // extension's enums (whose `=` pg_catalog only has as anyenum: the original hole).
    let types = "'text','int4','int8','bool','jsonb','timestamptz','interval','uuid','tid',\
                 'idem_status','idem_outcome'";
    for symbol in symbols {
        let rows = attacker
            .query(
                &format!(
                    "SELECT DISTINCT l.typname::text, r.typname::text, o.oprresult::regtype::text
                     FROM pg_catalog.pg_operator o
                     JOIN pg_catalog.pg_type l ON l.oid = o.oprleft
                     JOIN pg_catalog.pg_type r ON r.oid = o.oprright
                     WHERE o.oprname = $1 AND l.typname IN ({types}) AND r.typname IN ({types})
                     UNION SELECT t, t, 'boolean' FROM unnest(ARRAY['idem_status','idem_outcome']) t
                       WHERE $1 IN ('=', '<>', '<', '>', '<=', '>=')"
                ),
                &[symbol],
            )
            .expect("operator signatures");
        for (n, row) in rows.iter().enumerate() {
            let (left, right, result): (String, String, String) =
                (row.get(0), row.get(1), row.get(2));
            let answer = if result == "boolean" {
                "true".to_string()
            } else {
                format!("a OPERATOR(pg_catalog.{symbol}) b")
            };
            let fname = format!(
                "op_{}_{n}",
                symbol
                    .bytes()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
            );
            let body = BODY
                .replace(
                    "TG_NAME_PLACEHOLDER",
                    &format!("'{symbol}({left},{right})'"),
                )
                .replace("RESULT_PLACEHOLDER", &answer);
            let sql = format!(
                "CREATE FUNCTION hijack.{fname}(a public.{left}, b public.{right}) RETURNS {result}
                   LANGUAGE plpgsql AS $f${body}$f$;
                 CREATE OPERATOR hijack.{symbol} (LEFTARG = public.{left}, RIGHTARG = public.{right},
                   FUNCTION = hijack.{fname});"
            )
            .replace("public.text", "pg_catalog.text")
            .replace("public.int4", "pg_catalog.int4")
            .replace("public.int8", "pg_catalog.int8")
            .replace("public.bool", "pg_catalog.bool")
            .replace("public.jsonb", "pg_catalog.jsonb")
            .replace("public.timestamptz", "pg_catalog.timestamptz")
            .replace("public.interval", "pg_catalog.interval")
            .replace("public.uuid", "pg_catalog.uuid")
            .replace("public.tid", "pg_catalog.tid");
            attacker
                .batch_execute(&sql)
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            planted += 1;
        }
    }
    // Functions: every pg_catalog signature of each name whose arguments plpgsql can take.
    for name in names {
        let rows = attacker
            .query(
                "SELECT ARRAY(SELECT t::regtype::text FROM unnest(p.proargtypes) t),
                        p.prorettype::regtype::text
                 FROM pg_catalog.pg_proc p
                 WHERE p.proname = $1 AND p.pronamespace = 'pg_catalog'::regnamespace
                   AND p.prokind = 'f' AND NOT p.proretset
                   AND NOT EXISTS (SELECT FROM unnest(p.proargtypes) t
                                   WHERE t IN ('\"any\"'::regtype, 'anyelement'::regtype,
                                               'anyarray'::regtype, 'internal'::regtype))
                   AND p.prorettype <> 'internal'::regtype",
                &[name],
            )
            .expect("function signatures");
        for row in &rows {
            let (args, result): (Vec<String>, String) = (row.get(0), row.get(1));
            let params: Vec<String> = args
                .iter()
                .enumerate()
                .map(|(i, ty)| format!("a{i} {ty}"))
                .collect();
            let call_args: Vec<String> = (0..args.len()).map(|i| format!("a{i}")).collect();
            let body = BODY
                .replace(
                    "TG_NAME_PLACEHOLDER",
                    &format!("'{name}({})'", args.join(",")),
                )
                .replace(
                    "RESULT_PLACEHOLDER",
                    &format!("pg_catalog.{name}({})", call_args.join(", ")),
                );
            // A void function returns nothing: call it, then return.
            let body = match body.rsplit_once("RETURN pg_catalog.") {
                Some((head, call)) if result == "void" => {
                    format!(
                        "{head}PERFORM pg_catalog.{}; RETURN; END",
                        call.trim_end_matches("; END")
                    )
                }
                _ => body,
            };
            let sql = format!(
                "CREATE FUNCTION hijack.{name}({}) RETURNS {result} LANGUAGE plpgsql AS $f${body}$f$",
                params.join(", ")
            );
            attacker
                .batch_execute(&sql)
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            planted += 1;
        }
    }
    planted
}
