"""Example service: POST /payments, idempotent through idempotency_http (FastAPI + psycopg 3).

Environment: DATABASE_URL (required); IDEM_EXAMPLE_TEST_HOOKS=1 enables the test-only header
X-Test-Sleep-After-Insert: <seconds> (sleep between the insert and the commit).
"""

import asyncio
import os
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from psycopg_pool import AsyncConnectionPool

from idempotency_http import Claim, Idempotency
from idempotency_http.fastapi import idempotent

pool = AsyncConnectionPool(os.environ["DATABASE_URL"], min_size=2, max_size=20, open=False)
idem = Idempotency(max_wait=30)
TEST_HOOKS = os.environ.get("IDEM_EXAMPLE_TEST_HOOKS") == "1"


@asynccontextmanager
async def lifespan(_app):
    await pool.open(wait=True)
    yield
    await pool.close()


app = FastAPI(lifespan=lifespan)


@app.post("/payments")
@idempotent(idem, connection=pool.connection, scope="payments")
async def create_payment(request: Request, claim: Claim):
    body = claim.payload if isinstance(claim.payload, dict) else {}
    order_id, amount = body.get("order_id"), body.get("amount")
    if order_id is None or amount is None:
        return JSONResponse({"type": "about:blank", "title": "order_id and amount are required",
                             "status": 400}, status_code=400, media_type="application/problem+json")
    cur = await claim.conn.execute(
        "INSERT INTO payments (idem_key, order_id, amount) VALUES (%s, %s, %s) RETURNING id, amount",
        [claim.key, str(order_id), str(amount)])
    payment_id, stored_amount = await cur.fetchone()
    if TEST_HOOKS and request.headers.get("x-test-sleep-after-insert"):
        await asyncio.sleep(float(request.headers["x-test-sleep-after-insert"]))
    return JSONResponse({"payment_id": payment_id, "order_id": str(order_id), "amount": str(stored_amount)},
                        status_code=201, headers={"Location": f"/payments/{payment_id}"})
