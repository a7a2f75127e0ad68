#!/usr/bin/env bash
# The portable edition of idempotency (SQL and PL/pgSQL only, for managed Postgres), written to
# standard output. docs/managed.md says which route fits which host.
#
#   scripts/portable.sh [--schema NAME] > idempotency-portable.sql   # plain: psql -f, as the database owner
#   scripts/portable.sh --pg-tle > idempotency-pg-tle.sql             # pg_tle: then CREATE EXTENSION idempotency
#   scripts/portable.sh [--schema NAME] --update > update.sql          # plain: a later release over an earlier one
#   scripts/portable.sh [--schema NAME] --move-up > move-up.sql        # plain -> native, in place (a superuser)
#   scripts/portable.sh --pure > pure.sql                              # only idem_canonical, idem_hash, idem_lock_key
#                                                                        (benchmarks, tests), in schema idempotency
#   scripts/portable.sh --dbdev DIR [--from VERSION]...               # database.dev's layout in DIR (pg_tle)
#
# One SQL source: the native extension's own files in sql/, declarations included, where each
# LANGUAGE c function gets its portable body (SQL or PL/pgSQL) from portable/, whose files
# hold those bodies and the portable edition's own helpers. --schema (plain
# only) is where the functions and types go, as CREATE EXTENSION's schema would be (default
# public); the tables are always in schema idempotency.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=plain schema=public dbdev_dir= from=()
while [ $# -gt 0 ]; do
    case $1 in
        --pg-tle) mode=pg_tle ;;
        --dbdev) mode=dbdev dbdev_dir=${2:?--dbdev needs a directory}; shift ;;
        --from) from+=("${2:?--from needs a version}"); shift ;;
        --move-up) mode=move_up ;;
        --update) mode=update ;;
        --pure) mode=pure ;;
        --schema) schema=${2:?--schema needs a name}; shift ;;
        -h|--help) sed -n 2,17p "$0"; exit 0 ;;
        *) echo "portable.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
if ! [[ $schema =~ ^[a-z_][a-z0-9_]*$ ]] || [ "$schema" = idempotency ]; then
    echo "portable.sh: --schema must be a plain lower-case name other than idempotency" >&2
    exit 2
fi
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -1)
# A CR would hide a body's closing line from the awk below.
if crlf=$(grep -l $'\r' "$root"/sql/*.sql "$root"/portable/*.sql); then
    echo "portable.sh: carriage returns in $crlf" >&2
    exit 1
fi
[ ${#from[@]} -eq 0 ] || [ "$mode" = dbdev ] || { echo "portable.sh: --from goes with --dbdev" >&2; exit 2; }

# A portable file as the edition includes it: canonical.sql and lock_key.sql put their functions
# where the others go, helpers too (the native idem_hash needs no USAGE on schema idempotency,
# so the portable one must not either).
part() {
    case $1 in
        portable/canonical.sql | portable/canonical_lists.sql | portable/lock_key.sql) sed 's/\bidempotency\.\(_\?idem_\)/@extschema@.\1/g' "$root/$1" ;;
        *) cat "$root/$1" ;;
    esac
}

# The bodies of portable/*.sql: `BODY <symbol> LANGUAGE <lang> [SET ...] AS $fn$` through `$fn$;`,
# where <symbol> is the C symbol of the native declaration in sql/ the body goes into.
bodies() { for f in "$root"/portable/*.sql; do part "portable/${f##*/}"; done; }

# A portable file without its bodies and the comments just above them (native() puts the
# bodies into the declarations).
helpers() {
    part "$1" | awk '
        inbody && /^(BODY|CREATE FUNCTION) / { print "portable.sh: a BODY has no closing " tag ";" > "/dev/stderr"; exit 1 }
        inbody { if ($0 == tag ";") inbody = 0; next }
        /^BODY / { tag = $NF; inbody = 1; said = ""; next }
        /^--/ { said = said $0 "\n"; next }
        { printf "%s", said; said = ""; print }
        END { printf "%s", said; if (inbody) { print "portable.sh: a BODY has no closing " tag ";" > "/dev/stderr"; exit 1 } }'
}

# A native file as the portable edition has it: each LANGUAGE c declaration with its C symbol
# replaced by that symbol's portable body (LANGUAGE and SET from the BODY line, all else the
# native declaration's: one declaration for both editions), and in the plain script without
# pg_extension_config_dump, which only an extension script may call. With `functions`, only
# its functions and their COMMENT, GRANT and REVOKE statements (what the update replaces).
native() {
    awk -v plain="$([ "$mode" = plain ] && echo 1)" -v only="${2:-}" '
        function fail(why) { print "portable.sh: " why > "/dev/stderr"; failed = 1; exit 1 }
        # The dollar quotes a line opens and closes: inq is the open one ("" outside).
        function quotes(line,   t) {
            while (match(line, /\$[A-Za-z_]*\$/)) {
                t = substr(line, RSTART, RLENGTH)
                if (inq == "") inq = t; else if (t == inq) inq = ""
                line = substr(line, RSTART + RLENGTH)
            }
        }
        FNR == 1 && NR > 1 && inbody { fail("BODY " sym " has no closing " tag ";") }
        FNR == NR {
            if (inbody && $0 ~ /^(BODY|CREATE FUNCTION) /) fail("BODY " sym " has no closing " tag ";")
            if (inbody) { if ($0 == tag ";") inbody = 0; else body[sym] = body[sym] $0 "\n"; next }
            if ($0 ~ /^BODY /) {
                sym = $2; tag = $NF; inbody = 1; body[sym] = ""; quote[sym] = tag
                attrs = $0; sub(/^BODY [^ ]+ /, "", attrs); sub(/ AS [^ ]+$/, "", attrs)
                lang[sym] = attrs; sub(/ SET .*$/, "", lang[sym])
                set[sym] = attrs; if (!sub(/^LANGUAGE [^ ]+ /, "", set[sym])) set[sym] = ""
            }
            next
        }
        /^CREATE FUNCTION / { inblock = 1; buf = ""; inq = "" }
        inblock {
            buf = buf $0 "\n"
            if (inq == "" && $0 ~ /^AS .MODULE_PATHNAME., .[a-z0-9_]+.;$/) {
                s = $0; sub(/^AS .MODULE_PATHNAME., ./, "", s); sub(/.;$/, "", s)
                if (!(s in body)) fail("no BODY " s " in portable/")
                sub(/AS .MODULE_PATHNAME.*$/, "", buf)
                if (buf ~ /LANGUAGE c /) sub(/LANGUAGE c /, lang[s] " ", buf); else sub(/LANGUAGE c\n/, lang[s] "\n", buf)
                printf "%s", buf
                if (set[s] != "") print set[s]
                printf "AS %s\n%s%s;\n", quote[s], body[s], quote[s]
                inblock = 0; next
            }
            quotes($0)
            if (inq == "" && $0 ~ /;[[:space:]]*$/) {
                if (buf ~ /LANGUAGE c[ \n]/) fail("a C declaration ends AS MODULE_PATHNAME and its symbol")
                printf "%s", buf; inblock = 0
            }
            next
        }
        only && /^(COMMENT ON|GRANT|REVOKE) .*FUNCTION / { ingrant = 1; buf = "" }
        ingrant { buf = buf $0 "\n"; if ($0 ~ /;[[:space:]]*$/) { printf "%s", buf; ingrant = 0 }; next }
        only { next }
        plain && /pg_extension_config_dump/ { next }
        { print }
        END { if (!failed && inblock) fail("a CREATE FUNCTION without its end in " FILENAME) }
    ' <(bodies) "$1"
}

edition() {
    echo "-- idempotency $version, portable edition (SQL and PL/pgSQL): generated by scripts/portable.sh"
    # A portable file before the native one its bodies go into: a LANGUAGE sql body is checked
    # when it is created, so the helpers it calls must exist by then.
    for part in sql/bootstrap.sql sql/consumers.sql portable/common.sql portable/claim.sql portable/finish.sql sql/claim.sql \
                portable/canonical.sql portable/canonical_lists.sql portable/lock_key.sql sql/canonical.sql portable/call.sql sql/call.sql sql/http.sql portable/consumers.sql \
                sql/inbox.sql sql/outbox.sql sql/cdc.sql portable/cdc.sql sql/cdc_sign.sql sql/layout.sql sql/rotate.sql \
                portable/layout.sql sql/maintenance.sql sql/metrics.sql portable/upkeep.sql sql/citus.sql sql/grants.sql; do
        include "$part"
    done | sed "s/@PORTABLE_VERSION@/$version/g"
}

# One part: a native file (`:functions`: only its functions, their COMMENT, GRANT and REVOKE
# statements), or a portable file's helpers.
include() {
    local file=${1%:*} only=
    [ "$file" = "$1" ] || only=functions
    [ -f "$root/$file" ] || { echo "portable.sh: $file is missing" >&2; exit 1; }
    echo
    echo "-- $file"
    case $file in
        sql/*) native "$root/$file" $only ;;
        *) helpers "$file" ;;
    esac
}

# The update from an earlier portable release (--update, and pg_tle's update paths): it keeps
# the tables and replaces every function (CREATE OR REPLACE). A release may add functions; one
# that changes a table needs an update block of its own here.
refresh() {
    for part in portable/common.sql portable/claim.sql portable/finish.sql sql/claim.sql:functions portable/canonical.sql portable/canonical_lists.sql \
                portable/lock_key.sql sql/canonical.sql:functions portable/call.sql sql/call.sql:functions sql/http.sql portable/consumers.sql \
                sql/inbox.sql:functions sql/outbox.sql:functions portable/cdc_update.sql portable/cdc.sql sql/cdc_sign.sql \
                sql/layout.sql sql/rotate.sql portable/layout.sql sql/maintenance.sql:functions sql/metrics.sql:functions \
                portable/upkeep.sql sql/citus.sql sql/grants.sql; do
        include "$part"
    done | sed -e "s/@PORTABLE_VERSION@/$version/g" -e 's/^CREATE FUNCTION /CREATE OR REPLACE FUNCTION /'
}
if [ "$mode" = pure ]; then
    echo "SET search_path = pg_catalog, pg_temp;"
    for part in portable/canonical.sql portable/canonical_lists.sql portable/lock_key.sql sql/canonical.sql; do include "$part"; done |
        sed "s/@extschema@/idempotency/g"
    echo
    echo "RESET search_path;"
    exit 0
fi

if [ "$mode" = update ]; then
    echo "-- Run as the owner of the portable edition: psql -v ON_ERROR_STOP=1 -1 -f this-file"
    echo "SET search_path = pg_catalog, pg_temp;"
    refresh | sed "s/@extschema@/$schema/g"
    echo
    echo "RESET search_path;"
    exit 0
fi

if [ "$mode" = move_up ]; then
    # Every function the edition creates in the functions' schema, by name.
    names=$(edition | sed -n 's/^CREATE FUNCTION @extschema@\.\([a-z_]*\)(.*/\1/p' | sort -u | paste -sd, -)
    sed -e "s/@extschema@/$schema/g" -e "s/@NAMES@/$names/" "$root/portable/move-up.sql"
    exit 0
fi

# database.dev publishes a directory of a pg_tle extension: its control file, its install
# script (the pg_tle body: CREATE EXTENSION fills in @extschema@), an update script from each
# earlier release published there (--from), and README.md. dbdev installs it with
# pgtle.install_extension and pgtle.install_update_path (docs/managed.md).
if [ "$mode" = dbdev ]; then
    for v in "${from[@]}"; do
        [[ $v =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] && [ "$v" != "$version" ] ||
            { echo "portable.sh: --from $v is not an earlier major.minor.patch version" >&2; exit 2; }
    done
    mkdir -p "$dbdev_dir"
    cat >"$dbdev_dir/idempotency.control" <<CONTROL
# idempotency, portable edition (SQL and PL/pgSQL), for pg_tle: scripts/portable.sh --dbdev
comment = 'Exactly-once-ish effects: idempotency keys with replay, canonical request hashing, inbox and outbox (portable edition)'
default_version = '$version'
relocatable = false
CONTROL
    edition >"$dbdev_dir/idempotency--$version.sql"
    for v in "${from[@]}"; do refresh >"$dbdev_dir/idempotency--$v--$version.sql"; done
    cat >"$dbdev_dir/README.md" <<README
# idempotency $version, portable edition

Idempotency keys with replay, RFC 8785 canonical request hashing, an inbox and an outbox, in
SQL and PL/pgSQL only: the API of the native \`idempotency\` extension for hosts that load no C
library. Install it through pg_tle, then:

\`\`\`sql
CREATE EXTENSION idempotency;
SELECT * FROM idem_claim('payments', 'order-42', idem_hash('{"amount": 10}'::jsonb));
\`\`\`

What differs from the native extension, the upkeep with pg_cron, and how to move up:
docs/managed.md in the project's repository.
README
    exit 0
fi

if [ "$mode" = plain ]; then
    echo "-- Run as the database owner: psql -v ON_ERROR_STOP=1 -1 -f this-file"
    echo "SET client_min_messages = warning;"
    echo "SET search_path = pg_catalog, pg_temp;"
    [ "$schema" = public ] || echo "CREATE SCHEMA IF NOT EXISTS $schema;"
    # Whoever owns the schema can replace what goes in it: refused unless that is the
    # installing role, or pg_database_owner (public, from Postgres 15) in a database the
    # installing role owns, or a superuser (public before Postgres 15).
    cat <<SQL
DO \$own\$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_namespace AS n JOIN pg_catalog.pg_roles AS r ON r.oid OPERATOR(pg_catalog.=) n.nspowner
                    WHERE n.nspname OPERATOR(pg_catalog.=) '$schema'::pg_catalog.name
                      AND (r.rolname OPERATOR(pg_catalog.=) CURRENT_USER OR r.rolsuper
                           OR (r.rolname OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.name
                               AND EXISTS (SELECT FROM pg_catalog.pg_database AS d
                                            WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()
                                              AND d.datdba OPERATOR(pg_catalog.=) (SELECT u.oid FROM pg_catalog.pg_roles AS u
                                                                                  WHERE u.rolname OPERATOR(pg_catalog.=) CURRENT_USER))))) THEN
        RAISE EXCEPTION USING ERRCODE = '42501',
            MESSAGE = 'schema $schema is owned by another role, which could replace the functions installed there',
            HINT = 'Install into a schema the installing role owns (--schema), or have its owner drop it.';
    END IF;
END
\$own\$;
SQL
    edition | sed "s/@extschema@/$schema/g"
    echo
    echo "RESET search_path;"
    echo "RESET client_min_messages;"
    exit 0
fi

# pg_tle: register this version (the same script as the plain one, run by CREATE EXTENSION),
# and an update path to it from every version pg_tle already has, so that a database on an
# older portable release moves to this one with ALTER EXTENSION idempotency UPDATE.
tag='$_idem_portable_$'
cat <<SQL
-- Run as a role with pgtle_admin, then: CREATE EXTENSION idempotency;
-- (or, where an older version is installed: ALTER EXTENSION idempotency UPDATE;)
SET search_path = pg_catalog, pg_temp;
CREATE TEMPORARY TABLE idem_pg_tle_sql (part pg_catalog.text PRIMARY KEY, body pg_catalog.text NOT NULL);
INSERT INTO idem_pg_tle_sql VALUES ('install', $tag
$(edition)
$tag);
INSERT INTO idem_pg_tle_sql VALUES ('update', $tag
$(refresh)
$tag);
DO \$tle\$
DECLARE
    install constant pg_catalog.text := (SELECT body FROM idem_pg_tle_sql WHERE part OPERATOR(pg_catalog.=) 'install');
    update_ constant pg_catalog.text := (SELECT body FROM idem_pg_tle_sql WHERE part OPERATOR(pg_catalog.=) 'update');
    old pg_catalog.text;
BEGIN
    IF NOT EXISTS (SELECT FROM pgtle.available_extensions() AS e WHERE e.name OPERATOR(pg_catalog.=) 'idempotency') THEN
        PERFORM pgtle.install_extension('idempotency', '$version',
            'Exactly-once-ish effects: idempotency keys with replay, canonical request hashing, inbox and outbox (portable edition)',
            install, '{}'::pg_catalog.text[]);
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT FROM pgtle.available_extension_versions() AS v
                   WHERE v.name OPERATOR(pg_catalog.=) 'idempotency' AND v.version OPERATOR(pg_catalog.=) '$version') THEN
        PERFORM pgtle.install_extension_version_sql('idempotency', '$version', install);
    END IF;
    FOR old IN SELECT v.version FROM pgtle.available_extension_versions() AS v
                WHERE v.name OPERATOR(pg_catalog.=) 'idempotency' AND v.version OPERATOR(pg_catalog.<>) '$version' LOOP
        PERFORM pgtle.uninstall_update_path_if_exists('idempotency', old, '$version');
        PERFORM pgtle.install_update_path('idempotency', old, '$version', update_);
    END LOOP;
    PERFORM pgtle.set_default_version('idempotency', '$version');
END
\$tle\$;
DROP TABLE idem_pg_tle_sql;
RESET search_path;
SQL
