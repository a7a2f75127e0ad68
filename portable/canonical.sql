-- The portable edition's pure functions, in SQL and PL/pgSQL only: idem_canonical and idem_hash
-- (RFC 8785 + SHA-256), with the native extension's names, signatures, results, SQLSTATEs and
-- messages (idem_lock_key: portable/lock_key.sql). Included by scripts/portable.sh; the objects
-- go into schema idempotency. How it works and what differs: docs/portable-canonical.md.
--
-- Every function runs with search_path = pg_catalog, pg_temp and names every operator,
-- function, type and collation with its schema, so that look-alikes a caller plants on the
-- search_path are never run. The helpers named _idem_jcs_* are not API. All are PL/pgSQL, even
-- one-liners: PL/pgSQL keeps its plans for the session, while before Postgres 18 a SQL function
-- that has a SET clause is planned again by every statement that calls it (~1 ms here).

-- A number that is not a short decimal: the nearest double (the numeric -> float8 cast is
-- strtod, correctly rounded) in the shortest digits that read back (float8out with
-- extra_float_digits > 0, PG 12+), laid out as ECMAScript's Number.prototype.toString.
-- `spelling` is the number as the error message quotes it (NULL: jsonb's base-10000 form;
-- '': that form, deferred: a number beyond the doubles is returned between two U+0004, so that
-- idem_canonical raises for the first in output order, as native does, whatever order its
-- statements evaluate tokens in).
CREATE FUNCTION idempotency._idem_jcs_number(value pg_catalog.numeric, spelling pg_catalog.text)
RETURNS pg_catalog.text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET extra_float_digits = 1
AS $fn$
DECLARE
    magnitude pg_catalog.numeric := pg_catalog.abs(value);
    shortest pg_catalog.text;
    mantissa pg_catalog.text;
    whole pg_catalog.text;
    digits pg_catalog.text;
    point pg_catalog.int4;  -- digits before the decimal point: value = 0.digits x 10^point
    k pg_catalog.int4;
    e pg_catalog.int4;
    groups pg_catalog.text;
    zeros pg_catalog.int4;
    weight pg_catalog.int4;
    bound pg_catalog.int4;
BEGIN
    -- strtod returns 0 or HUGE_VAL with ERANGE and float8in refuses both: below 1e-300 a
    -- refusal means "rounds to zero" (as in ECMAScript), above 1e300 "beyond the doubles".
    IF magnitude OPERATOR(pg_catalog.<) 1e-300::pg_catalog.numeric
       OR magnitude OPERATOR(pg_catalog.>) 1e300::pg_catalog.numeric THEN
        BEGIN
            shortest := value::pg_catalog.float8::pg_catalog.text;
        EXCEPTION WHEN numeric_value_out_of_range THEN
            IF magnitude OPERATOR(pg_catalog.<) 1::pg_catalog.numeric THEN
                RETURN '0'::pg_catalog.text;
            END IF;
            IF spelling OPERATOR(pg_catalog.=) ''::pg_catalog.text THEN
                RETURN pg_catalog.chr(4) OPERATOR(pg_catalog.||) value::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.chr(4);
            END IF;
            IF spelling IS NULL THEN
                -- The native message quotes jsonb's numeric as its base-10000 digit groups:
                -- the first group without leading zeros, then 4-digit groups, then e<exp10>.
                -- (OPERATOR(...) forms all bind alike, left to right: hence the parentheses.)
                whole := pg_catalog.split_part(magnitude::pg_catalog.text, '.'::pg_catalog.text, 1);
                groups := pg_catalog.split_part(magnitude::pg_catalog.text, '.'::pg_catalog.text, 2);
                weight := (pg_catalog.length(whole) OPERATOR(pg_catalog.+) 3) OPERATOR(pg_catalog./) 4;
                groups := pg_catalog.lpad(whole, weight OPERATOR(pg_catalog.*) 4, '0'::pg_catalog.text)
                    OPERATOR(pg_catalog.||) pg_catalog.rpad(groups,
                        ((pg_catalog.length(groups) OPERATOR(pg_catalog.+) 3) OPERATOR(pg_catalog./) 4) OPERATOR(pg_catalog.*) 4,
                        '0'::pg_catalog.text);
                zeros := (pg_catalog.length(groups) OPERATOR(pg_catalog.-) pg_catalog.length(pg_catalog.rtrim(groups, '0'::pg_catalog.text))) OPERATOR(pg_catalog./) 4;
                groups := pg_catalog.left(groups, pg_catalog.length(groups) OPERATOR(pg_catalog.-) (zeros OPERATOR(pg_catalog.*) 4));
                spelling := CASE WHEN value OPERATOR(pg_catalog.<) 0::pg_catalog.numeric THEN '-'::pg_catalog.text ELSE ''::pg_catalog.text END
                    OPERATOR(pg_catalog.||) pg_catalog.ltrim(pg_catalog.left(groups, 4), '0'::pg_catalog.text)
                    OPERATOR(pg_catalog.||) pg_catalog.substr(groups, 5)
                    OPERATOR(pg_catalog.||) 'e'::pg_catalog.text
                    OPERATOR(pg_catalog.||) (4 OPERATOR(pg_catalog.*) (weight OPERATOR(pg_catalog.-) (pg_catalog.length(groups) OPERATOR(pg_catalog./) 4)))::pg_catalog.text;
            END IF;
            IF pg_catalog.octet_length(spelling) OPERATOR(pg_catalog.>) 64 THEN
                spelling := pg_catalog.left(spelling, 64) OPERATOR(pg_catalog.||) '...'::pg_catalog.text;
            END IF;
            RAISE EXCEPTION 'JSON number % is out of range for an IEEE 754 double', spelling
                USING ERRCODE = '22003',
                      HINT = 'RFC 8785 numbers are IEEE 754 doubles; send such values as strings.';
        END;
    ELSE
        shortest := value::pg_catalog.float8::pg_catalog.text;
    END IF;
    -- float8out: [-]d[.ddd][e±xx]
    mantissa := pg_catalog.split_part(pg_catalog.ltrim(shortest, '-'::pg_catalog.text), 'e'::pg_catalog.text, 1);
    whole := pg_catalog.split_part(mantissa, '.'::pg_catalog.text, 1);
    digits := whole OPERATOR(pg_catalog.||) pg_catalog.split_part(mantissa, '.'::pg_catalog.text, 2);
    point := pg_catalog.length(whole)
        OPERATOR(pg_catalog.-) (pg_catalog.length(digits) OPERATOR(pg_catalog.-) pg_catalog.length(pg_catalog.ltrim(digits, '0'::pg_catalog.text)))
        OPERATOR(pg_catalog.+) CASE WHEN pg_catalog.strpos(shortest, 'e'::pg_catalog.text) OPERATOR(pg_catalog.=) 0 THEN 0
             ELSE pg_catalog.split_part(shortest, 'e'::pg_catalog.text, 2)::pg_catalog.int4 END;
    digits := pg_catalog.rtrim(pg_catalog.ltrim(digits, '0'::pg_catalog.text), '0'::pg_catalog.text);
    k := pg_catalog.length(digits);
    IF k OPERATOR(pg_catalog.=) 0 THEN
        RETURN '0'::pg_catalog.text;  -- also -0
    END IF;
    -- Postgres' Ryu leaves out the bounds of the rounding interval (decimals exactly halfway
    -- between two doubles), ECMAScript takes them (they read back by round-half-even): one of
    -- them is shorter only if it is D cut to k-1 digits, or that plus one unit.
    IF k OPERATOR(pg_catalog.>) 1 THEN
        FOR bound IN 0..1 LOOP
            mantissa := (pg_catalog.left(digits, k OPERATOR(pg_catalog.-) 1)::pg_catalog.numeric OPERATOR(pg_catalog.+) bound::pg_catalog.numeric)::pg_catalog.text;
            e := point OPERATOR(pg_catalog.-) (k OPERATOR(pg_catalog.-) 1);
            whole := mantissa OPERATOR(pg_catalog.||) 'e'::pg_catalog.text OPERATOR(pg_catalog.||) e::pg_catalog.text;
            -- (only casts that cannot overflow or underflow)
            IF whole::pg_catalog.numeric OPERATOR(pg_catalog.<=) 1.7976931348623157e308::pg_catalog.numeric
               AND whole::pg_catalog.numeric OPERATOR(pg_catalog.>=) 1e-323::pg_catalog.numeric
               AND whole::pg_catalog.float8 OPERATOR(pg_catalog.=) pg_catalog.abs(shortest::pg_catalog.float8) THEN
                point := e OPERATOR(pg_catalog.+) pg_catalog.length(mantissa);
                digits := pg_catalog.rtrim(mantissa, '0'::pg_catalog.text);
                k := pg_catalog.length(digits);
                EXIT;
            END IF;
        END LOOP;
    END IF;
    IF k OPERATOR(pg_catalog.<=) point AND point OPERATOR(pg_catalog.<=) 21 THEN
        digits := digits OPERATOR(pg_catalog.||) pg_catalog.repeat('0'::pg_catalog.text, point OPERATOR(pg_catalog.-) k);
    ELSIF 0 OPERATOR(pg_catalog.<) point AND point OPERATOR(pg_catalog.<=) 21 THEN
        digits := pg_catalog.left(digits, point) OPERATOR(pg_catalog.||) '.'::pg_catalog.text
            OPERATOR(pg_catalog.||) pg_catalog.substr(digits, point OPERATOR(pg_catalog.+) 1);
    ELSIF -6 OPERATOR(pg_catalog.<) point AND point OPERATOR(pg_catalog.<=) 0 THEN
        digits := '0.'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.repeat('0'::pg_catalog.text, OPERATOR(pg_catalog.-) point)
            OPERATOR(pg_catalog.||) digits;
    ELSE
        e := point OPERATOR(pg_catalog.-) 1;
        digits := pg_catalog.left(digits, 1)
            OPERATOR(pg_catalog.||) CASE WHEN k OPERATOR(pg_catalog.>) 1 THEN '.'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.substr(digits, 2) ELSE ''::pg_catalog.text END
            OPERATOR(pg_catalog.||) CASE WHEN e OPERATOR(pg_catalog.<) 0 THEN 'e-'::pg_catalog.text ELSE 'e+'::pg_catalog.text END
            OPERATOR(pg_catalog.||) pg_catalog.abs(e)::pg_catalog.text;
    END IF;
    IF value OPERATOR(pg_catalog.<) 0::pg_catalog.numeric THEN
        RETURN '-'::pg_catalog.text OPERATOR(pg_catalog.||) digits;
    END IF;
    RETURN digits;
END
$fn$;

-- A text whose byte order (collation "C") is the UTF-16 code unit order of `name`: that is
-- code point order, except that U+E000..U+FFFF sort above the surrogate pairs of U+10000 and
-- up. So U+E000..U+FFFF get a U+10FFFF prefix, and U+10FFFF itself becomes U+10FFFF U+0001.
-- Those characters are made by convert_from (stable: not folded when the query is planned,
-- so a single-byte database, whose names take the first branch, never builds them).
-- (Called only for names beyond ASCII, or in a database not in UTF8.)
CREATE FUNCTION idempotency._idem_jcs_sort_key(name pg_catalog.text)
RETURNS pg_catalog.text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN CASE WHEN pg_catalog.octet_length(name) OPERATOR(pg_catalog.=) pg_catalog.length(name) THEN name
            ELSE pg_catalog.regexp_replace(
                pg_catalog.replace(name, pg_catalog.convert_from(pg_catalog.decode('f48fbfbf'::pg_catalog.text, 'hex'::pg_catalog.text), 'UTF8'::pg_catalog.name), pg_catalog.convert_from(pg_catalog.decode('f48fbfbf'::pg_catalog.text, 'hex'::pg_catalog.text), 'UTF8'::pg_catalog.name) OPERATOR(pg_catalog.||) pg_catalog.chr(1)),
                '(['::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.convert_from(pg_catalog.decode('ee8080'::pg_catalog.text, 'hex'::pg_catalog.text), 'UTF8'::pg_catalog.name) OPERATOR(pg_catalog.||) '-'::pg_catalog.text
                    OPERATOR(pg_catalog.||) pg_catalog.convert_from(pg_catalog.decode('efbfbf'::pg_catalog.text, 'hex'::pg_catalog.text), 'UTF8'::pg_catalog.name) OPERATOR(pg_catalog.||) '])'::pg_catalog.text,
                pg_catalog.convert_from(pg_catalog.decode('f48fbfbf'::pg_catalog.text, 'hex'::pg_catalog.text), 'UTF8'::pg_catalog.name) OPERATOR(pg_catalog.||) E'\\1'::pg_catalog.text, 'g'::pg_catalog.text)
       END;
END
$fn$;

-- 54001 when arrays and objects nest deeper than 128 (idem_canonical::MAX_DEPTH, the native
-- limit), before anything else is checked: the walk below costs more with every level. The
-- jsonpath walk visits levels 0..128 only and copies nothing, so this costs linear time.
CREATE FUNCTION idempotency._idem_jcs_depth(payload pg_catalog.jsonb)
RETURNS pg_catalog.void
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF pg_catalog.jsonb_path_exists(payload,
           'strict $.**{128} ? (@.type() == "array" || @.type() == "object")'::pg_catalog.jsonpath) THEN
        RAISE EXCEPTION 'JSON value nested deeper than 128 levels of arrays and objects' USING ERRCODE = '54001',
            HINT = 'Canonical JSON takes at most 128 nested arrays and objects; send a deeper part as a JSON string.';
    END IF;
END
$fn$;

-- The fast path: jsonb's own text escapes strings as RFC 8785 does and differs only by the
-- spaces after ',' and ':', member order (jsonb sorts names by length first) and numbers. With
-- \\ and \" set aside (as U+0002, U+0003, which jsonb text never holds raw) every '"' delimits
-- a string, and one regular expression (a DFA: linear) finds a second member of an object, a
-- string holding ', ' or ': ', or a number that numeric does not print canonically (a trailing
-- zero after the point, 16 significant digits or more, under 1e-6). Finding none, the answer
-- is that text without those spaces; else NULL.
CREATE FUNCTION idempotency._idem_jcs_fast(payload pg_catalog.jsonb)
RETURNS pg_catalog.text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    head pg_catalog.jsonb := payload;  -- the payload, or an array's first element
    t pg_catalog.text;
    bare pg_catalog.text;  -- t with \\ and \" set aside
BEGIN
    IF pg_catalog.jsonb_typeof(payload) OPERATOR(pg_catalog.=) 'array'::pg_catalog.text THEN
        head := payload OPERATOR(pg_catalog.->) 0::pg_catalog.int4;  -- (NULL if empty)
    END IF;
    -- An object of two members or more, or an array that starts with one, is out at once,
    -- before its text is made.
    IF pg_catalog.jsonb_typeof(head) OPERATOR(pg_catalog.=) 'object'::pg_catalog.text
       AND (head OPERATOR(pg_catalog.-) (pg_catalog.jsonb_path_query_first(head, '$.keyvalue().key'::pg_catalog.jsonpath)
                OPERATOR(pg_catalog.#>>) '{}'::pg_catalog.text[])) OPERATOR(pg_catalog.<>) '{}'::pg_catalog.jsonb THEN
        RETURN NULL;
    END IF;
    t := payload::pg_catalog.text;
    bare := CASE WHEN pg_catalog.strpos(t, '"'::pg_catalog.text) OPERATOR(pg_catalog.=) 0 THEN t
        ELSE pg_catalog.replace(pg_catalog.replace(t, E'\\\\'::pg_catalog.text, pg_catalog.chr(2)),
                 E'\\"'::pg_catalog.text, pg_catalog.chr(3)) END;
    IF bare OPERATOR(pg_catalog.~) ('^([^"]*"[^"]*")*[^"]*(, "[^"]*": |"[^"]*(, |: )'
           '|[.][0-9]*0([^0-9]|$)|[1-9]([.]?[0-9]){15}|(^|[^0-9])0[.]000000)')::pg_catalog.text THEN
        RETURN NULL;
    END IF;
    RETURN pg_catalog.replace(pg_catalog.replace(t, ', '::pg_catalog.text, ','::pg_catalog.text),
               ': '::pg_catalog.text, ':'::pg_catalog.text);
END
$fn$;

-- The body of idem_canonical (sql/canonical.sql declares it): the fast path, else the container
-- by _idem_jcs_container (portable/canonical_lists.sql); a scalar that the fast path refuses is
-- a string holding ', ' or ': ' (its own text) or a number.
BODY idem_canonical_jsonb_wrapper LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    fast pg_catalog.text;  -- the fast path's text, else the container's
    size constant pg_catalog.int4 := pg_catalog.pg_column_size(payload);
BEGIN
PERFORM idempotency._idem_jcs_depth(payload);
fast := idempotency._idem_jcs_fast(payload);
IF fast IS NOT NULL THEN
    RETURN fast;
END IF;
IF pg_catalog.jsonb_typeof(payload) OPERATOR(pg_catalog.=) 'number'::pg_catalog.text THEN
    RETURN idempotency._idem_jcs_number(payload::pg_catalog.text::pg_catalog.numeric, NULL::pg_catalog.text);
ELSIF pg_catalog.jsonb_typeof(payload) OPERATOR(pg_catalog.=) 'string'::pg_catalog.text THEN
    RETURN payload::pg_catalog.text;
END IF;
fast := idempotency._idem_jcs_container(payload, size);
-- The first number beyond the doubles in output order (held between two U+0004) raises.
IF pg_catalog.strpos(fast, pg_catalog.chr(4)) OPERATOR(pg_catalog.>) 0 THEN
    PERFORM idempotency._idem_jcs_number(pg_catalog.split_part(fast, pg_catalog.chr(4), 2)::pg_catalog.numeric, NULL::pg_catalog.text);
END IF;
RETURN fast;
END
$fn$;


-- The body of idem_hash (sql/canonical.sql declares it).
BODY idem_hash_jsonb_wrapper LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    RETURN pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(idempotency.idem_canonical(payload), 'UTF8'::pg_catalog.name)),
                         'hex'::pg_catalog.text);
END
$fn$;
-- idem_hash(payload, fields): the hash of the object made of only the listed top-level members.
-- The body of idem_hash (sql/canonical.sql declares it).
BODY idem_hash_jsonb_fields_wrapper LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    IF pg_catalog.array_position(fields, NULL::pg_catalog.text) IS NOT NULL THEN
        RAISE EXCEPTION 'idem_hash(payload, fields): fields must not contain NULL' USING ERRCODE = '22004';
    END IF;
    IF pg_catalog.jsonb_typeof(payload) OPERATOR(pg_catalog.<>) 'object'::pg_catalog.text THEN
        RAISE EXCEPTION 'idem_hash(payload, fields) needs a JSON object as payload' USING ERRCODE = '22023',
            DETAIL = CASE WHEN pg_catalog.jsonb_typeof(payload) OPERATOR(pg_catalog.=) 'array'::pg_catalog.text
                          THEN 'The payload is an array.' ELSE 'The payload is a scalar.' END;
    END IF;
    PERFORM idempotency._idem_jcs_depth(payload);  -- the whole payload, as native
    RETURN idempotency.idem_hash(COALESCE(
        (SELECT pg_catalog.jsonb_object_agg(e.key, e.value)
         FROM pg_catalog.jsonb_each(payload) e
         WHERE e.key OPERATOR(pg_catalog.=) ANY (fields)),
        '{}'::pg_catalog.jsonb));
END
$fn$;

-- The json forms: what the json value adds to its jsonb cast is checked first, in the native
-- order: numbers beyond the doubles (document order, quoted as written), then duplicate
-- member names (the first object in output order that has one, its least such name). A
-- \u0000 escape (jsonb cannot hold U+0000) travels as \u0001 through jsonb and back.
-- The body of idem_canonical (sql/canonical.sql declares it).
BODY idem_canonical_json_wrapper LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    t pg_catalog.text := payload::pg_catalog.text;
    -- escaped backslashes (\\) aside, so that only real escapes are seen and changed
    bare pg_catalog.text := pg_catalog.replace(t, E'\\\\'::pg_catalog.text, pg_catalog.chr(2));
    nul pg_catalog.bool := pg_catalog.strpos(bare, E'\\u0000'::pg_catalog.text) OPERATOR(pg_catalog.>) 0;
    checked pg_catalog.int8;
    duplicate pg_catalog.text;
    cut pg_catalog.int4;
    result pg_catalog.text;
    lone pg_catalog.text[];
BEGIN
    -- The depth first, as native: on the jsonb cast, with every \uXXXX escape (which jsonb may
    -- refuse: \u0000, lone surrogates) made a plain character; Postgres' own parser is linear.
    PERFORM idempotency._idem_jcs_depth(CASE
        WHEN pg_catalog.strpos(bare, E'\\u'::pg_catalog.text) OPERATOR(pg_catalog.=) 0 THEN t
        ELSE pg_catalog.replace(pg_catalog.regexp_replace(bare, E'\\\\u[0-9a-fA-F]{4}'::pg_catalog.text,
                 '_'::pg_catalog.text, 'g'::pg_catalog.text), pg_catalog.chr(2), E'\\\\'::pg_catalog.text)
        END::pg_catalog.jsonb);
    -- A lone surrogate escape, which jsonb would refuse with its own 22P02: the native 22P05
    -- and message, naming the first one and its byte offset (each \\ in bare is 2 bytes).
    IF bare OPERATOR(pg_catalog.~*) E'\\\\ud[89a-f]'::pg_catalog.text THEN
        lone := pg_catalog.regexp_match(bare,
            E'^(.*?)(\\\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\\\u[dD][c-fC-F][0-9a-fA-F]{2})|(?<!\\\\u[dD][89abAB][0-9a-fA-F]{2})\\\\u[dD][c-fC-F][0-9a-fA-F]{2})'::pg_catalog.text);
        IF lone IS NOT NULL THEN
            -- The native parser reads the document once: a number beyond the doubles before
            -- the escape is named first. The numbers of the text before it, strings taken out.
            PERFORM idempotency._idem_jcs_number(n.raw::pg_catalog.numeric, n.raw)
               FROM pg_catalog.regexp_matches(pg_catalog.regexp_replace(pg_catalog.regexp_replace(lone[1],
                        E'"(?:[^"\\\\]|\\\\.)*"'::pg_catalog.text, ''::pg_catalog.text, 'g'::pg_catalog.text),
                        E'"(?:[^"\\\\]|\\\\.)*$'::pg_catalog.text, ''::pg_catalog.text),
                        '-?[0-9][0-9.eE+-]*'::pg_catalog.text, 'g'::pg_catalog.text) AS m (raw_)
              CROSS JOIN LATERAL (SELECT m.raw_[1] AS raw) AS n
             WHERE pg_catalog.abs(n.raw::pg_catalog.numeric) OPERATOR(pg_catalog.>) 1e300::pg_catalog.numeric;
            RAISE EXCEPTION USING ERRCODE = '22P05', MESSAGE = pg_catalog.format(
                'JSON string escape %s at byte %s is a lone surrogate, which UTF-8 cannot represent',
                pg_catalog.lower(lone[2]), pg_catalog.octet_length(lone[1]) OPERATOR(pg_catalog.+)
                    pg_catalog.octet_length(lone[1]) OPERATOR(pg_catalog.-)
                    pg_catalog.octet_length(pg_catalog.replace(lone[1], pg_catalog.chr(2), ''::pg_catalog.text)));
        END IF;
    END IF;
    IF nul THEN
        IF pg_catalog.strpos(bare, E'\\u0001'::pg_catalog.text) OPERATOR(pg_catalog.>) 0 THEN
            RAISE EXCEPTION E'the portable idem_canonical(json) cannot take both \\u0000 and \\u0001 escapes'
                USING ERRCODE = '0A000', HINT = 'Use the native extension, or jsonb (which has no U+0000).';
        END IF;
        t := pg_catalog.replace(pg_catalog.replace(bare, E'\\u0000'::pg_catalog.text, E'\\u0001'::pg_catalog.text),
                 pg_catalog.chr(2), E'\\\\'::pg_catalog.text);
    END IF;
    WITH RECURSIVE node (dpath, cpath, value, kind) AS (
        SELECT ''::pg_catalog.bytea, ''::pg_catalog.bytea, t::pg_catalog.json, pg_catalog.json_typeof(t::pg_catalog.json)
      UNION ALL
        SELECT n.dpath OPERATOR(pg_catalog.||) pg_catalog.int4send(c.ord::pg_catalog.int4),
               n.cpath OPERATOR(pg_catalog.||) c.step, c.value, pg_catalog.json_typeof(c.value)
        FROM node n
        CROSS JOIN LATERAL (
            SELECT e.ord, pg_catalog.convert_to(idempotency._idem_jcs_sort_key(e.key), 'UTF8'::pg_catalog.name)
                       OPERATOR(pg_catalog.||) pg_catalog.decode('00'::pg_catalog.text, 'hex'::pg_catalog.text), e.value
            FROM pg_catalog.json_each(CASE WHEN n.kind OPERATOR(pg_catalog.=) 'object'::pg_catalog.text THEN n.value END)
                 WITH ORDINALITY e (key, value, ord)
          UNION ALL
            SELECT a.ord, pg_catalog.int4send(a.ord::pg_catalog.int4), a.value
            FROM pg_catalog.json_array_elements(CASE WHEN n.kind OPERATOR(pg_catalog.=) 'array'::pg_catalog.text THEN n.value END)
                 WITH ORDINALITY a (value, ord)
        ) c (ord, step, value)
        WHERE n.kind OPERATOR(pg_catalog.=) 'object'::pg_catalog.text OR n.kind OPERATOR(pg_catalog.=) 'array'::pg_catalog.text
    ),
    huge AS (  -- raises at the first number beyond the doubles
        SELECT idempotency._idem_jcs_number(h.raw::pg_catalog.numeric, h.raw) AS checked
        FROM (SELECT n.value::pg_catalog.text AS raw FROM node n
              WHERE n.kind OPERATOR(pg_catalog.=) 'number'::pg_catalog.text
                AND pg_catalog.abs(n.value::pg_catalog.text::pg_catalog.numeric) OPERATOR(pg_catalog.>) 1e300::pg_catalog.numeric
              ORDER BY n.dpath) h
    )
    SELECT (SELECT pg_catalog.count(huge.checked) FROM huge),
           (SELECT d.key
            FROM (SELECT n.cpath, e.key
                  FROM node n, pg_catalog.json_each(n.value) e
                  WHERE n.kind OPERATOR(pg_catalog.=) 'object'::pg_catalog.text
                  GROUP BY n.cpath, e.key
                  HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 1::pg_catalog.int8) d
            ORDER BY d.cpath, pg_catalog.convert_to(idempotency._idem_jcs_sort_key(d.key), 'UTF8'::pg_catalog.name)
            LIMIT 1)
    INTO checked, duplicate;
    IF duplicate IS NOT NULL THEN
        IF nul AND pg_catalog.strpos(duplicate, pg_catalog.chr(1)) OPERATOR(pg_catalog.>) 0 THEN
            -- the name holds U+0000, which no message can: it ends there
            duplicate := pg_catalog.left(duplicate, pg_catalog.strpos(duplicate, pg_catalog.chr(1)) OPERATOR(pg_catalog.-) 1);
        END IF;
        IF pg_catalog.octet_length(duplicate) OPERATOR(pg_catalog.>) 64 THEN
            cut := 64;  -- at most 64 bytes, on a character boundary
            WHILE pg_catalog.octet_length(pg_catalog.left(duplicate, cut)) OPERATOR(pg_catalog.>) 64 LOOP
                cut := cut OPERATOR(pg_catalog.-) 1;
            END LOOP;
            duplicate := pg_catalog.left(duplicate, cut) OPERATOR(pg_catalog.||) '...'::pg_catalog.text;
        END IF;
        RAISE EXCEPTION 'duplicate JSON object key "%"', duplicate USING ERRCODE = '22030',
            HINT = 'RFC 8785 canonical JSON requires unique member names; cast to jsonb to keep the last one.';
    END IF;
    result := idempotency.idem_canonical(t::pg_catalog.jsonb);
    IF nul THEN
        result := pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(result, E'\\\\'::pg_catalog.text, pg_catalog.chr(2)),
                      E'\\u0001'::pg_catalog.text, E'\\u0000'::pg_catalog.text), pg_catalog.chr(2), E'\\\\'::pg_catalog.text);
    END IF;
    RETURN result;
END
$fn$;

-- The body of idem_hash (sql/canonical.sql declares it).
BODY idem_hash_json_wrapper LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    RETURN pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(idempotency.idem_canonical(payload), 'UTF8'::pg_catalog.name)),
                         'hex'::pg_catalog.text);
END
$fn$;
