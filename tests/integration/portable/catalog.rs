//! The two editions' catalogs compared both ways (issue 35): the native extension in one
//! database, the plain portable script in another, and every object of their schemas listed
//! property by property: each function by name and identity arguments (arguments with names
//! and defaults, result, kind, volatility, strictness, SECURITY DEFINER, `SET` clauses, ACL,
//! parallel safety, leakproofness), each table, view, index, sequence, type, trigger, policy,
//! operator and schema with its ACL. Owners' names are normalized to `OWNER`. A difference not
//! in [`EXCEPTIONS`] fails, and so does an exception that no longer matches anything.

use std::collections::{BTreeMap, BTreeSet};

use crate::common;

use common::Client;

/// A difference that must exist: `object` (exact, or a prefix ending in `*`), `property`
/// (`None`: the whole object is in one edition only), the values it must have (native,
/// portable; `None`: any), why, and the words docs/managed.md ("What differs from the
/// native extension") states it with.
pub(crate) struct Exception {
    object: &'static str,
    property: Option<&'static str>,
    values: Option<(&'static str, &'static str)>,
    why: &'static str,
    doc: &'static str,
}

/// The one table of the editions' intended catalog differences.
pub(crate) const EXCEPTIONS: &[Exception] = &[
    Exception {
        object: "function *",
        property: Some("config"),
        values: Some(("", "search_path=pg_catalog, pg_temp")),
        why: "PL/pgSQL resolves names at run time: every portable function pins its path; \
              the native C functions run fixed SQL and do not pay for the SET",
        doc: "| `SET search_path` | not on the hot C functions",
    },
    Exception {
        object: "function idempotency.portable_*",
        property: None,
        values: None,
        why: "the argument rules, diagnoses and shared steps of the portable functions, which \
              the native edition has in Rust",
        doc: "helpers `idempotency.portable_*`",
    },
    Exception {
        object: "function public._idem_jcs_*",
        property: None,
        values: None,
        why: "RFC 8785 canonical JSON in PL/pgSQL next to the API (idem_hash needs no USAGE on \
              schema idempotency); natively C",
        doc: "`_idem_jcs_*` next to the API",
    },
    Exception {
        object: "function public.idem_upkeep(batch integer)",
        property: None,
        values: None,
        why: "the background worker's round as a function: no library, no worker",
        doc: "| extra objects | | `idem_upkeep`",
    },
    Exception {
        object: "function public.idem_schedule_upkeep(schedule text)",
        property: None,
        values: None,
        why: "schedules idem_upkeep with pg_cron",
        doc: "`idem_schedule_upkeep`;",
    },
];

/// Every object of the non-system schemas, as (object, property, value) rows.
const CATALOG: &str = r#"
WITH ns AS (
  SELECT oid, nspname FROM pg_catalog.pg_namespace
   WHERE nspname NOT LIKE 'pg\_%' AND nspname <> 'information_schema'
     AND nspname <> 'tests' -- the #[pg_test] functions of a test build
), rel AS (
  SELECT c.*, n.nspname FROM pg_catalog.pg_class c JOIN ns n ON n.oid = c.relnamespace
)
SELECT 'schema ' || nspname, 'acl', idem_test_acl(n.nspacl, 'n', n.nspowner)
  FROM pg_catalog.pg_namespace n WHERE n.oid IN (SELECT oid FROM ns)
UNION ALL
SELECT 'function ' || n.nspname || '.' || p.proname || '(' || pg_catalog.pg_get_function_identity_arguments(p.oid) || ')',
       v.property, v.value
  FROM pg_catalog.pg_proc p JOIN ns n ON n.oid = p.pronamespace
  CROSS JOIN LATERAL (VALUES
    ('arguments', pg_catalog.pg_get_function_arguments(p.oid)),
    ('result', coalesce(pg_catalog.pg_get_function_result(p.oid), '')),
    ('kind', p.prokind::text),
    ('volatility', p.provolatile::text),
    ('strict', p.proisstrict::text),
    ('security definer', p.prosecdef::text),
    ('leakproof', p.proleakproof::text),
    ('parallel', p.proparallel::text),
    ('config', coalesce(pg_catalog.array_to_string(p.proconfig, ', '), '')),
    ('acl', idem_test_acl(p.proacl, 'f', p.proowner))
  ) v(property, value)
 WHERE p.proname <> 'idem_test_acl'
UNION ALL
SELECT CASE WHEN c.relkind IN ('v', 'm') THEN 'view ' ELSE 'table ' END || c.nspname || '.' || c.relname,
       v.property, v.value
  FROM rel c
  CROSS JOIN LATERAL (VALUES
    ('kind', c.relkind::text || ' ' || c.relpersistence::text),
    ('options', coalesce(pg_catalog.array_to_string(c.reloptions, ', '), '')),
    ('row security', c.relrowsecurity::text || ' ' || c.relforcerowsecurity::text),
    ('acl', idem_test_acl(c.relacl, 'r', c.relowner)),
    ('definition', CASE WHEN c.relkind IN ('v', 'm') THEN pg_catalog.pg_get_viewdef(c.oid) ELSE '' END)
  ) v(property, value)
 WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
UNION ALL
SELECT CASE WHEN c.relkind IN ('v', 'm') THEN 'view ' WHEN c.relkind = 'c' THEN 'type ' ELSE 'table ' END
         || c.nspname || '.' || c.relname,
       'column ' || a.attname,
       '#' || pg_catalog.row_number() OVER (PARTITION BY c.oid ORDER BY a.attnum) || ' '
         || pg_catalog.format_type(a.atttypid, a.atttypmod)
         || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END
         || coalesce(' DEFAULT ' || pg_catalog.pg_get_expr(d.adbin, d.adrelid), '')
         || CASE WHEN a.attidentity <> '' THEN ' IDENTITY ' || a.attidentity::text ELSE '' END
         || CASE WHEN a.attgenerated <> '' THEN ' GENERATED' ELSE '' END
         || CASE WHEN a.attcollation <> 0 AND a.attcollation <> (SELECT typcollation FROM pg_catalog.pg_type WHERE oid = a.atttypid)
                 THEN ' COLLATE ' || a.attcollation::regcollation::text ELSE '' END
  FROM rel c JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
 WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'c')
UNION ALL
SELECT 'table ' || c.nspname || '.' || c.relname, 'constraint ' || k.conname, pg_catalog.pg_get_constraintdef(k.oid)
  FROM rel c JOIN pg_catalog.pg_constraint k ON k.conrelid = c.oid
UNION ALL
SELECT 'table ' || c.nspname || '.' || c.relname, 'trigger ' || t.tgname,
       pg_catalog.pg_get_triggerdef(t.oid) || ' ' || t.tgenabled::text
  FROM rel c JOIN pg_catalog.pg_trigger t ON t.tgrelid = c.oid AND NOT t.tgisinternal
UNION ALL
SELECT 'table ' || c.nspname || '.' || c.relname, 'policy ' || p.polname,
       p.polcmd::text || ' ' || p.polpermissive::text || ' ' || p.polroles::text || ' '
         || coalesce(pg_catalog.pg_get_expr(p.polqual, p.polrelid), '') || ' '
         || coalesce(pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid), '')
  FROM rel c JOIN pg_catalog.pg_policy p ON p.polrelid = c.oid
UNION ALL
SELECT 'index ' || c.nspname || '.' || c.relname, 'definition', pg_catalog.pg_get_indexdef(c.oid)
  FROM rel c WHERE c.relkind IN ('i', 'I')
UNION ALL
SELECT 'sequence ' || c.nspname || '.' || c.relname, v.property, v.value
  FROM rel c JOIN pg_catalog.pg_sequence s ON s.seqrelid = c.oid
  CROSS JOIN LATERAL (VALUES
    ('parameters', pg_catalog.format_type(s.seqtypid, NULL) || ' start ' || s.seqstart || ' by ' || s.seqincrement
       || ' ' || s.seqmin || '..' || s.seqmax || ' cache ' || s.seqcache || ' cycle ' || s.seqcycle),
    ('owned by', coalesce((SELECT dc.relname || '.' || a.attname FROM pg_catalog.pg_depend dep
        JOIN pg_catalog.pg_class dc ON dc.oid = dep.refobjid
        JOIN pg_catalog.pg_attribute a ON a.attrelid = dep.refobjid AND a.attnum = dep.refobjsubid
       WHERE dep.classid = 'pg_catalog.pg_class'::regclass AND dep.objid = c.oid
         AND dep.refclassid = 'pg_catalog.pg_class'::regclass AND dep.deptype IN ('a', 'i')), '')),
    ('acl', idem_test_acl(c.relacl, 's', c.relowner))
  ) v(property, value)
UNION ALL
SELECT 'type ' || n.nspname || '.' || t.typname, v.property, v.value
  FROM pg_catalog.pg_type t JOIN ns n ON n.oid = t.typnamespace
  CROSS JOIN LATERAL (VALUES
    ('kind', t.typtype::text),
    ('acl', idem_test_acl(t.typacl, 'T', t.typowner)),
    ('labels', coalesce((SELECT pg_catalog.string_agg(e.enumlabel, ', ' ORDER BY e.enumsortorder)
       FROM pg_catalog.pg_enum e WHERE e.enumtypid = t.oid), '')),
    ('domain', CASE WHEN t.typtype = 'd' THEN pg_catalog.format_type(t.typbasetype, t.typtypmod)
       || CASE WHEN t.typnotnull THEN ' NOT NULL' ELSE '' END
       || coalesce(' DEFAULT ' || t.typdefault, '')
       || coalesce((SELECT ' ' || pg_catalog.string_agg(pg_catalog.pg_get_constraintdef(k.oid), ' ' ORDER BY k.conname)
            FROM pg_catalog.pg_constraint k WHERE k.contypid = t.oid), '') ELSE '' END)
  ) v(property, value)
 WHERE t.typtype IN ('e', 'd', 'r', 'm', 'b')
    OR (t.typtype = 'c' AND (SELECT relkind FROM pg_catalog.pg_class WHERE oid = t.typrelid) = 'c')
   AND NOT (t.typcategory = 'A' AND t.typelem <> 0)
UNION ALL
SELECT 'operator ' || n.nspname || '.' || o.oprname || '(' || coalesce(o.oprleft::regtype::text, 'NONE') || ', '
         || coalesce(o.oprright::regtype::text, 'NONE') || ')',
       'function', o.oprcode::regprocedure::text
  FROM pg_catalog.pg_operator o JOIN ns n ON n.oid = o.oprnamespace
"#;

/// An ACL as sorted `grantee:privilege[*]/grantor` items, the owner written `OWNER`, the
/// default ACL when none is stored (so an explicit copy of the default is the same).
const ACL_FUNCTION: &str = r#"
CREATE OR REPLACE FUNCTION pg_temp.idem_test_acl(acl aclitem[], kind "char", owner oid) RETURNS text
LANGUAGE sql STABLE AS $$
  SELECT coalesce(pg_catalog.string_agg(item, ',' ORDER BY item), '')
    FROM (SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' WHEN a.grantee = owner THEN 'OWNER'
                      ELSE pg_catalog.pg_get_userbyid(a.grantee) END
                 || ':' || a.privilege_type || CASE WHEN a.is_grantable THEN '*' ELSE '' END
                 || '/' || CASE WHEN a.grantor = owner THEN 'OWNER' ELSE pg_catalog.pg_get_userbyid(a.grantor) END
                 AS item
            FROM pg_catalog.aclexplode(coalesce(acl, pg_catalog.acldefault(kind, owner))) a) items
$$
"#;

type Catalog = BTreeMap<String, BTreeMap<String, String>>;

pub(crate) fn catalog(db: &mut Client) -> Catalog {
    db.batch_execute(ACL_FUNCTION).expect("the ACL helper");
    let sql = CATALOG.replace("idem_test_acl(", "pg_temp.idem_test_acl(");
    let mut out = Catalog::new();
    for row in db.query(&sql, &[]).expect("the catalog") {
        let (object, property, value): (String, String, String) =
            (row.get(0), row.get(1), row.get(2));
        out.entry(object).or_default().insert(property, value);
    }
    out
}

/// The differences between the two catalogs not excused by `exceptions`, written for a
/// reader, and the exceptions that matched nothing.
pub(crate) fn differences(
    native: &Catalog,
    portable: &Catalog,
    exceptions: &[Exception],
) -> (Vec<String>, Vec<String>) {
    let mut used = BTreeSet::new();
    let mut excused =
        |object: &str, property: Option<&str>, got: (Option<&String>, Option<&String>)| {
            let hit = exceptions.iter().position(|e| {
                let names = match e.object.strip_suffix('*') {
                    Some(prefix) => object.starts_with(prefix),
                    None => object == e.object,
                };
                let values = e.values.is_none_or(|(a, b)| {
                    got.0.map(String::as_str) == Some(a) && got.1.map(String::as_str) == Some(b)
                });
                names && e.property == property && values
            });
            hit.inspect(|&i| {
                used.insert(i);
            })
            .is_some()
        };
    let mut diff = Vec::new();
    let objects: BTreeSet<&String> = native.keys().chain(portable.keys()).collect();
    for object in objects {
        match (native.get(object), portable.get(object)) {
            (Some(_), None) if !excused(object, None, (None, None)) => {
                diff.push(format!("only native:   {object}"))
            }
            (None, Some(_)) if !excused(object, None, (None, None)) => {
                diff.push(format!("only portable: {object}"))
            }
            (Some(a), Some(b)) => {
                let properties: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
                for property in properties {
                    let (x, y) = (a.get(property), b.get(property));
                    if x != y && !excused(object, Some(property), (x, y)) {
                        let show =
                            |v: Option<&String>| v.map_or("(none)".into(), |v| format!("{v:?}"));
                        diff.push(format!(
                            "{object} {property}:\n    native:   {}\n    portable: {}",
                            show(x),
                            show(y)
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    let stale = exceptions
        .iter()
        .enumerate()
        .filter(|(i, _)| !used.contains(i))
        .map(|(_, e)| format!("{} {:?}", e.object, e.property))
        .collect();
    (diff, stale)
}

fn installed_pair(native: &str, portable: &str, script: &str) -> (Catalog, Catalog) {
    let mut n = common::cluster().database(native);
    let mut p = crate::portable::owned_database(common::bare_cluster(), portable);
    p.batch_execute(script)
        .expect("the portable edition installs");
    (catalog(&mut n), catalog(&mut p))
}

#[test]
fn the_two_editions_have_the_same_catalog_both_ways() {
    let (native, portable) =
        installed_pair("catalog_native", "catalog_portable", super::portable_sql());
    assert!(
        native.len() > 50 && portable.len() > 50,
        "{} and {} objects",
        native.len(),
        portable.len()
    );
    let (diff, stale) = differences(&native, &portable, EXCEPTIONS);
    assert!(
        diff.is_empty(),
        "the editions' catalogs differ ({} differences; an intended one goes into EXCEPTIONS and docs/managed.md):\n{}",
        diff.len(),
        diff.join("\n")
    );
    assert!(stale.is_empty(), "exceptions that match nothing: {stale:?}");
    let managed = common::repo_file("docs/managed.md");
    for e in EXCEPTIONS {
        assert!(!e.why.is_empty(), "{}: a reason", e.object);
        assert!(
            managed.contains(e.doc),
            "docs/managed.md does not state the exception {} ({:?})",
            e.object,
            e.doc
        );
    }
    // Every kind of object was listed (a query that lost one would compare nothing).
    for kind in [
        "schema", "function", "table", "view", "index", "sequence", "type",
    ] {
        assert!(
            native.keys().any(|o| o.starts_with(&format!("{kind} "))),
            "no {kind} in the native catalog"
        );
    }
}

/// The comparison sees a planted drift: one default changed in a copy of the portable script.
#[test]
fn a_changed_default_in_the_portable_script_is_a_difference() {
    let script = super::portable_sql();
    let planted = script.replacen(
        "lease pg_catalog.interval DEFAULT '30 seconds'",
        "lease pg_catalog.interval DEFAULT '31 seconds'",
        1,
    );
    assert_ne!(planted, script, "the default to change is in the script");
    let (native, portable) = installed_pair(
        "catalog_native_planted",
        "catalog_portable_planted",
        &planted,
    );
    let (diff, _) = differences(&native, &portable, EXCEPTIONS);
    assert!(
        diff.iter()
            .any(|d| d.contains("arguments") && d.contains("'00:00:31'")),
        "{diff:#?}"
    );
}

/// `scripts/portable.sh --update` over an install whose functions drifted (here the
/// strictness of `idem_metrics()` and `idem_version()`, not STRICT before this release; a grant
/// its REVOKE takes back; a function an earlier release lacked, idem_claim's RLS probe) brings
/// the catalog back to the native one.
#[test]
fn the_update_brings_a_drifted_install_to_the_same_catalog() {
    let native = catalog(&mut common::cluster().database("catalog_native_upd"));
    let mut p = crate::portable::install("catalog_portable_upd");
    p.batch_execute(
        "ALTER FUNCTION public.idem_metrics() CALLED ON NULL INPUT; \
         ALTER FUNCTION public.idem_version() CALLED ON NULL INPUT; \
         GRANT EXECUTE ON FUNCTION public.idem_metrics() TO PUBLIC; \
         DROP FUNCTION idempotency.claim_policy_probe(text, text, text, text)",
    )
    .expect("drift");
    let (diff, _) = differences(&native, &catalog(&mut p), EXCEPTIONS);
    assert!(diff.len() >= 4, "{diff:#?}");
    p.batch_execute(&common::portable_script(&["--update"]))
        .expect("the update");
    let (diff, stale) = differences(&native, &catalog(&mut p), EXCEPTIONS);
    assert!(diff.is_empty() && stale.is_empty(), "{diff:#?} {stale:?}");
}
