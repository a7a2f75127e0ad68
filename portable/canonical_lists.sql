-- The portable idem_canonical(jsonb)'s containers, for what its fast path does not take
-- (portable/canonical.sql): _idem_jcs_container (one container) and _idem_jcs_rows (a list of
-- values, one level at a time). Included by scripts/portable.sh after portable/canonical.sql;
-- the objects go into schema idempotency. How it works: docs/portable-canonical.md.
-- Every function runs with search_path = pg_catalog, pg_temp and names every operator,
-- function, type and collation with its schema. Both force generic plans: a custom plan would
-- be planned again at every call (the plan cache keeps choosing it for these statements),
-- which costs more than the call.

-- The canonical texts of `items` (jsonb values, NULL stays NULL), in order. `refs`: each
-- item's ref (see _idem_jcs_container). A statement costs ~10-50 us to start and a value well
-- under 1 us, so values are taken a list, one level, at a time, and calls nest about one per
-- level (at most 128, a few kB of stack each):
-- * a list of objects whose names are all among the (at most 64) names of its first 8
--   objects, dense enough (see below), is a list of records, written name by name: the names
--   sorted once, each object's values looked up (a missing one is NULL, which string_agg
--   skips); the containers under a name where one of the first 8 objects holds one are made
--   by one call for the whole list, any other by a call of its own (about 65 us);
-- * any other list: each container at most half its ref goes through the fast path; the
--   children of the others, all together, are the list of the level below; each container's
--   text is then made from its children's, in name order or element order.
-- A value's token: t is its text, or '{' / '[' for a container (in a list of records, its
-- whole text, and NULL for a missing name: the container branch's STRICT call passes the NULL
-- on, which string_agg skips). Numbers: numeric_out never writes an exponent, and a decimal of
-- at most 15 significant digits from 1e-6 up is its own shortest round-trip form; any other
-- goes through _idem_jcs_number (deferred). Names sort in UTF-16 order: as text in collation
-- "C" (UTF-8 bytes), through _idem_jcs_sort_key beyond ASCII, in a UTF8 database; as UTF-8
-- bytes in any other.
-- (An aggregate over unnest or jsonb_each without ORDER BY takes the rows in their order.)
CREATE FUNCTION idempotency._idem_jcs_rows(items pg_catalog.jsonb[], refs pg_catalog.int4[])
RETURNS pg_catalog.text[]
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $fn$
DECLARE
    n pg_catalog.int4 := pg_catalog.cardinality(items);
    utf8 constant pg_catalog.bool := pg_catalog.getdatabaseencoding() OPERATOR(pg_catalog.=) 'UTF8'::pg_catalog.name;
    names pg_catalog.text[];
    prefixes pg_catalog.text[];
    cols pg_catalog.int8[] := '{}'::pg_catalog.int8[];  -- the names whose containers are batched
    nested pg_catalog.text[] := '{}'::pg_catalog.text[];  -- (position in cols - 1) * n + item: a container's text
    j pg_catalog.int8;
    k pg_catalog.int4;  -- how many names
    keyed pg_catalog.bool := false;  -- every item NULL, or an object of those names only
    total pg_catalog.numeric;  -- the items' jsonb bytes
    fasts pg_catalog.text[];  -- an item's text, where the fast path takes it
    kids pg_catalog.jsonb[];  -- the children of the other containers, in order
    kidrefs pg_catalog.int4[];
    parents pg_catalog.int8[];  -- the item each child is of
    keys pg_catalog.text[];  -- the child's name (NULL: an element)
    texts pg_catalog.text[];  -- the child's canonical text
BEGIN
    IF n OPERATOR(pg_catalog.>) 1 THEN
        names := ARRAY(SELECT s.name FROM (
                           SELECT DISTINCT k.k AS name
                           FROM (SELECT i.it FROM pg_catalog.unnest(items) i (it) WHERE i.it IS NOT NULL LIMIT 8) f,
                                pg_catalog.jsonb_object_keys(CASE WHEN pg_catalog.jsonb_typeof(f.it) OPERATOR(pg_catalog.=) 'object'::pg_catalog.text THEN f.it END) k (k)) s
                       ORDER BY (CASE WHEN utf8 THEN CASE WHEN pg_catalog.octet_length(s.name) OPERATOR(pg_catalog.=) pg_catalog.length(s.name) THEN s.name ELSE idempotency._idem_jcs_sort_key(s.name) END END) COLLATE pg_catalog."C",
                 CASE WHEN NOT utf8 THEN pg_catalog.convert_to(idempotency._idem_jcs_sort_key(s.name), 'UTF8'::pg_catalog.name) END);
        k := pg_catalog.cardinality(names);
        -- At most 64 names (each record's check costs its members times the names), and the
        -- records dense enough that n * k lookups cost no more than reading them: a member
        -- takes 8 bytes or more in jsonb, so records holding half the names pass.
        IF k OPERATOR(pg_catalog.>) 0 AND k OPERATOR(pg_catalog.<=) 64 THEN
            SELECT pg_catalog.bool_and(i.it IS NULL
                       OR (pg_catalog.jsonb_typeof(i.it) OPERATOR(pg_catalog.=) 'object'::pg_catalog.text
                           AND (i.it OPERATOR(pg_catalog.-) names) OPERATOR(pg_catalog.=) '{}'::pg_catalog.jsonb)),
                   pg_catalog.sum(pg_catalog.pg_column_size(i.it))
            INTO keyed, total
            FROM pg_catalog.unnest(items) i (it);
        END IF;
        IF keyed AND (n::pg_catalog.int8 OPERATOR(pg_catalog.*) k OPERATOR(pg_catalog.*) 4) OPERATOR(pg_catalog.<=) total THEN
            prefixes := ARRAY(SELECT pg_catalog.to_json(x.n)::pg_catalog.text OPERATOR(pg_catalog.||) ':'::pg_catalog.text FROM pg_catalog.unnest(names) x (n));
            FOR j IN SELECT DISTINCT u.j
                     FROM (SELECT i.it FROM pg_catalog.unnest(items) i (it) WHERE i.it IS NOT NULL LIMIT 8) f,
                          pg_catalog.unnest(names) WITH ORDINALITY u (name, j)
                     WHERE pg_catalog.jsonb_typeof(f.it OPERATOR(pg_catalog.->) u.name) OPERATOR(pg_catalog.=) ANY ('{object,array}'::pg_catalog.text[]) LOOP
                cols := cols OPERATOR(pg_catalog.||) j;
                nested := nested OPERATOR(pg_catalog.||) idempotency._idem_jcs_rows(ARRAY(
                           SELECT CASE WHEN pg_catalog.jsonb_typeof(i.it OPERATOR(pg_catalog.->) names[j]) OPERATOR(pg_catalog.=) ANY ('{object,array}'::pg_catalog.text[])
                                       THEN i.it OPERATOR(pg_catalog.->) names[j] END
                           FROM pg_catalog.unnest(items) i (it)), refs);
            END LOOP;
            RETURN ARRAY(
                SELECT CASE WHEN x.it IS NOT NULL THEN '{'::pg_catalog.text OPERATOR(pg_catalog.||) COALESCE((
                           SELECT pg_catalog.string_agg(g.prefix OPERATOR(pg_catalog.||) CASE WHEN g.t IS NULL OR pg_catalog.ascii(g.t) OPERATOR(pg_catalog.=) ANY ('{91,123}'::pg_catalog.int4[]) THEN COALESCE(nested[((pg_catalog.array_position(cols, g.j::pg_catalog.int8) OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog.*) n OPERATOR(pg_catalog.+) x.i)::pg_catalog.int4], idempotency._idem_jcs_container(x.it OPERATOR(pg_catalog.->) g.name, refs[x.i::pg_catalog.int4]))
                 WHEN pg_catalog.ascii(g.t) OPERATOR(pg_catalog.=) ANY ('{34,102,110,116}'::pg_catalog.int4[]) OR (pg_catalog.strpos(g.t, '.'::pg_catalog.text) OPERATOR(pg_catalog.=) 0 AND pg_catalog.octet_length(g.t) OPERATOR(pg_catalog.<=) 15) THEN g.t
                 WHEN pg_catalog.strpos(g.t, '.'::pg_catalog.text) OPERATOR(pg_catalog.>) 0 AND pg_catalog.octet_length(g.t) OPERATOR(pg_catalog.<=) 16 AND NOT pg_catalog.starts_with(pg_catalog.ltrim(g.t, '-'::pg_catalog.text), '0.000000'::pg_catalog.text) THEN pg_catalog.rtrim(pg_catalog.rtrim(g.t, '0'::pg_catalog.text), '.'::pg_catalog.text)
                 ELSE idempotency._idem_jcs_number(g.t::pg_catalog.numeric, ''::pg_catalog.text) END, ','::pg_catalog.text)
                           FROM (SELECT prefixes[u.j] AS prefix, u.j, names[u.j] AS name, (x.it OPERATOR(pg_catalog.->) names[u.j])::pg_catalog.text AS t
                                 FROM pg_catalog.generate_series(1, k) u (j) OFFSET 0) g), ''::pg_catalog.text) OPERATOR(pg_catalog.||) '}'::pg_catalog.text END
                FROM pg_catalog.unnest(items) WITH ORDINALITY x (it, i)
                ORDER BY x.i);
        END IF;
    END IF;
    -- Any other list. A child's ref is its parent's size if the fast path tested the parent,
    -- else the parent's ref.
    fasts := ARRAY(SELECT CASE WHEN pg_catalog.jsonb_typeof(x.it) OPERATOR(pg_catalog.=) ANY ('{object,array}'::pg_catalog.text[])
                                    AND pg_catalog.pg_column_size(x.it) OPERATOR(pg_catalog.*) 2 OPERATOR(pg_catalog.<=) refs[x.i::pg_catalog.int4]
                               THEN idempotency._idem_jcs_fast(x.it) END
                   FROM pg_catalog.unnest(items) WITH ORDINALITY x (it, i) ORDER BY x.i);
    SELECT pg_catalog.array_agg(c.value), pg_catalog.array_agg(x.i), pg_catalog.array_agg(c.key), pg_catalog.array_agg(x.ref)
    INTO kids, parents, keys, kidrefs
    FROM (SELECT i.it, i.i, CASE WHEN pg_catalog.pg_column_size(i.it) OPERATOR(pg_catalog.*) 2 OPERATOR(pg_catalog.<=) refs[i.i::pg_catalog.int4]
                                 THEN pg_catalog.pg_column_size(i.it) ELSE refs[i.i::pg_catalog.int4] END AS ref
          FROM pg_catalog.unnest(items) WITH ORDINALITY i (it, i)
          WHERE fasts[i.i::pg_catalog.int4] IS NULL) x
    CROSS JOIN LATERAL (
        SELECT m.key, m.value
        FROM pg_catalog.jsonb_each(CASE WHEN pg_catalog.jsonb_typeof(x.it) OPERATOR(pg_catalog.=) 'object'::pg_catalog.text THEN x.it END) m
      UNION ALL
        SELECT NULL::pg_catalog.text, a.value
        FROM pg_catalog.jsonb_array_elements(CASE WHEN pg_catalog.jsonb_typeof(x.it) OPERATOR(pg_catalog.=) 'array'::pg_catalog.text THEN x.it END) a) c;
    IF kids IS NOT NULL THEN
        texts := idempotency._idem_jcs_rows(kids, kidrefs);
    END IF;
    RETURN ARRAY(
        SELECT CASE WHEN x.t IS NULL THEN NULL::pg_catalog.text
                    WHEN fasts[x.i::pg_catalog.int4] IS NOT NULL THEN fasts[x.i::pg_catalog.int4]
                    WHEN x.t OPERATOR(pg_catalog.=) '{'::pg_catalog.text THEN '{'::pg_catalog.text OPERATOR(pg_catalog.||) COALESCE(g.body, ''::pg_catalog.text) OPERATOR(pg_catalog.||) '}'::pg_catalog.text
                    WHEN x.t OPERATOR(pg_catalog.=) '['::pg_catalog.text THEN '['::pg_catalog.text OPERATOR(pg_catalog.||) COALESCE(g.body, ''::pg_catalog.text) OPERATOR(pg_catalog.||) ']'::pg_catalog.text
                    ELSE CASE WHEN x.t OPERATOR(pg_catalog.=) ANY ('{"{","["}'::pg_catalog.text[]) THEN NULL::pg_catalog.text
                 WHEN pg_catalog.ascii(x.t) OPERATOR(pg_catalog.=) ANY ('{34,102,110,116}'::pg_catalog.int4[]) OR (pg_catalog.strpos(x.t, '.'::pg_catalog.text) OPERATOR(pg_catalog.=) 0 AND pg_catalog.octet_length(x.t) OPERATOR(pg_catalog.<=) 15) THEN x.t
                 WHEN pg_catalog.strpos(x.t, '.'::pg_catalog.text) OPERATOR(pg_catalog.>) 0 AND pg_catalog.octet_length(x.t) OPERATOR(pg_catalog.<=) 16 AND NOT pg_catalog.starts_with(pg_catalog.ltrim(x.t, '-'::pg_catalog.text), '0.000000'::pg_catalog.text) THEN pg_catalog.rtrim(pg_catalog.rtrim(x.t, '0'::pg_catalog.text), '.'::pg_catalog.text)
                 ELSE idempotency._idem_jcs_number(x.t::pg_catalog.numeric, ''::pg_catalog.text) END END
        FROM (SELECT i.i, CASE WHEN pg_catalog.jsonb_typeof(i.it) OPERATOR(pg_catalog.=) ANY ('{object,array}'::pg_catalog.text[]) THEN pg_catalog.translate(pg_catalog.left(pg_catalog.jsonb_typeof(i.it), 1), 'oa'::pg_catalog.text, '{['::pg_catalog.text) ELSE (i.it)::pg_catalog.text END AS t
              FROM pg_catalog.unnest(items) WITH ORDINALITY i (it, i) OFFSET 0) x
        LEFT JOIN (
            SELECT u.p, pg_catalog.string_agg(CASE WHEN u.k IS NULL THEN ''::pg_catalog.text ELSE pg_catalog.to_json(u.k)::pg_catalog.text OPERATOR(pg_catalog.||) ':'::pg_catalog.text END
                                                   OPERATOR(pg_catalog.||) u.t,
                                               ','::pg_catalog.text ORDER BY (CASE WHEN utf8 THEN CASE WHEN pg_catalog.octet_length(u.k) OPERATOR(pg_catalog.=) pg_catalog.length(u.k) THEN u.k ELSE idempotency._idem_jcs_sort_key(u.k) END END) COLLATE pg_catalog."C",
                 CASE WHEN NOT utf8 THEN pg_catalog.convert_to(idempotency._idem_jcs_sort_key(u.k), 'UTF8'::pg_catalog.name) END, u.pos) AS body
            FROM ROWS FROM (pg_catalog.unnest(parents), pg_catalog.unnest(keys), pg_catalog.unnest(texts)) WITH ORDINALITY u (p, k, t, pos)
            GROUP BY u.p) g ON g.p OPERATOR(pg_catalog.=) x.i
        ORDER BY x.i);
END
$fn$;

-- The canonical text of an array or object (of at most 128 levels). `ref` is the jsonb size of
-- the nearest container above it that the fast path tested: this one is tested too if it is at
-- most half that size (so that the text tested is at most log2(size) times the payload's) and
-- of 4 kB or more (a smaller one costs less to walk than to test). Otherwise a small one is one
-- statement, and the elements, or the members' values, of a larger one go through
-- _idem_jcs_rows, a level at a time.
CREATE FUNCTION idempotency._idem_jcs_container(v pg_catalog.jsonb, ref pg_catalog.int4)
RETURNS pg_catalog.text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_generic_plan
AS $fn$
DECLARE
    fast pg_catalog.text;
    size pg_catalog.int4;
    utf8 constant pg_catalog.bool := pg_catalog.getdatabaseencoding() OPERATOR(pg_catalog.=) 'UTF8'::pg_catalog.name;
    vals pg_catalog.jsonb[];
    texts pg_catalog.text[];
BEGIN
    size := pg_catalog.pg_column_size(v);
    IF size OPERATOR(pg_catalog.*) 2 OPERATOR(pg_catalog.<=) ref AND size OPERATOR(pg_catalog.>=) 4096 THEN
        fast := idempotency._idem_jcs_fast(v);
        IF fast IS NOT NULL THEN
            RETURN fast;
        END IF;
        ref := size;
    END IF;
    IF size OPERATOR(pg_catalog.<) 4096 THEN
        -- A small container (a request body): one statement walks it. Every value gets a path
        -- (bytea) that sorts in output order, and a token; the tokens, and a closing token per
        -- container at path || ff, are concatenated in path order. A member's path step is its
        -- name's sort key in UTF-8 and 00 (jsonb names hold no U+0000), an element's its
        -- position (1 byte below 240, else F0 and 4 bytes). Member and element tokens start
        -- with ',' and opening brackets end with U+0001, never raw in canonical text; the pair
        -- is then deleted.
        RETURN (
        WITH RECURSIVE node (path, prefix, value, t) AS (
            SELECT ''::pg_catalog.bytea, ''::pg_catalog.text, v, CASE WHEN pg_catalog.jsonb_typeof(v) OPERATOR(pg_catalog.=) ANY ('{object,array}'::pg_catalog.text[]) THEN pg_catalog.translate(pg_catalog.left(pg_catalog.jsonb_typeof(v), 1), 'oa'::pg_catalog.text, '{['::pg_catalog.text) ELSE (v)::pg_catalog.text END
          UNION ALL
            SELECT n.path OPERATOR(pg_catalog.||) c.step, c.prefix, c.value, CASE WHEN pg_catalog.jsonb_typeof(c.value) OPERATOR(pg_catalog.=) ANY ('{object,array}'::pg_catalog.text[]) THEN pg_catalog.translate(pg_catalog.left(pg_catalog.jsonb_typeof(c.value), 1), 'oa'::pg_catalog.text, '{['::pg_catalog.text) ELSE (c.value)::pg_catalog.text END
            FROM node n
            CROSS JOIN LATERAL (
                SELECT pg_catalog.convert_to(CASE WHEN pg_catalog.octet_length(e.key) OPERATOR(pg_catalog.=) pg_catalog.length(e.key) THEN e.key
                                                  ELSE idempotency._idem_jcs_sort_key(e.key) END, 'UTF8'::pg_catalog.name)
                           OPERATOR(pg_catalog.||) E'\\x00'::pg_catalog.bytea AS step,
                       ','::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.to_json(e.key)::pg_catalog.text OPERATOR(pg_catalog.||) ':'::pg_catalog.text AS prefix, e.value
                FROM pg_catalog.jsonb_each(CASE WHEN n.t OPERATOR(pg_catalog.=) '{'::pg_catalog.text THEN n.value END) e
              UNION ALL
                SELECT CASE WHEN a.ord OPERATOR(pg_catalog.<) 240::pg_catalog.int8 THEN pg_catalog.substr(pg_catalog.int4send(a.ord::pg_catalog.int4), 4)
                            ELSE E'\\xf0'::pg_catalog.bytea OPERATOR(pg_catalog.||) pg_catalog.int4send(a.ord::pg_catalog.int4) END,
                       ','::pg_catalog.text, a.value
                FROM pg_catalog.jsonb_array_elements(CASE WHEN n.t OPERATOR(pg_catalog.=) '['::pg_catalog.text THEN n.value END) WITH ORDINALITY a (value, ord)) c
            WHERE n.t OPERATOR(pg_catalog.=) ANY ('{"{","["}'::pg_catalog.text[]))
        SELECT pg_catalog.replace(pg_catalog.replace(pg_catalog.string_agg(x.token, ''::pg_catalog.text ORDER BY x.path),
                   pg_catalog.chr(1) OPERATOR(pg_catalog.||) ','::pg_catalog.text, ''::pg_catalog.text), pg_catalog.chr(1), ''::pg_catalog.text)
        FROM (SELECT n.path, n.prefix OPERATOR(pg_catalog.||) CASE WHEN n.t OPERATOR(pg_catalog.=) ANY ('{"{","["}'::pg_catalog.text[]) THEN n.t OPERATOR(pg_catalog.||) pg_catalog.chr(1)
                 WHEN pg_catalog.ascii(n.t) OPERATOR(pg_catalog.=) ANY ('{34,102,110,116}'::pg_catalog.int4[]) OR (pg_catalog.strpos(n.t, '.'::pg_catalog.text) OPERATOR(pg_catalog.=) 0 AND pg_catalog.octet_length(n.t) OPERATOR(pg_catalog.<=) 15) THEN n.t
                 WHEN pg_catalog.strpos(n.t, '.'::pg_catalog.text) OPERATOR(pg_catalog.>) 0 AND pg_catalog.octet_length(n.t) OPERATOR(pg_catalog.<=) 16 AND NOT pg_catalog.starts_with(pg_catalog.ltrim(n.t, '-'::pg_catalog.text), '0.000000'::pg_catalog.text) THEN pg_catalog.rtrim(pg_catalog.rtrim(n.t, '0'::pg_catalog.text), '.'::pg_catalog.text)
                 ELSE idempotency._idem_jcs_number(n.t::pg_catalog.numeric, ''::pg_catalog.text) END AS token
              FROM node n
            UNION ALL
              SELECT n.path OPERATOR(pg_catalog.||) E'\\xff'::pg_catalog.bytea, CASE WHEN n.t OPERATOR(pg_catalog.=) '{'::pg_catalog.text THEN '}'::pg_catalog.text ELSE ']'::pg_catalog.text END
              FROM node n WHERE n.t OPERATOR(pg_catalog.=) ANY ('{"{","["}'::pg_catalog.text[])) x);
    END IF;
    IF pg_catalog.jsonb_typeof(v) OPERATOR(pg_catalog.=) 'array'::pg_catalog.text THEN
        RETURN '['::pg_catalog.text OPERATOR(pg_catalog.||) pg_catalog.array_to_string(idempotency._idem_jcs_rows(
                   ARRAY(SELECT e.value FROM pg_catalog.jsonb_array_elements(v) e),
                   pg_catalog.array_fill(ref, ARRAY[pg_catalog.jsonb_array_length(v)])), ','::pg_catalog.text)
               OPERATOR(pg_catalog.||) ']'::pg_catalog.text;
    END IF;
    vals := ARRAY(SELECT m.value FROM pg_catalog.jsonb_each(v) m);
    texts := idempotency._idem_jcs_rows(vals, pg_catalog.array_fill(ref, ARRAY[pg_catalog.cardinality(vals)]));
    RETURN '{'::pg_catalog.text OPERATOR(pg_catalog.||) COALESCE((
               SELECT pg_catalog.string_agg(pg_catalog.to_json(m.key)::pg_catalog.text OPERATOR(pg_catalog.||) ':'::pg_catalog.text OPERATOR(pg_catalog.||) texts[m.i::pg_catalog.int4],
                   ','::pg_catalog.text ORDER BY (CASE WHEN utf8 THEN CASE WHEN pg_catalog.octet_length(m.key) OPERATOR(pg_catalog.=) pg_catalog.length(m.key) THEN m.key ELSE idempotency._idem_jcs_sort_key(m.key) END END) COLLATE pg_catalog."C",
                 CASE WHEN NOT utf8 THEN pg_catalog.convert_to(idempotency._idem_jcs_sort_key(m.key), 'UTF8'::pg_catalog.name) END)
               FROM pg_catalog.jsonb_each(v) WITH ORDINALITY m (key, value, i)), ''::pg_catalog.text)
           OPERATOR(pg_catalog.||) '}'::pg_catalog.text;
END
$fn$;
