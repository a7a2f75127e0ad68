"""The FastAPI example: idempotent routes through the route class, endpoints in FastAPI's own
style (Pydantic models, Depends, Header, dict or model returns, status_code=)."""

import asyncio
from contextlib import asynccontextmanager
from typing import Optional

from fastapi import APIRouter, Depends, FastAPI, Header, HTTPException, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from psycopg_pool import AsyncConnectionPool
from pydantic import BaseModel
from starlette.authentication import AuthCredentials, AuthenticationBackend, SimpleUser
from starlette.middleware.authentication import AuthenticationMiddleware

import common
from idempotency_http import Claim
from idempotency_http.fastapi import Idempotency, idempotent

common.create_tables()
pool = AsyncConnectionPool(common.DATABASE_URL, min_size=1, max_size=common.POOL_SIZE, open=False)
idem = Idempotency(pool, **common.SETTINGS)
common.GAUGES["waiters"] = lambda: idem.engine.waiters


@asynccontextmanager
async def lifespan(_app):
    await pool.open(wait=True)
    yield
    await pool.close()


class TokenAuth(AuthenticationBackend):
    """The app's authentication: request.user, which the adapter's default scope names."""

    async def authenticate(self, conn):
        user = common.user_of(conn.headers.get("authorization"))
        return (AuthCredentials(["authenticated"]), SimpleUser(user)) if user else None


app = FastAPI(lifespan=lifespan)
app.add_middleware(AuthenticationMiddleware, backend=TokenAuth())
router = APIRouter(route_class=idem.route)


class Order(BaseModel):
    order_id: str
    amount: float


class Payment(BaseModel):
    payment_id: int
    order_id: str
    amount: str


async def one(claim: Claim, query: str, params):
    cur = await claim.conn.execute(query, params, prepare=common.PREPARE)
    return await cur.fetchone()


@router.post("/payments", status_code=201)
async def create_payment(request: Request, response: Response, claim: Claim = Depends(idem.claim)):
    body = await request.json() if await request.body() else None
    body = body if isinstance(body, dict) else {}
    if body.get("order_id") is None or body.get("amount") is None:
        return JSONResponse({"type": "about:blank", "title": "order_id and amount are required",
                             "status": 400}, status_code=400, media_type="application/problem+json")
    pid, amount = await one(claim, common.INSERT_PAYMENT, [claim.key, str(body["order_id"]), str(body["amount"]), None])
    if request.headers.get("x-test-sleep-after-insert"):
        await asyncio.sleep(float(request.headers["x-test-sleep-after-insert"]))
    response.headers["Location"] = f"/payments/{pid}"
    return {"payment_id": pid, "order_id": str(body["order_id"]), "amount": amount}


@app.post("/plain/payments", status_code=201)
async def plain_payment(request: Request, response: Response):
    """The same insert without the adapter, in its own transaction (bench/http-roundtrips.sh)."""
    body = await request.json()
    async with pool.connection() as conn:
        cur = await conn.execute(common.INSERT_PAYMENT, [None, str(body["order_id"]), str(body["amount"]), None],
                                 prepare=common.PREPARE)
        pid, amount = await cur.fetchone()
    response.headers["Location"] = f"/payments/{pid}"
    return {"payment_id": pid, "order_id": str(body["order_id"]), "amount": amount}


@router.api_route("/echo", methods=["GET", "POST", "PUT"])
async def echo(request: Request):
    body = await request.body()
    if request.method == "POST":
        claim = idem.claim(request)
        (eid,) = await one(claim, common.INSERT_EFFECT, ["echo", claim.key, len(body)])
    else:
        eid = None
    return JSONResponse({"effect_id": eid, "bytes": len(body), "method": request.method}, status_code=201)


@router.post("/slow", status_code=201)
async def slow(seconds: float = 1.0, lock: Optional[int] = None, claim: Claim = Depends(idem.claim)):
    (eid,) = await one(claim, common.INSERT_EFFECT, ["slow", claim.key, 0])
    if lock is not None:
        await one(claim, common.PAUSE, [lock])
    else:
        await asyncio.sleep(seconds)
    return {"effect_id": eid}


@router.post("/error-big")
async def error_big(size: int, status: int = 400):
    common.count_run("error-big")
    return PlainTextResponse(common.big(size), status_code=status)


@router.post("/ok-big")
async def ok_big(size: int, claim: Claim = Depends(idem.claim)):
    (eid,) = await one(claim, common.INSERT_EFFECT, ["ok-big", claim.key, size])
    return PlainTextResponse(common.big(size), headers={"X-Effect": str(eid)})


@router.post("/boom")
async def boom(claim: Claim = Depends(idem.claim)):
    common.count_run("boom")
    await one(claim, common.INSERT_EFFECT, ["boom", claim.key, 0])
    raise RuntimeError("secret-internal-text password=hunter2")


@router.post("/headers", status_code=201)
async def headers(response: Response):
    response.headers["Set-Cookie"] = "session=secret"
    response.headers["Refresh"] = "0; url=https://evil.example"
    response.headers["X-Extra"] = "kept"
    response.headers["X-Other"] = "dropped"
    response.headers["Location"] = "/things/1"
    return {"ok": True}


@router.post("/status/{code}")
async def status(code: int):
    common.count_run(f"status-{code}")
    return JSONResponse({"status": code}, status_code=code)


@router.post("/tenant/payments", status_code=201)
async def tenant_payment(request: Request, order: Order, claim: Claim = Depends(idem.claim)):
    user = request.user.username if request.user.is_authenticated else None
    pid, amount = await one(claim, common.INSERT_PAYMENT, [claim.key, order.order_id, str(order.amount), user])
    return {"payment_id": pid, "tenant": user}


@router.post("/accounts/{account_id}/transfer", status_code=201)
async def transfer(account_id: int, claim: Claim = Depends(idem.claim)):
    (eid,) = await one(claim, common.INSERT_EFFECT, [f"transfer-{account_id}", claim.key, 0])
    return {"effect_id": eid, "account": account_id}


@router.post("/custom-scope", status_code=201)
@idempotent(scope="custom")
async def custom_scope(claim: Claim = Depends(idem.claim)):
    (eid,) = await one(claim, common.INSERT_EFFECT, ["custom-scope", claim.key, 0])
    return {"effect_id": eid}


@router.post("/fa/model", status_code=201, response_model=Payment)
async def fa_model(order: Order, claim: Claim = Depends(idem.claim),
                   x_request_id: Optional[str] = Header(None)) -> Payment:
    pid, amount = await one(claim, common.INSERT_PAYMENT, [claim.key, order.order_id, str(order.amount), x_request_id])
    return Payment(payment_id=pid, order_id=order.order_id, amount=amount)


@router.post("/fa/dict")
async def fa_dict(order: Order, claim: Claim = Depends(idem.claim)) -> dict:
    pid, _ = await one(claim, common.INSERT_PAYMENT, [claim.key, order.order_id, str(order.amount), None])
    return {"payment_id": pid}


@router.post("/fa/http-exception")
async def fa_http_exception():
    common.count_run("fa-http-exception")
    raise HTTPException(status_code=404, detail="no such order")


@router.post("/fa/stream")
async def fa_stream(claim: Claim = Depends(idem.claim)):
    (eid,) = await one(claim, common.INSERT_EFFECT, ["fa-stream", claim.key, 0])

    async def chunks():
        for i in range(3):
            yield f"chunk {i} of effect {eid}\n".encode()

    return StreamingResponse(chunks(), media_type="text/plain")


@router.post("/fa/sync", status_code=201)
def fa_sync(order: Order) -> dict:
    # a sync def runs in a worker thread: fine without the claim (one that depends on
    # idem.claim is refused when the route is defined: its connection is async)
    common.count_run("fa-sync")
    return {"order_id": order.order_id}


@router.get("/runs/{name}")
async def runs(name: str):
    return {"runs": common.runs(name)}


app.include_router(router)

try:  # SQLAlchemy's AsyncEngine (idempotency_http.sqlalchemy): an AsyncSession in the claim's transaction
    from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
    from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
except ImportError:
    AsyncSession = None

if AsyncSession is not None:
    class Base(DeclarativeBase):
        pass

    class Effect(Base):
        __tablename__ = "effects"
        id: Mapped[int] = mapped_column(primary_key=True)
        route: Mapped[str]
        idem_key: Mapped[str]
        body_len: Mapped[int]

    async_engine = create_async_engine(common.DATABASE_URL.replace("postgresql://", "postgresql+psycopg://", 1),
                                       **common.ENGINE_OPTIONS)
    orm = Idempotency(async_engine, **common.SETTINGS)
    orm_router = APIRouter(route_class=orm.route)

    async def orm_write(session_class, claim, model, route, request, status):
        """One ORM row in the claim's transaction (then a raise, with ?raise=1)."""
        # create_savepoint: the session's commit releases its own savepoint; the adapter commits
        async with session_class(bind=claim.conn, join_transaction_mode="create_savepoint") as session:
            effect = model(route=route, idem_key=claim.key, body_len=len(await request.body()))
            session.add(effect)
            await session.flush()
            effect_id = effect.id  # read before commit: a commit expires it (no lazy load in async)
            await session.commit()
        if request.query_params.get("lock"):  # the row is written; wait for the test's advisory lock N
            await claim.conn.exec_driver_sql(common.PAUSE, (int(request.query_params["lock"]),))
        if request.query_params.get("raise"):
            raise RuntimeError("after the ORM commit")
        return JSONResponse({"effect_id": effect_id}, status_code=status)

    @orm_router.post("/orm/effects/{status}")
    async def orm_effect(status: int, request: Request, claim: Claim = Depends(orm.claim)):
        return await orm_write(AsyncSession, claim, Effect, "orm", request, status)

    try:  # SQLModel: its AsyncSession is SQLAlchemy's, bound to claim.conn the same way
        from sqlmodel import Field, SQLModel
        from sqlmodel.ext.asyncio.session import AsyncSession as SQLModelSession
    except ImportError:
        SQLModel = None

    if SQLModel is not None:
        class SqlModelEffect(SQLModel, table=True):
            __tablename__ = "effects"
            id: Optional[int] = Field(default=None, primary_key=True)
            route: str
            idem_key: str
            body_len: int

        @orm_router.post("/sqlmodel/effects/{status}")
        async def sqlmodel_effect(status: int, request: Request, claim: Claim = Depends(orm.claim)):
            return await orm_write(SQLModelSession, claim, SqlModelEffect, "sqlmodel", request, status)

    app.include_router(orm_router)

# The same routes mounted again under /v2 (another app): other resources, other records.
v2 = FastAPI()
v2.include_router(router)
app.mount("/v2", v2)
