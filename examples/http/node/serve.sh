#!/usr/bin/env bash
# Start the Node example service: POST /payments on 127.0.0.1:$PORT, data in $DATABASE_URL.
# Runs npm install when package.json or the client changed, creates table payments if missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
: "${PORT:?set PORT}" "${DATABASE_URL:?set DATABASE_URL}"
cd "$here"
stamp=$(cat package.json "$root/clients/node/package.json" | sha256sum | cut -c1-16)
if [ "$(cat node_modules/.idem-stamp 2>/dev/null)" != "$stamp" ]; then
  (cd "$root/clients/node" && npm install --no-audit --no-fund --loglevel=error --include=dev >&2)
  npm install --no-audit --no-fund --loglevel=error >&2
  echo "$stamp" > node_modules/.idem-stamp
fi
node --input-type=module -e "
import pg from 'pg';
const c = new pg.Client({ connectionString: process.env.DATABASE_URL });
await c.connect();
await c.query('CREATE TABLE IF NOT EXISTS payments (id bigserial PRIMARY KEY, idem_key text, order_id text, amount numeric)');
await c.end();
"
exec node app.js
