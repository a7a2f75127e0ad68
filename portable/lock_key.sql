-- The portable edition's idem_lock_key (XXH3-64), in PL/pgSQL: the native function's 64-bit
-- values. Included by scripts/portable.sh after portable/canonical.sql, whose header rules
-- (pinned search_path, every name schema-qualified) it follows.

-- idem_lock_key: XXH3-64 (seed 0) over u32_le(octet length of scope) || scope || key in UTF-8,
-- as a signed bigint, following xxhash's XXH3_64bits step by step (the input is at least the
-- 4 bytes of the length, so the 0..3-byte cases never arise). 64-bit words are int8 bit
-- patterns for xor and shifts (>> masked to be logical), and numerics in [0, 2^64) for
-- wrapping sums and products. Little-endian words are read as big-endian hex of the
-- byte-reversed input. Inline arithmetic: a helper function per step costs ~2 us a call.
-- The body of idem_lock_key (sql/canonical.sql declares it).
BODY idem_lock_key_scoped_wrapper LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
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

-- The body of idem_lock_key (sql/canonical.sql declares it).
BODY idem_lock_key_wrapper LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    RETURN idempotency.idem_lock_key(''::pg_catalog.text, key);
END
$fn$;
