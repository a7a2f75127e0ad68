import sys
# name -> list of (file, old, new); each old must occur exactly once in its file
M = {
 "M1": [("src/metrics.rs",
   ".insert((u32::from(database), u32::from(table)))",
   ".insert((u32::from(database), 0))")],
 "M2": [("src/inbox.rs",
   "    let conn = Conn::open_for(c\"inbox\")?;\n",
   "    let conn = Conn::open()?;\n")],
 "M3": [(f, "OPERATOR(pg_catalog.~) '[\\r\\n\\x00]'::pg_catalog.text;",
            "OPERATOR(pg_catalog.~) '[\\n\\x00]'::pg_catalog.text;")
        for f in ("sql/http.sql", "sql/idempotency--0.1.0--0.2.0.sql")],
 "M4": [("src/maintenance.rs",
   "LEAST(retention, '100 years'::pg_catalog.interval)) \\",
   "retention) \\")],
 "M5": [(f, "code OPERATOR(pg_catalog.<) 100::pg_catalog.numeric",
            "code OPERATOR(pg_catalog.<) 0::pg_catalog.numeric")
        for f in ("sql/http.sql", "sql/idempotency--0.1.0--0.2.0.sql")],
 "M6": [("src/as_owner.rs",
   "                || extension != pg_sys::InvalidOid\n",
   "                && extension != pg_sys::InvalidOid\n")],
 "M7": [(f, "HAVING pg_catalog.bool_and(k.granted)", "HAVING pg_catalog.bool_or(k.granted)")
        for f in ("sql/grants.sql", "sql/idempotency--0.1.0--0.2.0.sql")],
 "M8": [("src/canonical.rs", "    drop(fields);\n", "    // drop(fields);\n")],
}
check = sys.argv[1] == "--check"
names = list(M) if check else sys.argv[1:]
for n in names:
    for f, old, new in M[n]:
        t = open(f).read()
        c = t.count(old)
        if c != 1:
            sys.exit(f"{n}: {f}: {c} matches")
        if not check:
            open(f, "w").write(t.replace(old, new))
    print(n, "ok")
