"""The contenders' tables, the workloads (their pgbench scripts and what each must write) and
the columns of results.csv."""

TABLES = {
    "ext": "idempotency.requests",
    "ref": "ref.requests",
    "floor": "floor.requests",
    "one": "idempotency.requests",
    "steps": "idempotency.requests",
}

# variant -> pgbench -f arguments (script[@weight]).
WORKLOADS = {
    "new": {
        "title": "new key: claim + complete in one transaction",
        "variants": {v: [f"new.{v}.sql"] for v in ("ext", "ref", "floor")},
        "reset": True,
        "expect": "new",
    },
    "replay": {
        "title": "replay of a completed key",
        "variants": {v: [f"replay.{v}.sql"] for v in ("ext", "ref", "floor")},
        "reset": False,
        "expect": "read",
    },
    "active": {
        "title": "claim while another worker's committed claim holds the key (live lease)",
        "variants": {v: [f"active.{v}.sql"] for v in ("ext", "ref", "floor")},
        "reset": False,
        "expect": "read",
    },
    "active_open": {
        "title": "claim while another session's claim of the key is not committed yet",
        "variants": {v: [f"active_open.{v}.sql"] for v in ("ext", "ref", "floor")},
        "reset": True,
        "expect": "held",
        "holder": True,
    },
    "mixed": {
        "title": "mixed: 90% replay, 10% new (claim + complete)",
        "variants": {v: [f"replay.{v}.sql@9", f"new.{v}.sql@1"] for v in ("ext", "ref", "floor")},
        "reset": True,
        "expect": "mixed",
    },
    "hash": {
        "title": "hash a ~1 KB JSON request body",
        "variants": {v: [f"hash.{v}.sql"] for v in ("ext", "ref", "floor")},
        "reset": False,
        "expect": "none",
        "payload": True,
        "sync": ["on"],
    },
    "call": {
        "title": "idem_call (one statement) against claim + function + complete as three statements",
        "variants": {"one": ["call.one.sql"], "steps": ["call.steps.sql"]},
        "reset": True,
        "expect": "new",
        "requires": "idem_call",
    },
}

FIELDS = [
    "step", "round", "phase", "workload", "variant", "clients", "sync", "size", "rows_at_start",
    "duration_s", "tps", "transactions", "failed", "lat_avg_ms", "p50_ms", "p90_ms", "p95_ms",
    "p99_ms", "p999_ms", "max_ms", "server_us_tx", "client_us_tx", "ins", "upd", "check",
    "load1_start", "load1_end", "other_cores", "steal_cores", "seed", "started_at", "note",
]
