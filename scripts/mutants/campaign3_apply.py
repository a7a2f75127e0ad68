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
   "LEAST(retention, '100 years'::pg_catalog.interval)) \\",
   "retention) \\")],
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
