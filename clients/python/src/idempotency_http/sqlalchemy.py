"""SQLAlchemy (2.0+, on the psycopg 3 driver) under the Flask adapter: the claim runs on a
Connection of your Engine, and the handler's ORM Session binds to that Connection, so its
writes commit with the claim and the stored response, or not at all.

    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session
    from idempotency_http.flask import Idempotency

    engine = create_engine("postgresql+psycopg://app@db/app")
    idem = Idempotency(engine, service="payments-api")

    @app.post("/payments")
    @idem.idempotent()
    def create_payment():
        with Session(bind=idem.claim.conn, join_transaction_mode="create_savepoint") as session:
            session.add(Payment(...))
            session.commit()        # releases the Session's savepoint; the adapter commits
        return {...}, 201

On FastAPI, an AsyncEngine (``create_async_engine("postgresql+psycopg://...")``): claim.conn is
an AsyncConnection, and ``AsyncSession(bind=claim.conn, join_transaction_mode="create_savepoint")``
joins it the same way (``await session.commit()``).

Without ``session.commit()`` the Session's writes are rolled back when it closes (SQLAlchemy's
rule), while the response is still stored. A final 4xx or an exception undoes them all.
"""

from __future__ import annotations

from typing import Any


def is_engine(obj: Any) -> bool:
    """A SQLAlchemy Engine or AsyncEngine (not a psycopg pool)?"""
    return type(obj).__module__.startswith("sqlalchemy.") and hasattr(obj, "dialect")


def _psycopg_only(engine: Any) -> None:
    if engine.dialect.driver != "psycopg":
        raise ValueError(f"idempotency_http needs the psycopg 3 driver (postgresql+psycopg://), "
                         f"not {engine.dialect.driver}")


class SqlAlchemySession:
    """A Session for the sync engine over one Connection of ``engine``: the adapter's statements
    go to its psycopg connection (unprepared, as on a pool); transactions and savepoints are
    SQLAlchemy's own, so an ORM Session bound to ``handle`` joins them."""

    def __init__(self, engine: Any) -> None:
        _psycopg_only(engine)
        self.engine = engine

    def __enter__(self) -> "SqlAlchemySession":
        self.handle = self.engine.connect()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.handle.close()

    def one(self, stmt: Any, params: list):
        return self.handle.connection.driver_connection.execute(stmt, params, prepare=False).fetchone()

    def transaction(self):
        return self.handle.begin_nested() if self.handle.in_transaction() else self.handle.begin()


class AsyncSqlAlchemySession:
    """The same over an AsyncEngine's AsyncConnection (FastAPI): an AsyncSession bound to
    ``handle`` joins the claim's transaction."""

    def __init__(self, engine: Any) -> None:
        _psycopg_only(engine)
        self.engine = engine

    async def __aenter__(self) -> "AsyncSqlAlchemySession":
        self.handle = await self.engine.connect()
        self.raw = (await self.handle.get_raw_connection()).driver_connection  # psycopg AsyncConnection
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.handle.close()

    async def one(self, stmt: Any, params: list):
        cur = await self.raw.execute(stmt, params, prepare=False)
        return await cur.fetchone()

    def transaction(self):
        return self.handle.begin_nested() if self.handle.in_transaction() else self.handle.begin()
