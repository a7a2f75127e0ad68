import sys
# name -> list of (file, old, new); each old must occur exactly once in its file
M = {
 "M1": [("src/entry/metrics.rs",
   ".insert((u32::from(database), u32::from(table)))",
   ".insert((u32::from(database), 0))")],
 "M2": [("src/entry/inbox.rs",
   "    let conn = Conn::open_for(c\"inbox\")?;\n",
   "    let conn = Conn::open()?;\n")],
 "M3": [(f, "OPERATOR(pg_catalog.~) '[\\r\\n\\x00]'::pg_catalog.text;",
            "OPERATOR(pg_catalog.~) '[\\n\\x00]'::pg_catalog.text;")
        for f in ("sql/http.sql", "sql/idempotency--0.1.0--0.2.0.sql")],
 "M4": [("src/entry/maintenance.rs",
   "LEAST(retention, '100 years'::pg_catalog.interval))\",",
   "retention)\",")],
 "M5": [(f, "code OPERATOR(pg_catalog.<) 100::pg_catalog.numeric",
            "code OPERATOR(pg_catalog.<) 0::pg_catalog.numeric")
        for f in ("sql/http.sql", "sql/idempotency--0.1.0--0.2.0.sql")],
 "M6": [("src/entry/as_owner.rs",
   "                || extension != pg_sys::InvalidOid\n",
   "                && extension != pg_sys::InvalidOid\n")],
 "M7": [(f, "HAVING pg_catalog.bool_and(k.granted)", "HAVING pg_catalog.bool_or(k.granted)")
        for f in ("sql/grants.sql", "sql/idempotency--0.1.0--0.2.0.sql")],
 "M8": [("src/entry/canonical.rs", "    drop(fields);\n", "    // drop(fields);\n")],
 # Campaign 3, second writer: M9-M20 (written blind to the tests).
 "M9": [(f, "WHERE c.oid OPERATOR(pg_catalog.=) a.object::pg_catalog.regclass::pg_catalog.oid\n"
            "                      AND e.grantee OPERATOR(pg_catalog.=) role::pg_catalog.oid\n",
            "WHERE c.oid OPERATOR(pg_catalog.=) a.object::pg_catalog.regclass::pg_catalog.oid\n")
        for f in ("sql/grants.sql", "sql/idempotency--0.1.0--0.2.0.sql")],
 "M10": [(f, "IF code OPERATOR(pg_catalog.<) 400 THEN", "IF code OPERATOR(pg_catalog.<=) 400 THEN")
         for f in ("sql/http.sql", "sql/idempotency--0.1.0--0.2.0.sql")],
 "M11": [(f, "                   OR hname OPERATOR(pg_catalog.=) ANY (never)\n"
             "                   OR pg_catalog.jsonb_typeof(header.value)",
             "                   OR pg_catalog.jsonb_typeof(header.value)")
         for f in ("sql/http.sql", "sql/idempotency--0.1.0--0.2.0.sql")],
 "M12": [(f, "EXCEPTION WHEN check_violation THEN",
             "EXCEPTION WHEN check_violation OR insufficient_privilege THEN")
         for f in ("sql/claim.sql", "sql/idempotency--0.1.0--0.2.0.sql")],
 "M13": [("crates/idem-protocol/src/claim.rs",
   "    if row.status != Status::Processing && row.expires_at < now {\n",
   "    if row.expires_at < now {\n")],
 "M14": [("crates/idem-protocol/src/transition.rs",
   "expires_at: s.expires_at.max(R::add(clock.txn, s.retention)?),",
   "expires_at: s.expires_at.min(R::add(clock.txn, s.retention)?),")],
 "M15": [("src/direct/catalog.rs",
   "        crate::base::access::require_some_table_privilege(table)?;\n",
   "")],
 "M16": [("src/spi/record_sql.rs",
   "    if !crate::base::access::row_security_applies_to_requests() {",
   "    if crate::base::access::row_security_applies_to_requests() {")],
 "M17": [("src/entry/as_owner.rs",
   "} else if trigger.tgnargs > 0 {",
   "} else if trigger.tgnargs > 1 {")],
 "M18": [("src/entry/maintenance_worker.rs",
   "        c\"idem_inbox_purge\",\n        c\"inbox\",\n",
   "        c\"idem_inbox_purge\",\n        c\"outbox\",\n")],
 "M19": [("src/entry/outbox.rs",
   "i64::from(settings::OUTBOX_RETENTION.get()) * 1_000_000;",
   "i64::from(settings::OUTBOX_RETENTION.get()) * 1_000;")],
 "M20": [("crates/idem-canonical/src/text/parse.rs",
   "Some(low @ 0xDC00..=0xDFFF) =>",
   "Some(low @ 0xDC00..0xDFFF) =>")],
 # Campaign 4: the generations layout (issue #24; docs/mutants.md, "Campaign 4").
 # M21 was "the direct path reads a table with generations (only its own index)" while the
 # direct path declined that table; since it reads them, M21 drops the generations' probes.
 "M21": [("src/direct/lookup.rs",
   "        if let Some(g) = &catalog.generations {\n            for (table, index)",
   "        if let Some(g) = catalog.generations.as_ref().filter(|_| false) {\n            for (table, index)")],
 "M22": [("src/spi/record_sql.rs",
   "        Some(g @ 0..=3) => Ok(g as usize),",
   "        Some(0..=3) => Ok(0),")],
 "M23": [(f, "    IF left_ THEN\n        RETURN 'moved 0';",
             "    IF false THEN\n        RETURN 'moved 0';")
         for f in ("sql/rotate.sql", "sql/idempotency--0.1.0--0.2.0.sql")],
 "M24": [(f, "'SELECT r.scope, r.key FROM %1$s AS r WHERE r.status OPERATOR(pg_catalog.=) $1 '\n"
             "        'UNION ALL SELECT",
             "'SELECT r.scope, r.key FROM %1$s AS r WHERE false '\n        'UNION ALL SELECT")
         for f in ("sql/rotate.sql", "sql/idempotency--0.1.0--0.2.0.sql")],
 "M25": [(f, "       AND idempotency.layout_truncated_since_snapshot() THEN", "       AND false THEN")
         for f in ("sql/layout.sql", "sql/idempotency--0.1.0--0.2.0.sql")],
 "M26": [(f, "    -- Policies or triggers added after the switch would not apply to an insert into a\n"
             "    -- generation by name: refused rather than bypassed.\n"
             "    PERFORM idempotency.layout_refuse(idempotency.layout_refusal(true));\n", "")
         for f in ("sql/layout.sql", "sql/idempotency--0.1.0--0.2.0.sql")],
 "M27": [(f, "'WHERE r.status OPERATOR(pg_catalog.=) $1 OR r.expires_at OPERATOR(pg_catalog.>=) pg_catalog.now()',",
             "'WHERE $1 IS NULL OR r.expires_at OPERATOR(pg_catalog.>=) pg_catalog.now()',")
         for f in ("sql/layout.sql", "sql/idempotency--0.1.0--0.2.0.sql")],
 # The direct path in the generations layout (src/direct/generations.rs and its callers).
 "M29": [("src/direct/lookup.rs",
   "                Some(g.tables[current - 1])",
   "                Some(self.catalog.table).filter(|_| current > 0 && g.layout != pg_sys::InvalidOid)")],
 "M30": [("src/direct/writer.rs",
   "            may(table) && (table == catalog.table || may(catalog.table))",
   "            may(table)")],
 "M31": [("src/direct/generations.rs",
   "            out.writable &= own.writable && !secured && !other_unique(*heap);",
   "            out.writable &= !secured && !other_unique(*heap);")],
 "M41": [("src/direct/generations.rs",
   "            out.writable &= own.writable && !secured && !other_unique(*heap);",
   "            out.writable &= own.writable && !secured;")],
 "M42": [(f, "                    AND (x.indisunique OR x.indisexclusion) AND NOT x.indisprimary)",
             "                    AND false)")
         for f in ("sql/layout.sql", "sql/idempotency--0.1.0--0.2.0.sql")],
 "M32": [("src/direct/generations.rs",
   "            && children == expected;",
   "            && children.len() >= expected.len();")],
 "M33": [("src/direct/catalog.rs",
   "                        keep = false;\n",
   "")],
 "M34": [("src/direct/generations.rs",
   "        unsafe { pg_sys::LockRelationOid(table, lockmode as pg_sys::LOCKMODE) };",
   "        let _ = (table, lockmode);")],
 # Session 11: the generations' grants and the upkeep through the table.
 "M35": [(f, "    PERFORM idempotency.layout_sync_grants();\n    IF NOT force AND",
             "    IF NOT force AND")
         for f in ("sql/rotate.sql", "sql/idempotency--0.1.0--0.2.0.sql")],
 "M36": [(f, "'GRANT INSERT ON %s TO %s'", "'GRANT INSERT, SELECT ON %s TO %s'")
         for f in ("sql/rotate.sql", "sql/idempotency--0.1.0--0.2.0.sql")],
 "M37": [("portable/upkeep.sql",
   "    IF pg_catalog.to_regclass('idempotency.layout'::pg_catalog.text) IS NULL THEN\n        RETURN ARRAY['ONLY",
   "    IF true THEN\n        RETURN ARRAY['ONLY")],
 "M39": [(f, "    WHEN idempotency.layout_on_citus()\n", "    WHEN false\n")
         for f in ("sql/layout.sql", "sql/idempotency--0.1.0--0.2.0.sql")],
 "M40": [("src/direct/rules.rs",
   "            !unsafe { crate::direct::generations::on_citus(catalog.table, &g) }",
   "            !unsafe { crate::direct::generations::on_citus(catalog.table, &g) } || true")],
 "M43": [(f, "                  WHERE k.contype OPERATOR(pg_catalog.=) 'f'::pg_catalog.\"char\"\n",
             "                  WHERE false AND k.contype OPERATOR(pg_catalog.=) 'f'::pg_catalog.\"char\"\n")
         for f in ("sql/layout.sql", "sql/idempotency--0.1.0--0.2.0.sql")],
 "M38": [("src/entry/maintenance.rs",
   "    Ok(pair[GENERATIONS].run(conn, &args)?.len() as i64)",
   "    Ok(pair[FLAT].run(conn, &args)?.len() as i64)")],
 "M28": [(f, "    END LOOP;\n    -- The generations of idempotency.requests (sql/layout.sql) carry its grants.\n"
             "    PERFORM idempotency.layout_sync_grants();\n",
             "    END LOOP;\n")
         for f in ("sql/grants.sql", "sql/idempotency--0.1.0--0.2.0.sql")],
}
check = sys.argv[1] == "--check"
names = (sys.argv[2:] or list(M)) if check else sys.argv[1:]
for n in names:
    for f, old, new in M[n]:
        t = open(f).read()
        c = t.count(old)
        if c != 1:
            sys.exit(f"{n}: {f}: {c} matches")
        if not check:
            open(f, "w").write(t.replace(old, new))
    print(n, "ok")
