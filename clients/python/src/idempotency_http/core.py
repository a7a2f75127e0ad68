"""Framework-neutral pieces: settings, problem documents, responses, status mapping, the SQL.

Every statement names the extension's schema and casts every parameter to a schema-qualified
type, so a look-alike function on the app's search_path is never chosen (psycopg 3 sends a
``str`` untyped, which would let a ``text`` overload win over ``jsonb``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, List, Optional, Sequence, Tuple

from psycopg import sql

PROBLEM = "application/problem+json"
DEFAULT_PROBLEM_BASE = "https://datatracker.ietf.org/doc/draft-ietf-httpapi-idempotency-key-header#"
#: Never stored nor replayed, even when named in ``replay_headers``.
NEVER_REPLAYED = frozenset({
    "set-cookie", "set-cookie2", "authorization", "proxy-authorization", "www-authenticate",
    "proxy-authenticate", "refresh", "connection", "keep-alive", "transfer-encoding", "te",
    "trailer", "upgrade", "content-length", "date"})
#: 4xx statuses that end an attempt as retryable, not final.
RETRYABLE_4XX = frozenset({408, 409, 425, 429})
BODY_OMITTED = "idempotent-body-omitted"
REPLAYED = "idempotent-replayed"
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9a-z-]+$")

#: slug -> (status, title)
PROBLEMS = {
    "key-required": (400, "Idempotency-Key header is required"),
    "key-malformed": (400, "Idempotency-Key header is malformed"),
    "body-not-json": (400, "Request body is not valid JSON"),
    "body-too-large": (413, "Request body is too large"),
    "in-flight": (409, "A request with this Idempotency-Key is being processed"),
    "payload-mismatch": (422, "Idempotency-Key was used for a different request"),
    "too-many-waiters": (409, "Too many requests are waiting for their key"),
    "internal-error": (500, "Internal Server Error"),
}


def default_statuses(status: int) -> str:
    """'complete' (stored, replayed), 'fail' (final, replayed) or 'retry' (the key may be retried)."""
    if status < 400:
        return "complete"
    if status >= 500 or status in RETRYABLE_4XX:
        return "retry"
    return "fail"


@dataclass
class HttpResponse:
    """A response in neutral form. ``native`` is the framework's own object, sent unchanged."""

    status: int
    headers: List[Tuple[str, str]] = field(default_factory=list)
    body: Optional[bytes] = b""
    native: Any = None


@dataclass
class Claim:
    """What the handler gets: the connection to write with, inside the claim's transaction."""

    conn: Any
    scope: str
    key: str
    outcome: str
    attempt: int


@dataclass
class Settings:
    """The contract's knobs, with its defaults (docs/http.md)."""

    methods: Iterable[str] = ("POST", "PATCH")
    max_body_bytes: int = 1024 * 1024
    max_stored_bytes: int = 1024 * 1024
    max_error_stored_bytes: int = 8000
    max_wait: float = 10.0
    wait: float = 0.0
    max_waiters: int = 64
    lease: float = 300.0
    retention: float = 86400.0
    retry_after: int = 1
    problem_base: str = DEFAULT_PROBLEM_BASE
    replay_headers: Sequence[str] = ()
    statuses: Callable[[int], str] = default_statuses
    #: the extension's schema; None: looked up on first use (pg_extension, else the plain script's functions)
    schema: Optional[str] = None
    #: part of the default scope: two services sharing a database never share records, replicas
    #: of one service do. None: $IDEMPOTENCY_SERVICE, else a name taken from the app (docs/http.md)
    service: Optional[str] = None

    def __post_init__(self) -> None:
        self.methods = frozenset(m.upper() for m in self.methods)
        self.replay_headers = validate_replay_headers(self.replay_headers)
        if self.max_error_stored_bytes > 8000:
            raise ValueError("max_error_stored_bytes cannot exceed 8000 (idem_fail keeps 8,192 bytes)")

    def problem(self, slug: str, detail: str, headers: Sequence[Tuple[str, str]] = ()) -> HttpResponse:
        status, title = PROBLEMS[slug]
        doc = {"type": self.problem_base + slug, "title": title, "status": status, "detail": detail}
        return HttpResponse(status, [("content-type", PROBLEM), *headers], json.dumps(doc).encode())

    def in_flight(self, detail: str, slug: str = "in-flight") -> HttpResponse:
        return self.problem(slug, detail, [("retry-after", str(self.retry_after))])

    def wait_for(self, prefer: Optional[str]) -> float:
        from .keys import parse_prefer_wait

        asked = parse_prefer_wait(prefer)
        return max(0.0, min(self.wait if asked is None else asked, self.max_wait))


def validate_replay_headers(names: Iterable[str]) -> Tuple[str, ...]:
    out = []
    for name in names:
        low = str(name).strip().lower()
        if not _TOKEN.match(low):
            raise ValueError(f"replay_headers: {name!r} is not a header name")
        if low in NEVER_REPLAYED:
            raise ValueError(f"replay_headers: {low} is never replayed (docs/http.md)")
        out.append(low)
    return tuple(out)


def merge_headers(headers: Iterable[Tuple[str, str]]) -> dict:
    """Header lines as one {lower-case name: value} object (repeated names joined with ', ')."""
    merged: dict = {}
    for name, value in headers:
        name = name.lower()
        merged[name] = f"{merged[name]}, {value}" if name in merged else value
    return merged


def stored_parts(response: HttpResponse, settings: Settings, verdict: str,
                 keep: Sequence[str]) -> Tuple[dict, Optional[str]]:
    """(headers, body text) to store: without the body when it is not UTF-8 text or when the
    stored document would not fit its limit (then marked with Idempotent-Body-Omitted)."""
    allowed = set(keep) | {"cache-control", "content-language", "content-location", "content-type",
                           "etag", "expires", "last-modified", "link", "location"}
    headers = {k: v for k, v in merge_headers(response.headers).items()
               if k in allowed and k not in NEVER_REPLAYED and not _bad_value(v)}
    limit = settings.max_stored_bytes if verdict == "complete" else settings.max_error_stored_bytes
    body: Optional[str] = None
    omitted = response.body is None
    if response.body:
        try:
            body = response.body.decode("utf-8")
        except UnicodeDecodeError:
            omitted = True
    doc = {"status": response.status, "headers": headers, "body": body}
    if body is not None and len(json.dumps(doc, ensure_ascii=False).encode("utf-8")) > limit:
        body, omitted = None, True
    if omitted:
        headers[BODY_OMITTED] = "true"
    return headers, body


def _bad_value(value: str) -> bool:
    return any(ch in value for ch in "\r\n\x00")


def replayed(stored: Any) -> HttpResponse:
    """The response to send for a stored document (idem_http_replay's result)."""
    if isinstance(stored, (str, bytes)):  # Django's backend loads jsonb as text
        stored = json.loads(stored)
    headers = [(k, v) for k, v in (stored.get("headers") or {}).items()]
    headers.append((REPLAYED, "true"))
    body = stored.get("body")
    return HttpResponse(int(stored["status"]), headers, b"" if body is None else body.encode("utf-8"))


SERVICE_ENV = "IDEMPOTENCY_SERVICE"
SCOPE_MAX_BYTES = 255  # idempotency.requests.scope


def service_name(configured: Optional[str], from_app: Callable[[], str]) -> str:
    """``service=``, else $IDEMPOTENCY_SERVICE, else the app's own name."""
    name = configured or os.environ.get(SERVICE_ENV) or from_app()
    if name == "__main__":  # an app run as a script: its file's name
        main = getattr(sys.modules.get("__main__"), "__file__", None)
        name = os.path.splitext(os.path.basename(main))[0] if main else name
    if not isinstance(name, str) or not name:
        raise ValueError("service: a non-empty string is required")
    return name


def canonical_query(query: str) -> str:
    """The query string with its parameters sorted by name (a name's values keep their order)."""
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
    return urllib.parse.urlencode(sorted(pairs, key=lambda p: p[0]))


def default_scope(service: str, principal: Optional[str], method: str, route: str,
                  params: Any, query: str) -> str:
    """The default scope: who (service, principal) asks what (method, route pattern, the route
    parameters' values, the canonical query string), as a JSON array; past 255 bytes, a
    readable prefix and the SHA-256 of the whole."""
    text = json.dumps([service, principal, method.upper(), route, params or {}, canonical_query(query)],
                      ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=str)
    raw = text.encode("utf-8")
    if len(raw) <= SCOPE_MAX_BYTES:
        return text
    head = raw[:SCOPE_MAX_BYTES - 72].decode("utf-8", "ignore")
    return f"{head}#sha256:{hashlib.sha256(raw).hexdigest()}"


def identity_of(user: Any) -> Optional[str]:
    """A principal from a framework's user object: None when absent or not authenticated."""
    if user is None or getattr(user, "is_authenticated", True) is False:
        return None
    if isinstance(user, str):
        return user
    for attr in ("pk", "identity", "id", "username", "display_name"):
        try:
            value = getattr(user, attr)
        except (AttributeError, NotImplementedError):
            continue
        if value is not None and value != "":
            return str(value)
    get_id = getattr(user, "get_id", None)  # Flask-Login
    if callable(get_id):
        return str(get_id())
    raise ValueError(f"cannot tell which principal a {type(user).__name__} is: pass principal=")


def interval(seconds: float) -> str:
    return f"{seconds:.3f} seconds"


class Statements:
    """The adapter's SQL for one schema: every function qualified, every parameter cast."""

    #: the extension's schema, and who besides its owner may create functions in it
    _WRITERS = (
        "(SELECT pg_catalog.string_agg(CASE WHEN a.grantee "
        "OPERATOR(pg_catalog.=) 0::pg_catalog.oid THEN 'PUBLIC'::pg_catalog.text ELSE "
        "a.grantee::pg_catalog.regrole::pg_catalog.text END, ', '::pg_catalog.text) "
        "FROM pg_catalog.aclexplode(n.nspacl) AS a WHERE a.privilege_type OPERATOR(pg_catalog.=) "
        "'CREATE'::pg_catalog.text AND a.grantee OPERATOR(pg_catalog.<>) n.nspowner)")
    FIND_SCHEMA = (
        "SELECT n.nspname::pg_catalog.text, " + _WRITERS + ", 1, n.nspname::pg_catalog.text "
        "FROM pg_catalog.pg_extension AS e JOIN pg_catalog.pg_namespace AS n "
        "ON n.oid OPERATOR(pg_catalog.=) e.extnamespace "
        "WHERE e.extname OPERATOR(pg_catalog.=) 'idempotency'::pg_catalog.name")
    #: without the extension (the portable edition's plain script): the schemas holding both
    #: idem_claim and idem_http_replay; the first, how many, and all their names
    FIND_PLAIN = (
        "SELECT n.nspname::pg_catalog.text, " + _WRITERS + ", pg_catalog.count(*) OVER ()::pg_catalog.int4, "
        "pg_catalog.string_agg(n.nspname::pg_catalog.text, ', '::pg_catalog.text) OVER () "
        "FROM pg_catalog.pg_namespace AS n WHERE "
        + " AND ".join(f"EXISTS (SELECT FROM pg_catalog.pg_proc AS p WHERE p.pronamespace "
                       f"OPERATOR(pg_catalog.=) n.oid AND p.proname OPERATOR(pg_catalog.=) "
                       f"'{name}'::pg_catalog.name)" for name in ("idem_claim", "idem_http_replay"))
        + " ORDER BY n.nspname LIMIT 1")

    @classmethod
    def found(cls, row: Any) -> "Statements":
        """Statements for FIND_SCHEMA's (or FIND_PLAIN's) row; a loud warning when others may
        plant functions there."""
        if row is None:
            raise RuntimeError("the idempotency functions are not in this database (CREATE EXTENSION "
                               "idempotency, or the portable edition's script); if they are in a "
                               "schema this role cannot see, pass schema=")
        schema, writers, count, names = row
        if count > 1:
            raise RuntimeError(f"the idempotency extension is not installed and functions of its names "
                               f"are in several schemas ({names}): pass schema= to name the right one")
        if writers:
            logging.getLogger("idempotency_http").warning(
                "schema %s of the idempotency extension is writable by %s: they can plant "
                "look-alike functions there (the adapter's calls are typed and qualified, but "
                "other SQL may not be); REVOKE CREATE ON SCHEMA %s FROM them", schema, writers, schema)
        return cls(schema)

    def __init__(self, schema: str):
        s = sql.Identifier(schema)
        #: request_hash by fingerprint kind: given ('hash'), or computed in SQL (RFC 8785)
        hashes = {
            "hash": "%s::pg_catalog.text",
            "json": "{s}.idem_hash(%s::pg_catalog.jsonb)",
            "form": ("pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to('form:'::pg_catalog.text "
                     "OPERATOR(pg_catalog.||) {s}.idem_canonical(%s::pg_catalog.jsonb), "
                     "'UTF8'::pg_catalog.name)), 'hex'::pg_catalog.text)"),
        }
        self.hash_json = sql.SQL("SELECT " + hashes["json"]).format(s=s)
        self.hash_form = sql.SQL("SELECT " + hashes["form"]).format(s=s)
        #: the claim by kind, the hash computed in the same statement (one round trip)
        self.claims = {kind: sql.SQL(
            "SELECT c.outcome::pg_catalog.text, c.attempt, {s}.idem_http_replay(c, %s::pg_catalog.text[]) "
            "FROM {s}.idem_claim(%s::pg_catalog.text, %s::pg_catalog.text, " + expr + ", "
            "lease => %s::pg_catalog.interval, retention => %s::pg_catalog.interval) AS c").format(s=s)
            for kind, expr in hashes.items()}
        response = ("{s}.idem_http_response(%s::pg_catalog.int4, %s::pg_catalog.jsonb, "
                    "%s::pg_catalog.text, %s::pg_catalog.text[])")
        self.complete = sql.SQL(
            "SELECT {s}.idem_complete(%s::pg_catalog.text, %s::pg_catalog.text, " + response
            + ", %s::pg_catalog.int4)").format(s=s)
        self.http_fail = sql.SQL(
            "SELECT {s}.idem_http_fail(%s::pg_catalog.text, %s::pg_catalog.text, " + response
            + ", %s::pg_catalog.int4)").format(s=s)
        self.fail_retryable = sql.SQL(
            "SELECT {s}.idem_fail(%s::pg_catalog.text, %s::pg_catalog.text, true, "
            "%s::pg_catalog.text, %s::pg_catalog.text, %s::pg_catalog.int4)").format(s=s)

    def hash_statement(self, kind: str):
        return self.hash_json if kind == "json" else self.hash_form
