#!/usr/bin/env bash
# Start a Python example app on 127.0.0.1:$PORT, data in $DATABASE_URL:
# FRAMEWORK=fastapi (uvicorn, default), flask or django (werkzeug's threaded WSGI server).
# Builds the adapter's wheel and installs it, with the frameworks, into a venv under
# ${IDEM_HTTP_CACHE:-~/.cache/idempotency-http} (again only when the sources change).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
: "${PORT:?set PORT}" "${DATABASE_URL:?set DATABASE_URL}"
framework=${FRAMEWORK:-fastapi}
cache=${IDEM_HTTP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/idempotency-http}
venv=$cache/example-venv
stamp=$(cat "$here/requirements.txt" "$root/clients/python/pyproject.toml" "$root"/clients/python/src/idempotency_http/* | sha256sum | cut -c1-16)
if [ "$(cat "$venv/.stamp" 2>/dev/null)" != "$stamp" ]; then
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check build -r "$here/requirements.txt" >&2
  dist=$(mktemp -d)
  "$venv/bin/python" -m build -q --wheel --outdir "$dist" "$root/clients/python" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check --force-reinstall --no-deps "$dist"/*.whl >&2
  rm -rf "$dist" "$root/clients/python/build"
  echo "$stamp" > "$venv/.stamp"
fi
cd "$here"
case $framework in
  fastapi) exec "$venv/bin/uvicorn" fastapi_app:app --host 127.0.0.1 --port "$PORT" --log-level warning ;;
  flask|django) exec "$venv/bin/python" "${framework}_app.py" ;;
  *) echo "FRAMEWORK must be fastapi, flask or django" >&2; exit 2 ;;
esac
