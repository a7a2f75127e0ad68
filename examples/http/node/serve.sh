#!/usr/bin/env bash
# Start the Node example service: POST /payments and /receipts on 127.0.0.1:$PORT, data in $DATABASE_URL.
# Installs idempotency-http as a user would, from its npm pack tarball ($IDEM_NODE_TARBALL, or
# one packed from clients/node), when package.json or the tarball changed; creates tables payments
# and receipts.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
: "${PORT:?set PORT}" "${DATABASE_URL:?set DATABASE_URL}"
cd "$here"
tarball=${IDEM_NODE_TARBALL:-}
if [ -z "$tarball" ]; then
  mkdir -p "$here/.pack"
  tarball=$here/.pack/$(cd "$root/clients/node" && npm pack --silent --pack-destination "$here/.pack" | tail -1)
fi
stamp=$(cat package.json "$tarball" | sha256sum | cut -c1-16)
if [ "$(cat node_modules/.idem-stamp 2>/dev/null)" != "$stamp" ]; then
  npm install --no-audit --no-fund --loglevel=error >&2
  npm install --no-audit --no-fund --loglevel=error --no-save "$tarball" >&2
  echo "$stamp" > node_modules/.idem-stamp
fi
node --input-type=module -e "
import pg from 'pg';
const c = new pg.Client({ connectionString: process.env.DATABASE_URL });
await c.connect();
await c.query('CREATE TABLE IF NOT EXISTS payments (id bigserial PRIMARY KEY, idem_key text, order_id text, amount numeric)');
await c.query('CREATE TABLE IF NOT EXISTS receipts (id bigserial PRIMARY KEY, idem_key text, note text, filename text, bytes bytea)');
await c.end();
"
exec node app.js
