#!/usr/bin/env bash
# Start the Python example service: POST /payments on 127.0.0.1:$PORT, data in $DATABASE_URL.
# Installs what it needs into a venv under ${IDEM_HTTP_CACHE:-~/.cache/idempotency-http}
# (again only when requirements change) and creates table payments if missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
: "${PORT:?set PORT}" "${DATABASE_URL:?set DATABASE_URL}"
cache=${IDEM_HTTP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/idempotency-http}
venv=$cache/py-venv
stamp=$(cat "$here/requirements.txt" "$root/clients/python/pyproject.toml" "$root"/clients/python/src/idempotency_http/*.py | sha256sum | cut -c1-16)
if [ "$(cat "$venv/.stamp" 2>/dev/null)" != "$stamp" ]; then
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$here/requirements.txt" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --force-reinstall "$root/clients/python" >&2
  echo "$stamp" > "$venv/.stamp"
fi
"$venv/bin/python" - <<'PY'
import os, psycopg
with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as c:
    c.execute("CREATE TABLE IF NOT EXISTS payments (id bigserial PRIMARY KEY, idem_key text, order_id text, amount numeric)")
PY
cd "$here"
exec "$venv/bin/uvicorn" app:app --host 127.0.0.1 --port "$PORT" --log-level warning
