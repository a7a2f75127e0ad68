-- The portable edition's pure functions, in SQL and PL/pgSQL only: idem_canonical, idem_hash
-- (RFC 8785 + SHA-256) and idem_lock_key (XXH3-64), with the native extension's names,
-- signatures, results, SQLSTATEs and messages. Included by scripts/portable.sh; the objects go
-- into schema idempotency. How it works and what differs: docs/portable-canonical.md.
--
-- Every function runs with search_path = pg_catalog, pg_temp and names every operator,
-- function, type and collation with its schema, so that look-alikes a caller plants on the
-- search_path are never run. The helpers named _idem_jcs_* are not API. All are PL/pgSQL, even
-- one-liners: PL/pgSQL keeps its plans for the session, while before Postgres 18 a SQL function
-- that has a SET clause is planned again by every statement that calls it (~1 ms here).

-- A number that is not a short decimal: the nearest double (the numeric -> float8 cast is
-- strtod, correctly rounded) in the shortest digits that read back (float8out with
-- extra_float_digits > 0, PG 12+), laid out as ECMAScript's Number.prototype.toString.
-- `spelling` is the number as the error message quotes it (NULL: jsonb's base-10000 form).
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
-- (Inlined in idem_canonical(jsonb), where a call per member would cost more than the rest.)
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

-- The canonical text of a jsonb value, in one statement: a recursive walk gives every value a
-- path (bytea) that sorts in output order, and its token; the tokens, plus a closing token per
-- container at path || ff, are concatenated in path order. A member's path step is its name's
-- UTF-16 sort key in UTF-8 and a 00 byte (jsonb names hold no U+0000), an element's its
-- position as 4 bytes. Each member or element token starts with ',' and each opening bracket
-- ends with U+0001, a character canonical text never holds raw; the pair is then deleted.
CREATE FUNCTION idempotency.idem_canonical(payload pg_catalog.jsonb)
RETURNS pg_catalog.text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
RETURN (
WITH RECURSIVE node (path, prefix, value, kind, t) AS (
    SELECT ''::pg_catalog.bytea, ''::pg_catalog.text, payload, pg_catalog.jsonb_typeof(payload),
           CASE WHEN pg_catalog.jsonb_typeof(payload) OPERATOR(pg_catalog.=) 'object'::pg_catalog.text
                  OR pg_catalog.jsonb_typeof(payload) OPERATOR(pg_catalog.=) 'array'::pg_catalog.text THEN NULL::pg_catalog.text
                ELSE payload::pg_catalog.text END
  UNION ALL
    SELECT n.path OPERATOR(pg_catalog.||) c.step, c.prefix, c.value, pg_catalog.jsonb_typeof(c.value),
           -- the text of a scalar (of a container: not needed, not made)
           CASE WHEN pg_catalog.jsonb_typeof(c.value) OPERATOR(pg_catalog.=) 'object'::pg_catalog.text
                  OR pg_catalog.jsonb_typeof(c.value) OPERATOR(pg_catalog.=) 'array'::pg_catalog.text THEN NULL::pg_catalog.text
                ELSE c.value::pg_catalog.text END
    FROM node n
    CROSS JOIN LATERAL (
        SELECT pg_catalog.convert_to(
                   -- idempotency._idem_jcs_sort_key(e.key), inlined
                   CASE WHEN pg_catalog.octet_length(e.key) OPERATOR(pg_catalog.=) pg_catalog.length(e.key) THEN e.key
                        ELSE pg_catalog.regexp_replace(
                            pg_catalog.replace(e.key, pg_catalog.convert_from(pg_catalog.decode('f48fbfbf'::pg_catalog.text, 'hex'::pg_catalog.text), 'UTF8'::pg_catalog.name),
                                pg_catalog.convert_from(pg_catalog.decode('f48fbfbf'::pg_catalog.text, 'hex'::pg_catalog.text), 'UTF8'::pg_catalog.name) OPERATOR(pg_catalog.||) pg_catalog.chr(1)),
                            '(['::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.convert_from(pg_catalog.decode('ee8080'::pg_catalog.text, 'hex'::pg_catalog.text), 'UTF8'::pg_catalog.name)
                                OPERATOR(pg_catalog.||) '-'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.convert_from(pg_catalog.decode('efbfbf'::pg_catalog.text, 'hex'::pg_catalog.text), 'UTF8'::pg_catalog.name)
                                OPERATOR(pg_catalog.||) '])'::pg_catalog.text,
                            pg_catalog.convert_from(pg_catalog.decode('f48fbfbf'::pg_catalog.text, 'hex'::pg_catalog.text), 'UTF8'::pg_catalog.name) OPERATOR(pg_catalog.||) E'\\1'::pg_catalog.text,
                            'g'::pg_catalog.text)
                   END, 'UTF8'::pg_catalog.name) OPERATOR(pg_catalog.||) pg_catalog.decode('00'::pg_catalog.text, 'hex'::pg_catalog.text) AS step,
               ','::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.to_json(e.key)::pg_catalog.text
                   OPERATOR(pg_catalog.||) ':'::pg_catalog.text AS prefix,
               e.value
        FROM pg_catalog.jsonb_each(CASE WHEN n.kind OPERATOR(pg_catalog.=) 'object'::pg_catalog.text THEN n.value END) e
      UNION ALL
        SELECT pg_catalog.int4send(a.ord::pg_catalog.int4), ','::pg_catalog.text, a.value
        FROM pg_catalog.jsonb_array_elements(CASE WHEN n.kind OPERATOR(pg_catalog.=) 'array'::pg_catalog.text THEN n.value END)
             WITH ORDINALITY a (value, ord)
    ) c
    WHERE n.kind OPERATOR(pg_catalog.=) 'object'::pg_catalog.text OR n.kind OPERATOR(pg_catalog.=) 'array'::pg_catalog.text
)
SELECT pg_catalog.replace(pg_catalog.replace(pg_catalog.string_agg(t.token, ''::pg_catalog.text ORDER BY t.path),
           pg_catalog.chr(1) OPERATOR(pg_catalog.||) ','::pg_catalog.text, ''::pg_catalog.text),
       pg_catalog.chr(1), ''::pg_catalog.text)
FROM (
    SELECT n.path, n.prefix OPERATOR(pg_catalog.||) CASE
               WHEN n.kind OPERATOR(pg_catalog.=) 'object'::pg_catalog.text THEN '{'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.chr(1)
               WHEN n.kind OPERATOR(pg_catalog.=) 'array'::pg_catalog.text THEN '['::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.chr(1)
               WHEN n.kind OPERATOR(pg_catalog.<>) 'number'::pg_catalog.text THEN n.t
               -- numeric_out never writes an exponent. Up to 15 significant digits a decimal is
               -- its own shortest round-trip form, so from 1e-6 to 1e15 it is the answer.
               WHEN pg_catalog.strpos(n.t, '.'::pg_catalog.text) OPERATOR(pg_catalog.=) 0 THEN
                   CASE WHEN pg_catalog.octet_length(pg_catalog.ltrim(n.t, '-'::pg_catalog.text)) OPERATOR(pg_catalog.<=) 15 THEN n.t
                        ELSE idempotency._idem_jcs_number(n.t::pg_catalog.numeric, NULL::pg_catalog.text) END
               WHEN pg_catalog.octet_length(pg_catalog.ltrim(pg_catalog.replace(pg_catalog.rtrim(n.t, '0'::pg_catalog.text),
                        '.'::pg_catalog.text, ''::pg_catalog.text), '-0'::pg_catalog.text)) OPERATOR(pg_catalog.<=) 15
                    AND NOT pg_catalog.starts_with(pg_catalog.ltrim(n.t, '-'::pg_catalog.text), '0.000000'::pg_catalog.text)
                   THEN pg_catalog.rtrim(pg_catalog.rtrim(n.t, '0'::pg_catalog.text), '.'::pg_catalog.text)
               ELSE idempotency._idem_jcs_number(n.t::pg_catalog.numeric, NULL::pg_catalog.text)
           END
    FROM node n
  UNION ALL
    SELECT n.path OPERATOR(pg_catalog.||) pg_catalog.decode('ff'::pg_catalog.text, 'hex'::pg_catalog.text),
           CASE WHEN n.kind OPERATOR(pg_catalog.=) 'object'::pg_catalog.text THEN '}'::pg_catalog.text ELSE ']'::pg_catalog.text END
    FROM node n
    WHERE n.kind OPERATOR(pg_catalog.=) 'object'::pg_catalog.text OR n.kind OPERATOR(pg_catalog.=) 'array'::pg_catalog.text
) t (path, token));
END
$fn$;

CREATE FUNCTION idempotency.idem_hash(payload pg_catalog.jsonb)
RETURNS pg_catalog.text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(idempotency.idem_canonical(payload), 'UTF8'::pg_catalog.name)),
                         'hex'::pg_catalog.text);
END
$fn$;
-- idem_hash(payload, fields): the hash of the object made of only the listed top-level members.
CREATE FUNCTION idempotency.idem_hash(payload pg_catalog.jsonb, fields pg_catalog.text[])
RETURNS pg_catalog.text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF pg_catalog.array_position(fields, NULL::pg_catalog.text) IS NOT NULL THEN
        RAISE EXCEPTION 'idem_hash(payload, fields): fields must not contain NULL' USING ERRCODE = '22004';
    END IF;
    IF pg_catalog.jsonb_typeof(payload) OPERATOR(pg_catalog.<>) 'object'::pg_catalog.text THEN
        RAISE EXCEPTION 'idem_hash(payload, fields) needs a JSON object as payload' USING ERRCODE = '22023',
            DETAIL = CASE WHEN pg_catalog.jsonb_typeof(payload) OPERATOR(pg_catalog.=) 'array'::pg_catalog.text
                          THEN 'The payload is an array.' ELSE 'The payload is a scalar.' END;
    END IF;
    RETURN idempotency.idem_hash(COALESCE(
        (SELECT pg_catalog.jsonb_object_agg(e.key, e.value)
         FROM pg_catalog.jsonb_each(payload) e
         WHERE e.key OPERATOR(pg_catalog.=) ANY (fields)),
        '{}'::pg_catalog.jsonb));
END
$fn$;

-- idem_lock_key: XXH3-64 (seed 0) over u32_le(octet length of scope) || scope || key in UTF-8,
-- as a signed bigint, following xxhash's XXH3_64bits step by step (the input is at least the
-- 4 bytes of the length, so the 0..3-byte cases never arise). 64-bit words are int8 bit
-- patterns for xor and shifts (>> masked to be logical), and numerics in [0, 2^64) for
-- wrapping sums and products. Little-endian words are read as big-endian hex of the
-- byte-reversed input. Inline arithmetic: a helper function per step costs ~2 us a call.
CREATE FUNCTION idempotency.idem_lock_key(scope pg_catalog.text, key pg_catalog.text)
RETURNS pg_catalog.int8
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    m CONSTANT pg_catalog.numeric := 18446744073709551616::pg_catalog.numeric;   -- 2^64
    half CONSTANT pg_catalog.numeric := 9223372036854775808::pg_catalog.numeric; -- 2^63
    p64_1 CONSTANT pg_catalog.numeric := 11400714785074694791::pg_catalog.numeric;
    mx1 CONSTANT pg_catalog.numeric := 1609587791953885689::pg_catalog.numeric;
    mx2 CONSTANT pg_catalog.numeric := 11507291218515648293::pg_catalog.numeric;
    -- kSecret (192 bytes), byte-reversed, as hex
    sec CONSTANT pg_catalog.text := pg_catalog.regexp_replace(pg_catalog.reverse(
        'b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671fcb79e64eccc0e578825ad07dccff7221'
        'b8084674f743248ee03590e6813a264c3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8'
        'a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364eac5ac8334d3ebc3c581a0fffa1363eb'
        '170ddd51b7f0da49d316552629d4689e2b16be587d47a1fc8ff8b8d17ad031ce45cb3a8f95160428afd7fbcabb4b407e'::pg_catalog.text),
        '(.)(.)'::pg_catalog.text, E'\\2\\1'::pg_catalog.text, 'g'::pg_catalog.text);
    s pg_catalog.bytea := pg_catalog.convert_to(scope, 'UTF8'::pg_catalog.name);
    h pg_catalog.text;  -- the input, byte-reversed, as hex
    n pg_catalog.int4 := pg_catalog.octet_length(s);
    acc pg_catalog.numeric;
    accs pg_catalog.numeric[];
    p pg_catalog.numeric;
    x pg_catalog.int8;
    y pg_catalog.int8;
    w pg_catalog.int8;
    ins pg_catalog.int4[] := '{}'::pg_catalog.int4[];   -- 16-byte input offsets to mix
    secs pg_catalog.int4[] := '{}'::pg_catalog.int4[];  -- and their secret offsets
    i pg_catalog.int4;
    blocks pg_catalog.int4;
    stripes pg_catalog.int4;
    io pg_catalog.int4;
    so pg_catalog.int4;
BEGIN
    -- u32_le(n) as hex, then the text, all byte-reversed: reverse the hex, swap each digit pair
    h := pg_catalog.regexp_replace(pg_catalog.reverse(
            pg_catalog.encode(s OPERATOR(pg_catalog.||) pg_catalog.convert_to(key, 'UTF8'::pg_catalog.name), 'hex'::pg_catalog.text)),
            '(.)(.)'::pg_catalog.text, E'\\2\\1'::pg_catalog.text, 'g'::pg_catalog.text)
        OPERATOR(pg_catalog.||) pg_catalog.lpad(pg_catalog.to_hex(n), 8, '0'::pg_catalog.text);
    n := pg_catalog.octet_length(h) OPERATOR(pg_catalog./) 2;
    IF n OPERATOR(pg_catalog.<=) 8 THEN
        x := (('x00000000'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.substr(h, (((n) OPERATOR(pg_catalog.-) (n OPERATOR(pg_catalog.-) 4) OPERATOR(pg_catalog.-) 4) OPERATOR(pg_catalog.*) 2) OPERATOR(pg_catalog.+) 1, 8))::pg_catalog.bit(64)::pg_catalog.int8 OPERATOR(pg_catalog.|) (('x00000000'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.substr(h, (((n) OPERATOR(pg_catalog.-) (0) OPERATOR(pg_catalog.-) 4) OPERATOR(pg_catalog.*) 2) OPERATOR(pg_catalog.+) 1, 8))::pg_catalog.bit(64)::pg_catalog.int8 OPERATOR(pg_catalog.<<) 32)) OPERATOR(pg_catalog.#) ('x'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.substr(sec, (((192) OPERATOR(pg_catalog.-) (8) OPERATOR(pg_catalog.-) 8) OPERATOR(pg_catalog.*) 2) OPERATOR(pg_catalog.+) 1, 16))::pg_catalog.bit(64)::pg_catalog.int8 OPERATOR(pg_catalog.#) ('x'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.substr(sec, (((192) OPERATOR(pg_catalog.-) (16) OPERATOR(pg_catalog.-) 8) OPERATOR(pg_catalog.*) 2) OPERATOR(pg_catalog.+) 1, 16))::pg_catalog.bit(64)::pg_catalog.int8;
        x := x OPERATOR(pg_catalog.#) ((x OPERATOR(pg_catalog.<<) 49) OPERATOR(pg_catalog.|) ((x OPERATOR(pg_catalog.>>) 15) OPERATOR(pg_catalog.&) 562949953421311::pg_catalog.int8)) OPERATOR(pg_catalog.#) ((x OPERATOR(pg_catalog.<<) 24) OPERATOR(pg_catalog.|) ((x OPERATOR(pg_catalog.>>) 40) OPERATOR(pg_catalog.&) 16777215::pg_catalog.int8));
        p := ((x::pg_catalog.numeric OPERATOR(pg_catalog.+) CASE WHEN x OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN m ELSE 0::pg_catalog.numeric END) OPERATOR(pg_catalog.*) mx2) OPERATOR(pg_catalog.%) m;
        x := (CASE WHEN p OPERATOR(pg_catalog.>=) half THEN p OPERATOR(pg_catalog.-) m ELSE p END)::pg_catalog.int8;
        p := (((x OPERATOR(pg_catalog.>>) 35) OPERATOR(pg_catalog.&) 536870911::pg_catalog.int8)::pg_catalog.numeric OPERATOR(pg_catalog.+) n::pg_catalog.numeric) OPERATOR(pg_catalog.%) m;
        x := x OPERATOR(pg_catalog.#) (CASE WHEN p OPERATOR(pg_catalog.>=) half THEN p OPERATOR(pg_catalog.-) m ELSE p END)::pg_catalog.int8;
        p := ((x::pg_catalog.numeric OPERATOR(pg_catalog.+) CASE WHEN x OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN m ELSE 0::pg_catalog.numeric END) OPERATOR(pg_catalog.*) mx2) OPERATOR(pg_catalog.%) m;
        x := (CASE WHEN p OPERATOR(pg_catalog.>=) half THEN p OPERATOR(pg_catalog.-) m ELSE p END)::pg_catalog.int8;
        RETURN x OPERATOR(pg_catalog.#) ((x OPERATOR(pg_catalog.>>) 28) OPERATOR(pg_catalog.&) 68719476735::pg_catalog.int8);
    END IF;
    IF n OPERATOR(pg_catalog.<=) 16 THEN
        x := ('x'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.substr(h, (((n) OPERATOR(pg_catalog.-) (0) OPERATOR(pg_catalog.-) 8) OPERATOR(pg_catalog.*) 2) OPERATOR(pg_catalog.+) 1, 16))::pg_catalog.bit(64)::pg_catalog.int8 OPERATOR(pg_catalog.#) ('x'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.substr(sec, (((192) OPERATOR(pg_catalog.-) (24) OPERATOR(pg_catalog.-) 8) OPERATOR(pg_catalog.*) 2) OPERATOR(pg_catalog.+) 1, 16))::pg_catalog.bit(64)::pg_catalog.int8 OPERATOR(pg_catalog.#) ('x'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.substr(sec, (((192) OPERATOR(pg_catalog.-) (32) OPERATOR(pg_catalog.-) 8) OPERATOR(pg_catalog.*) 2) OPERATOR(pg_catalog.+) 1, 16))::pg_catalog.bit(64)::pg_catalog.int8;
        y := ('x'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.substr(h, (((n) OPERATOR(pg_catalog.-) (n OPERATOR(pg_catalog.-) 8) OPERATOR(pg_catalog.-) 8) OPERATOR(pg_catalog.*) 2) OPERATOR(pg_catalog.+) 1, 16))::pg_catalog.bit(64)::pg_catalog.int8 OPERATOR(pg_catalog.#) ('x'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.substr(sec, (((192) OPERATOR(pg_catalog.-) (40) OPERATOR(pg_catalog.-) 8) OPERATOR(pg_catalog.*) 2) OPERATOR(pg_catalog.+) 1, 16))::pg_catalog.bit(64)::pg_catalog.int8 OPERATOR(pg_catalog.#) ('x'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.substr(sec, (((192) OPERATOR(pg_catalog.-) (48) OPERATOR(pg_catalog.-) 8) OPERATOR(pg_catalog.*) 2) OPERATOR(pg_catalog.+) 1, 16))::pg_catalog.bit(64)::pg_catalog.int8;
        -- the byte-swapped lo word
        w := ('x'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.regexp_replace(pg_catalog.reverse(pg_catalog.lpad(pg_catalog.to_hex(x), 16, '0'::pg_catalog.text)), '(.)(.)'::pg_catalog.text, E'\\2\\1'::pg_catalog.text, 'g'::pg_catalog.text))::pg_catalog.bit(64)::pg_catalog.int8;
        acc := (n::pg_catalog.numeric OPERATOR(pg_catalog.+) (w::pg_catalog.numeric OPERATOR(pg_catalog.+) CASE WHEN w OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN m ELSE 0::pg_catalog.numeric END) OPERATOR(pg_catalog.+) (y::pg_catalog.numeric OPERATOR(pg_catalog.+) CASE WHEN y OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN m ELSE 0::pg_catalog.numeric END)) OPERATOR(pg_catalog.%) m;
        p := (x::pg_catalog.numeric OPERATOR(pg_catalog.+) CASE WHEN x OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN m ELSE 0::pg_catalog.numeric END) OPERATOR(pg_catalog.*) (y::pg_catalog.numeric OPERATOR(pg_catalog.+) CASE WHEN y OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN m ELSE 0::pg_catalog.numeric END);
        w := (CASE WHEN (p OPERATOR(pg_catalog.%) m) OPERATOR(pg_catalog.>=) half THEN (p OPERATOR(pg_catalog.%) m) OPERATOR(pg_catalog.-) m ELSE (p OPERATOR(pg_catalog.%) m) END)::pg_catalog.int8 OPERATOR(pg_catalog.#) (CASE WHEN pg_catalog.div(p, m) OPERATOR(pg_catalog.>=) half THEN pg_catalog.div(p, m) OPERATOR(pg_catalog.-) m ELSE pg_catalog.div(p, m) END)::pg_catalog.int8;
        acc := (acc OPERATOR(pg_catalog.+) (w::pg_catalog.numeric OPERATOR(pg_catalog.+) CASE WHEN w OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN m ELSE 0::pg_catalog.numeric END)) OPERATOR(pg_catalog.%) m;
        x := (CASE WHEN acc OPERATOR(pg_catalog.>=) half THEN acc OPERATOR(pg_catalog.-) m ELSE acc END)::pg_catalog.int8;
        x := x OPERATOR(pg_catalog.#) ((x OPERATOR(pg_catalog.>>) 37) OPERATOR(pg_catalog.&) 134217727::pg_catalog.int8);
        p := ((x::pg_catalog.numeric OPERATOR(pg_catalog.+) CASE WHEN x OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN m ELSE 0::pg_catalog.numeric END) OPERATOR(pg_catalog.*) mx1) OPERATOR(pg_catalog.%) m;
        x := (CASE WHEN p OPERATOR(pg_catalog.>=) half THEN p OPERATOR(pg_catalog.-) m ELSE p END)::pg_catalog.int8;
        x := x OPERATOR(pg_catalog.#) ((x OPERATOR(pg_catalog.>>) 32) OPERATOR(pg_catalog.&) 4294967295::pg_catalog.int8);
        RETURN x;
    END IF;
    acc := (n::pg_catalog.numeric OPERATOR(pg_catalog.*) p64_1) OPERATOR(pg_catalog.%) m;
    IF n OPERATOR(pg_catalog.<=) 240 THEN
        IF n OPERATOR(pg_catalog.<=) 128 THEN
            -- pairs from both ends: (0, n-16), then (16, n-32) past 32 bytes, and so on
            i := 0;
            WHILE i OPERATOR(pg_catalog.<) 4 AND (i OPERATOR(pg_catalog.=) 0 OR n OPERATOR(pg_catalog.>) (32 OPERATOR(pg_catalog.*) i)) LOOP
                ins := ins OPERATOR(pg_catalog.||) ARRAY[16 OPERATOR(pg_catalog.*) i, n OPERATOR(pg_catalog.-) 16 OPERATOR(pg_catalog.-) (16 OPERATOR(pg_catalog.*) i)];
                secs := secs OPERATOR(pg_catalog.||) ARRAY[32 OPERATOR(pg_catalog.*) i, (32 OPERATOR(pg_catalog.*) i) OPERATOR(pg_catalog.+) 16];
                i := i OPERATOR(pg_catalog.+) 1;
            END LOOP;
        ELSE
            -- 8 rounds, avalanche, then the rest from secret offset 3, and the last 16 bytes at 119
            FOR i IN 0..7 LOOP
                x := ('x'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.substr(h, (((n) OPERATOR(pg_catalog.-) (16 OPERATOR(pg_catalog.*) i) OPERATOR(pg_catalog.-) 8) OPERATOR(pg_catalog.*) 2) OPERATOR(pg_catalog.+) 1, 16))::pg_catalog.bit(64)::pg_catalog.int8 OPERATOR(pg_catalog.#) ('x'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.substr(sec, (((192) OPERATOR(pg_catalog.-) (16 OPERATOR(pg_catalog.*) i) OPERATOR(pg_catalog.-) 8) OPERATOR(pg_catalog.*) 2) OPERATOR(pg_catalog.+) 1, 16))::pg_catalog.bit(64)::pg_catalog.int8;
                y := ('x'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.substr(h, (((n) OPERATOR(pg_catalog.-) (16 OPERATOR(pg_catalog.*) i OPERATOR(pg_catalog.+) 8) OPERATOR(pg_catalog.-) 8) OPERATOR(pg_catalog.*) 2) OPERATOR(pg_catalog.+) 1, 16))::pg_catalog.bit(64)::pg_catalog.int8 OPERATOR(pg_catalog.#) ('x'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.substr(sec, (((192) OPERATOR(pg_catalog.-) (16 OPERATOR(pg_catalog.*) i OPERATOR(pg_catalog.+) 8) OPERATOR(pg_catalog.-) 8) OPERATOR(pg_catalog.*) 2) OPERATOR(pg_catalog.+) 1, 16))::pg_catalog.bit(64)::pg_catalog.int8;
                p := (x::pg_catalog.numeric OPERATOR(pg_catalog.+) CASE WHEN x OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN m ELSE 0::pg_catalog.numeric END) OPERATOR(pg_catalog.*) (y::pg_catalog.numeric OPERATOR(pg_catalog.+) CASE WHEN y OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN m ELSE 0::pg_catalog.numeric END);
                w := (CASE WHEN (p OPERATOR(pg_catalog.%) m) OPERATOR(pg_catalog.>=) half THEN (p OPERATOR(pg_catalog.%) m) OPERATOR(pg_catalog.-) m ELSE (p OPERATOR(pg_catalog.%) m) END)::pg_catalog.int8 OPERATOR(pg_catalog.#) (CASE WHEN pg_catalog.div(p, m) OPERATOR(pg_catalog.>=) half THEN pg_catalog.div(p, m) OPERATOR(pg_catalog.-) m ELSE pg_catalog.div(p, m) END)::pg_catalog.int8;
                acc := (acc OPERATOR(pg_catalog.+) (w::pg_catalog.numeric OPERATOR(pg_catalog.+) CASE WHEN w OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN m ELSE 0::pg_catalog.numeric END)) OPERATOR(pg_catalog.%) m;
            END LOOP;
            x := (CASE WHEN acc OPERATOR(pg_catalog.>=) half THEN acc OPERATOR(pg_catalog.-) m ELSE acc END)::pg_catalog.int8;
            x := x OPERATOR(pg_catalog.#) ((x OPERATOR(pg_catalog.>>) 37) OPERATOR(pg_catalog.&) 134217727::pg_catalog.int8);
            p := ((x::pg_catalog.numeric OPERATOR(pg_catalog.+) CASE WHEN x OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN m ELSE 0::pg_catalog.numeric END) OPERATOR(pg_catalog.*) mx1) OPERATOR(pg_catalog.%) m;
            x := (CASE WHEN p OPERATOR(pg_catalog.>=) half THEN p OPERATOR(pg_catalog.-) m ELSE p END)::pg_catalog.int8;
            x := x OPERATOR(pg_catalog.#) ((x OPERATOR(pg_catalog.>>) 32) OPERATOR(pg_catalog.&) 4294967295::pg_catalog.int8);
            acc := (x::pg_catalog.numeric OPERATOR(pg_catalog.+) CASE WHEN x OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN m ELSE 0::pg_catalog.numeric END);
            FOR i IN 8..(n OPERATOR(pg_catalog./) 16) OPERATOR(pg_catalog.-) 1 LOOP
                ins := ins OPERATOR(pg_catalog.||) (16 OPERATOR(pg_catalog.*) i);
                secs := secs OPERATOR(pg_catalog.||) ((16 OPERATOR(pg_catalog.*) (i OPERATOR(pg_catalog.-) 8)) OPERATOR(pg_catalog.+) 3);
            END LOOP;
            ins := ins OPERATOR(pg_catalog.||) (n OPERATOR(pg_catalog.-) 16);
            secs := secs OPERATOR(pg_catalog.||) 119;
        END IF;
        FOR i IN 1..pg_catalog.cardinality(ins) LOOP
            x := ('x'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.substr(h, (((n) OPERATOR(pg_catalog.-) (ins[i]) OPERATOR(pg_catalog.-) 8) OPERATOR(pg_catalog.*) 2) OPERATOR(pg_catalog.+) 1, 16))::pg_catalog.bit(64)::pg_catalog.int8 OPERATOR(pg_catalog.#) ('x'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.substr(sec, (((192) OPERATOR(pg_catalog.-) (secs[i]) OPERATOR(pg_catalog.-) 8) OPERATOR(pg_catalog.*) 2) OPERATOR(pg_catalog.+) 1, 16))::pg_catalog.bit(64)::pg_catalog.int8;
            y := ('x'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.substr(h, (((n) OPERATOR(pg_catalog.-) (ins[i] OPERATOR(pg_catalog.+) 8) OPERATOR(pg_catalog.-) 8) OPERATOR(pg_catalog.*) 2) OPERATOR(pg_catalog.+) 1, 16))::pg_catalog.bit(64)::pg_catalog.int8 OPERATOR(pg_catalog.#) ('x'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.substr(sec, (((192) OPERATOR(pg_catalog.-) (secs[i] OPERATOR(pg_catalog.+) 8) OPERATOR(pg_catalog.-) 8) OPERATOR(pg_catalog.*) 2) OPERATOR(pg_catalog.+) 1, 16))::pg_catalog.bit(64)::pg_catalog.int8;
            p := (x::pg_catalog.numeric OPERATOR(pg_catalog.+) CASE WHEN x OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN m ELSE 0::pg_catalog.numeric END) OPERATOR(pg_catalog.*) (y::pg_catalog.numeric OPERATOR(pg_catalog.+) CASE WHEN y OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN m ELSE 0::pg_catalog.numeric END);
            w := (CASE WHEN (p OPERATOR(pg_catalog.%) m) OPERATOR(pg_catalog.>=) half THEN (p OPERATOR(pg_catalog.%) m) OPERATOR(pg_catalog.-) m ELSE (p OPERATOR(pg_catalog.%) m) END)::pg_catalog.int8 OPERATOR(pg_catalog.#) (CASE WHEN pg_catalog.div(p, m) OPERATOR(pg_catalog.>=) half THEN pg_catalog.div(p, m) OPERATOR(pg_catalog.-) m ELSE pg_catalog.div(p, m) END)::pg_catalog.int8;
            acc := (acc OPERATOR(pg_catalog.+) (w::pg_catalog.numeric OPERATOR(pg_catalog.+) CASE WHEN w OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN m ELSE 0::pg_catalog.numeric END)) OPERATOR(pg_catalog.%) m;
        END LOOP;
        x := (CASE WHEN acc OPERATOR(pg_catalog.>=) half THEN acc OPERATOR(pg_catalog.-) m ELSE acc END)::pg_catalog.int8;
        x := x OPERATOR(pg_catalog.#) ((x OPERATOR(pg_catalog.>>) 37) OPERATOR(pg_catalog.&) 134217727::pg_catalog.int8);
        p := ((x::pg_catalog.numeric OPERATOR(pg_catalog.+) CASE WHEN x OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN m ELSE 0::pg_catalog.numeric END) OPERATOR(pg_catalog.*) mx1) OPERATOR(pg_catalog.%) m;
        x := (CASE WHEN p OPERATOR(pg_catalog.>=) half THEN p OPERATOR(pg_catalog.-) m ELSE p END)::pg_catalog.int8;
        x := x OPERATOR(pg_catalog.#) ((x OPERATOR(pg_catalog.>>) 32) OPERATOR(pg_catalog.&) 4294967295::pg_catalog.int8);
        RETURN x;
    END IF;
    -- Over 240 bytes: 8 accumulators over 64-byte stripes, scrambled after every 16 stripes.
    accs := ARRAY[3266489917, 11400714785074694791, 14029467366897019727, 1609587929392839161,
                  9650029242287828579, 2246822519, 2870177450012600261, 2654435761]::pg_catalog.numeric[];
    blocks := (n OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog./) 1024;
    FOR k IN 0..blocks LOOP
        stripes := CASE WHEN k OPERATOR(pg_catalog.<) blocks THEN 16 ELSE ((n OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog.-) (1024 OPERATOR(pg_catalog.*) blocks)) OPERATOR(pg_catalog./) 64 END;
        -- the last round also takes the last 64 bytes with the secret at 121
        FOR st IN 0..CASE WHEN k OPERATOR(pg_catalog.<) blocks THEN stripes OPERATOR(pg_catalog.-) 1 ELSE stripes END LOOP
            IF k OPERATOR(pg_catalog.=) blocks AND st OPERATOR(pg_catalog.=) stripes THEN
                io := n OPERATOR(pg_catalog.-) 64; so := 121;
            ELSE
                io := (1024 OPERATOR(pg_catalog.*) k) OPERATOR(pg_catalog.+) (64 OPERATOR(pg_catalog.*) st); so := 8 OPERATOR(pg_catalog.*) st;
            END IF;
            FOR j IN 0..7 LOOP
                x := ('x'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.substr(h, (((n) OPERATOR(pg_catalog.-) (io OPERATOR(pg_catalog.+) (8 OPERATOR(pg_catalog.*) j)) OPERATOR(pg_catalog.-) 8) OPERATOR(pg_catalog.*) 2) OPERATOR(pg_catalog.+) 1, 16))::pg_catalog.bit(64)::pg_catalog.int8;
                y := x OPERATOR(pg_catalog.#) ('x'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.substr(sec, (((192) OPERATOR(pg_catalog.-) (so OPERATOR(pg_catalog.+) (8 OPERATOR(pg_catalog.*) j)) OPERATOR(pg_catalog.-) 8) OPERATOR(pg_catalog.*) 2) OPERATOR(pg_catalog.+) 1, 16))::pg_catalog.bit(64)::pg_catalog.int8;
                accs[(j OPERATOR(pg_catalog.#) 1) OPERATOR(pg_catalog.+) 1] := (accs[(j OPERATOR(pg_catalog.#) 1) OPERATOR(pg_catalog.+) 1] OPERATOR(pg_catalog.+) (x::pg_catalog.numeric OPERATOR(pg_catalog.+) CASE WHEN x OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN m ELSE 0::pg_catalog.numeric END)) OPERATOR(pg_catalog.%) m;
                accs[j OPERATOR(pg_catalog.+) 1] := (accs[j OPERATOR(pg_catalog.+) 1] OPERATOR(pg_catalog.+) ((y OPERATOR(pg_catalog.&) 4294967295::pg_catalog.int8)::pg_catalog.numeric OPERATOR(pg_catalog.*) ((y OPERATOR(pg_catalog.>>) 32) OPERATOR(pg_catalog.&) 4294967295::pg_catalog.int8)::pg_catalog.numeric)) OPERATOR(pg_catalog.%) m;
            END LOOP;
        END LOOP;
        IF k OPERATOR(pg_catalog.<) blocks THEN
            FOR j IN 0..7 LOOP
                x := (CASE WHEN accs[j OPERATOR(pg_catalog.+) 1] OPERATOR(pg_catalog.>=) half THEN accs[j OPERATOR(pg_catalog.+) 1] OPERATOR(pg_catalog.-) m ELSE accs[j OPERATOR(pg_catalog.+) 1] END)::pg_catalog.int8;
                x := (x OPERATOR(pg_catalog.#) ((x OPERATOR(pg_catalog.>>) 47) OPERATOR(pg_catalog.&) 131071::pg_catalog.int8)) OPERATOR(pg_catalog.#) ('x'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.substr(sec, (((192) OPERATOR(pg_catalog.-) (128 OPERATOR(pg_catalog.+) (8 OPERATOR(pg_catalog.*) j)) OPERATOR(pg_catalog.-) 8) OPERATOR(pg_catalog.*) 2) OPERATOR(pg_catalog.+) 1, 16))::pg_catalog.bit(64)::pg_catalog.int8;
                accs[j OPERATOR(pg_catalog.+) 1] := ((x::pg_catalog.numeric OPERATOR(pg_catalog.+) CASE WHEN x OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN m ELSE 0::pg_catalog.numeric END) OPERATOR(pg_catalog.*) 2654435761::pg_catalog.numeric) OPERATOR(pg_catalog.%) m;
            END LOOP;
        END IF;
    END LOOP;
    FOR j IN 0..3 LOOP
        x := (CASE WHEN accs[(2 OPERATOR(pg_catalog.*) j) OPERATOR(pg_catalog.+) 1] OPERATOR(pg_catalog.>=) half THEN accs[(2 OPERATOR(pg_catalog.*) j) OPERATOR(pg_catalog.+) 1] OPERATOR(pg_catalog.-) m ELSE accs[(2 OPERATOR(pg_catalog.*) j) OPERATOR(pg_catalog.+) 1] END)::pg_catalog.int8 OPERATOR(pg_catalog.#) ('x'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.substr(sec, (((192) OPERATOR(pg_catalog.-) (11 OPERATOR(pg_catalog.+) (16 OPERATOR(pg_catalog.*) j)) OPERATOR(pg_catalog.-) 8) OPERATOR(pg_catalog.*) 2) OPERATOR(pg_catalog.+) 1, 16))::pg_catalog.bit(64)::pg_catalog.int8;
        y := (CASE WHEN accs[(2 OPERATOR(pg_catalog.*) j) OPERATOR(pg_catalog.+) 2] OPERATOR(pg_catalog.>=) half THEN accs[(2 OPERATOR(pg_catalog.*) j) OPERATOR(pg_catalog.+) 2] OPERATOR(pg_catalog.-) m ELSE accs[(2 OPERATOR(pg_catalog.*) j) OPERATOR(pg_catalog.+) 2] END)::pg_catalog.int8 OPERATOR(pg_catalog.#) ('x'::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.substr(sec, (((192) OPERATOR(pg_catalog.-) (19 OPERATOR(pg_catalog.+) (16 OPERATOR(pg_catalog.*) j)) OPERATOR(pg_catalog.-) 8) OPERATOR(pg_catalog.*) 2) OPERATOR(pg_catalog.+) 1, 16))::pg_catalog.bit(64)::pg_catalog.int8;
        p := (x::pg_catalog.numeric OPERATOR(pg_catalog.+) CASE WHEN x OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN m ELSE 0::pg_catalog.numeric END) OPERATOR(pg_catalog.*) (y::pg_catalog.numeric OPERATOR(pg_catalog.+) CASE WHEN y OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN m ELSE 0::pg_catalog.numeric END);
        w := (CASE WHEN (p OPERATOR(pg_catalog.%) m) OPERATOR(pg_catalog.>=) half THEN (p OPERATOR(pg_catalog.%) m) OPERATOR(pg_catalog.-) m ELSE (p OPERATOR(pg_catalog.%) m) END)::pg_catalog.int8 OPERATOR(pg_catalog.#) (CASE WHEN pg_catalog.div(p, m) OPERATOR(pg_catalog.>=) half THEN pg_catalog.div(p, m) OPERATOR(pg_catalog.-) m ELSE pg_catalog.div(p, m) END)::pg_catalog.int8;
        acc := (acc OPERATOR(pg_catalog.+) (w::pg_catalog.numeric OPERATOR(pg_catalog.+) CASE WHEN w OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN m ELSE 0::pg_catalog.numeric END)) OPERATOR(pg_catalog.%) m;
    END LOOP;
    x := (CASE WHEN acc OPERATOR(pg_catalog.>=) half THEN acc OPERATOR(pg_catalog.-) m ELSE acc END)::pg_catalog.int8;
    x := x OPERATOR(pg_catalog.#) ((x OPERATOR(pg_catalog.>>) 37) OPERATOR(pg_catalog.&) 134217727::pg_catalog.int8);
    p := ((x::pg_catalog.numeric OPERATOR(pg_catalog.+) CASE WHEN x OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN m ELSE 0::pg_catalog.numeric END) OPERATOR(pg_catalog.*) mx1) OPERATOR(pg_catalog.%) m;
    x := (CASE WHEN p OPERATOR(pg_catalog.>=) half THEN p OPERATOR(pg_catalog.-) m ELSE p END)::pg_catalog.int8;
    x := x OPERATOR(pg_catalog.#) ((x OPERATOR(pg_catalog.>>) 32) OPERATOR(pg_catalog.&) 4294967295::pg_catalog.int8);
    RETURN x;

END
$fn$;

CREATE FUNCTION idempotency.idem_lock_key(key pg_catalog.text)
RETURNS pg_catalog.int8
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN idempotency.idem_lock_key(''::pg_catalog.text, key);
END
$fn$;

-- The json forms: what the json value adds to its jsonb cast is checked first, in the native
-- order: numbers beyond the doubles (document order, quoted as written), then duplicate
-- member names (the first object in output order that has one, its least such name). A
-- \u0000 escape (jsonb cannot hold U+0000) travels as \u0001 through jsonb and back.
CREATE FUNCTION idempotency.idem_canonical(payload pg_catalog.json)
RETURNS pg_catalog.text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    t pg_catalog.text := payload::pg_catalog.text;
    -- escaped backslashes (\\) aside, so that only real escapes are seen and changed
    bare pg_catalog.text := pg_catalog.replace(t, E'\\\\'::pg_catalog.text, pg_catalog.chr(2));
    nul pg_catalog.bool := pg_catalog.strpos(bare, E'\\u0000'::pg_catalog.text) OPERATOR(pg_catalog.>) 0;
    checked pg_catalog.int8;
    duplicate pg_catalog.text;
    cut pg_catalog.int4;
    result pg_catalog.text;
BEGIN
    IF nul THEN
        IF pg_catalog.strpos(bare, E'\\u0001'::pg_catalog.text) OPERATOR(pg_catalog.>) 0 THEN
            RAISE EXCEPTION 'the portable idem_canonical(json) cannot take both \u0000 and \u0001 escapes'
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

CREATE FUNCTION idempotency.idem_hash(payload pg_catalog.json)
RETURNS pg_catalog.text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    RETURN pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(idempotency.idem_canonical(payload), 'UTF8'::pg_catalog.name)),
                         'hex'::pg_catalog.text);
END
$fn$;
