"""Paths, logging and sizes as text, shared by the suite and the report."""

import os

# bench/ (this package's parent folder): the scripts, payload and SQL the suite runs.
BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(BENCH, "scripts")


def log(msg):
    print(msg, flush=True)


def human(n):
    n = int(n)
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


def parse_size(s):
    s = s.strip().lower()
    mult = 1
    if s.endswith("m"):
        mult, s = 1_000_000, s[:-1]
    elif s.endswith("k"):
        mult, s = 1000, s[:-1]
    return int(float(s) * mult)
