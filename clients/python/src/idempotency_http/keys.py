"""The request side of the contract: the Idempotency-Key header, Prefer: wait, the body's fingerprint.

Pure functions, no I/O; docs/http.md has the rules and clients/contract-vectors.json the vectors.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import urllib.parse
from typing import Optional, Sequence, Tuple

import http_sf

#: hex SHA-256 of zero bytes: the fingerprint of every empty body.
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
#: deeper JSON is refused (body-not-json): parsers and Postgres's jsonb recurse per level
MAX_JSON_DEPTH = 128  # idem_canonical::MAX_DEPTH: deeper JSON would be 54001 in idem_hash
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(r"[\[\]{}]")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_PREFER_WAIT = re.compile(r"(?:^|[,;\s])wait\s*=\s*\"?(\d+(?:\.\d+)?)\"?", re.IGNORECASE)
_OWS = " \t"


class KeyProblem(ValueError):
    """The header is missing (``required``) or malformed; ``str()`` says why."""

    def __init__(self, detail: str, *, required: bool = False):
        super().__init__(detail)
        self.required = required


class BodyNotJson(ValueError):
    """A JSON media type whose body is not JSON."""


def parse_key(values: Sequence[str]) -> str:
    """The key from the ``Idempotency-Key`` field values of a request (one per field line).

    ``"abc"`` (an RFC 8941 sf-string, parameters ignored) and the bare ``abc`` are the same key.
    """
    if not values:
        raise KeyProblem("the request has no Idempotency-Key header", required=True)
    if len(values) > 1:
        raise KeyProblem("the request has more than one Idempotency-Key header")
    value = values[0].strip(_OWS)
    if value.startswith('"'):
        try:
            item = http_sf.parse(value.encode("ascii"), tltype="item")
        except (UnicodeEncodeError, ValueError, Exception) as exc:  # http_sf raises ValueError subclasses
            raise KeyProblem(f"the value is not a valid sf-string ({exc})") from None
        key = item[0] if isinstance(item, tuple) else item
        if type(key) is not str:
            raise KeyProblem("the value is not a valid sf-string")
    else:
        if value == "":
            raise KeyProblem("the key is empty")
        if "," in value:
            raise KeyProblem("the header holds a list of values, not one key")
        if any(not 0x21 <= ord(ch) <= 0x7E for ch in value):
            raise KeyProblem("the key has a character outside visible ASCII (0x21-0x7E)")
        key = value
    if key.strip() == "":
        raise KeyProblem("the key is empty")
    if len(key.encode("utf-8")) > 255:
        raise KeyProblem("the key is longer than 255 bytes")
    return key


def parse_prefer_wait(value: Optional[str]) -> Optional[float]:
    """Seconds from an RFC 7240 ``Prefer: wait=N`` header, or None."""
    if not value:
        return None
    match = _PREFER_WAIT.search(value)
    return float(match.group(1)) if match else None


def essence(content_type: Optional[str]) -> str:
    """The media type, lower-cased and without parameters ('' when absent)."""
    return "" if not content_type else content_type.split(";", 1)[0].strip(_OWS).lower()


def is_json(media: str) -> bool:
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def form_fields(body: bytes) -> dict:
    """application/x-www-form-urlencoded as {name: [values in the order sent]}."""
    fields: dict = {}
    text = body.decode("utf-8", "replace")
    for name, value in urllib.parse.parse_qsl(text, keep_blank_values=True, errors="replace"):
        fields.setdefault(name, []).append(value)
    return fields


def fingerprint_plan(content_type: Optional[str], body: bytes) -> Tuple[str, str]:
    """How to get the request_hash: ``("hash", hex)`` done here, or ``("json", text)`` and
    ``("form", json_text)`` for the SQL that canonicalizes it (RFC 8785, idem_hash / idem_canonical).
    """
    if body == b"":
        return "hash", EMPTY_SHA256
    media = essence(content_type)
    if is_json(media):
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise BodyNotJson("the body is not UTF-8") from None
        try:
            json.loads(text, parse_constant=_no_constant)
        except RecursionError:
            raise BodyNotJson(f"the body is nested deeper than {MAX_JSON_DEPTH} levels") from None
        except ValueError as exc:
            raise BodyNotJson(f"the body is not JSON ({exc.args[0] if exc.args else exc})") from None
        if text.count("[") + text.count("{") > MAX_JSON_DEPTH and json_depth(text) > MAX_JSON_DEPTH:
            raise BodyNotJson(f"the body is nested deeper than {MAX_JSON_DEPTH} levels")
        return "json", text
    if media == "application/x-www-form-urlencoded":
        return "form", json.dumps(form_fields(body), ensure_ascii=False)
    return "hash", hashlib.sha256(media.encode("utf-8") + b"\n" + body).hexdigest()


def json_depth(text: str) -> int:
    """How deeply valid JSON text nests arrays and objects (strings skipped)."""
    steps = map(_STEP.__getitem__, _BRACKET.findall(_JSON_STRING.sub("", text)))
    return max(itertools.accumulate(steps), default=0)


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")
