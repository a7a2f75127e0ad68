"""The Flask example: the same routes as fastapi_app.py, on a psycopg ConnectionPool of 4,
served by werkzeug's threaded WSGI server (PORT)."""

import os
import time

from flask import Flask, abort, g, jsonify, request
from psycopg_pool import ConnectionPool

import common
from idempotency_http.flask import Idempotency

common.create_tables()
pool = ConnectionPool(common.DATABASE_URL, min_size=1, max_size=common.POOL_SIZE)
idem = Idempotency(pool, **common.SETTINGS)
common.GAUGES["waiters"] = lambda: idem.engine.waiters
app = Flask(__name__)


@app.before_request
def load_user():
    """The app's authentication: g.user, which the adapter's default scope names."""
    g.user = common.user_of(request.headers.get("Authorization"))


def one(query, params):
    return idem.claim.conn.execute(query, params, prepare=common.PREPARE).fetchone()


@app.post("/payments")
@idem.idempotent()
def create_payment():
    body = request.get_json(silent=True)
    body = body if isinstance(body, dict) else {}
    if body.get("order_id") is None or body.get("amount") is None:
        return ({"type": "about:blank", "title": "order_id and amount are required", "status": 400},
                400, {"Content-Type": "application/problem+json"})
    pid, amount = one(common.INSERT_PAYMENT, [idem.claim.key, str(body["order_id"]), str(body["amount"]), None])
    if request.headers.get("x-test-sleep-after-insert"):
        time.sleep(float(request.headers["x-test-sleep-after-insert"]))
    return ({"payment_id": pid, "order_id": str(body["order_id"]), "amount": amount}, 201,
            {"Location": f"/payments/{pid}"})


@app.post("/plain/payments")
def plain_payment():
    """The same insert without the adapter, in its own transaction (bench/http-roundtrips.sh)."""
    body = request.get_json()
    with pool.connection() as conn:
        pid, amount = conn.execute(common.INSERT_PAYMENT, [None, str(body["order_id"]), str(body["amount"]), None],
                                   prepare=common.PREPARE).fetchone()
    return ({"payment_id": pid, "order_id": str(body["order_id"]), "amount": amount}, 201,
            {"Location": f"/payments/{pid}"})


@app.route("/echo", methods=["GET", "POST", "PUT"])
@idem.idempotent()
def echo():
    body = request.get_data()
    eid = one(common.INSERT_EFFECT, ["echo", idem.claim.key, len(body)])[0] if request.method == "POST" else None
    return {"effect_id": eid, "bytes": len(body), "method": request.method}, 201


@app.post("/slow")
@idem.idempotent()
def slow():
    (eid,) = one(common.INSERT_EFFECT, ["slow", idem.claim.key, 0])
    if request.args.get("lock"):
        one(common.PAUSE, [int(request.args["lock"])])
    else:
        time.sleep(float(request.args.get("seconds", "1")))
    return {"effect_id": eid}, 201


@app.post("/error-big")
@idem.idempotent()
def error_big():
    common.count_run("error-big")
    return common.big(int(request.args["size"])), int(request.args.get("status", "400")), {"Content-Type": "text/plain"}


@app.post("/ok-big")
@idem.idempotent()
def ok_big():
    size = int(request.args["size"])
    (eid,) = one(common.INSERT_EFFECT, ["ok-big", idem.claim.key, size])
    return common.big(size), 200, {"Content-Type": "text/plain", "X-Effect": str(eid)}


@app.post("/boom")
@idem.idempotent()
def boom():
    common.count_run("boom")
    one(common.INSERT_EFFECT, ["boom", idem.claim.key, 0])
    raise RuntimeError("secret-internal-text password=hunter2")


@app.post("/headers")
@idem.idempotent()
def headers():
    return {"ok": True}, 201, {"Set-Cookie": "session=secret", "Refresh": "0; url=https://evil.example",
                               "X-Extra": "kept", "X-Other": "dropped", "Location": "/things/1"}


@app.post("/status/<int:code>")
@idem.idempotent()
def status(code):
    common.count_run(f"status-{code}")
    return {"status": code}, code


@app.post("/tenant/payments")
@idem.idempotent()
def tenant_payment():
    body = request.get_json()
    pid, _ = one(common.INSERT_PAYMENT, [idem.claim.key, body["order_id"], str(body["amount"]), g.user])
    return {"payment_id": pid, "tenant": g.user}, 201


@app.post("/accounts/<int:account_id>/transfer")
@idem.idempotent()
def transfer(account_id):
    (eid,) = one(common.INSERT_EFFECT, [f"transfer-{account_id}", idem.claim.key, 0])
    return {"effect_id": eid, "account": account_id}, 201


@app.post("/custom-scope")
@idem.idempotent(scope="custom")
def custom_scope():
    (eid,) = one(common.INSERT_EFFECT, ["custom-scope", idem.claim.key, 0])
    return {"effect_id": eid}, 201


@app.post("/flask/abort")
@idem.idempotent()
def flask_abort():
    common.count_run("flask-abort")
    abort(404)


try:  # the SQLAlchemy form (idempotency_http.sqlalchemy): an ORM Session in the claim's transaction
    import sqlalchemy
    from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column
except ImportError:
    sqlalchemy = None

if sqlalchemy is not None:
    class Base(DeclarativeBase):
        pass

    class Effect(Base):
        __tablename__ = "effects"
        id: Mapped[int] = mapped_column(primary_key=True)
        route: Mapped[str]
        idem_key: Mapped[str]
        body_len: Mapped[int]

    engine = sqlalchemy.create_engine(common.DATABASE_URL.replace("postgresql://", "postgresql+psycopg://", 1),
                                      **common.ENGINE_OPTIONS)
    orm = Idempotency(engine, **common.SETTINGS)

    def orm_write(claim, model, route, status):
        """One ORM row in the claim's transaction (then a raise, with ?raise=1)."""
        # create_savepoint: the Session's commit releases its own savepoint; the adapter commits
        with Session(bind=claim.conn, join_transaction_mode="create_savepoint") as session:
            effect = model(route=route, idem_key=claim.key, body_len=len(request.get_data()))
            session.add(effect)
            session.commit()
            effect_id = effect.id
        if request.args.get("lock"):  # the row is written; wait for the test's advisory lock N
            claim.conn.exec_driver_sql(common.PAUSE, (int(request.args["lock"]),))
        if request.args.get("raise"):
            raise RuntimeError("after the ORM commit")
        return {"effect_id": effect_id}, status

    @app.post("/orm/effects/<int:status>")
    @orm.idempotent()
    def orm_effect(status):
        return orm_write(orm.claim, Effect, "orm", status)


try:  # Flask-SQLAlchemy: its db.Model classes, written through a Session bound to claim.conn
    from flask_sqlalchemy import SQLAlchemy
except ImportError:
    SQLAlchemy = None

if sqlalchemy is not None and SQLAlchemy is not None:
    app.config["SQLALCHEMY_DATABASE_URI"] = common.DATABASE_URL.replace("postgresql://", "postgresql+psycopg://", 1)
    app.config["SQLALCHEMY_ENGINE_OPTIONS"] = common.ENGINE_OPTIONS
    fsa = SQLAlchemy(app)

    class FsaEffect(fsa.Model):
        __tablename__ = "effects"
        id: Mapped[int] = mapped_column(primary_key=True)
        route: Mapped[str]
        idem_key: Mapped[str]
        body_len: Mapped[int]

    with app.app_context():
        fsa_idem = Idempotency(fsa.engine, **common.SETTINGS)  # Flask-SQLAlchemy's own engine

    @app.post("/fsa/effects/<int:status>")
    @fsa_idem.idempotent()
    def fsa_effect(status):
        # a Session bound to claim.conn, not db.session: Flask-SQLAlchemy picks its engine over a
        # Session's bind, so db.session would write on another connection, outside the claim's
        # transaction (docs/http-frameworks.md)
        return orm_write(fsa_idem.claim, FsaEffect, "fsa", status)


@app.get("/runs/<name>")
def runs(name):
    return jsonify(runs=common.runs(name))


if __name__ == "__main__":
    import logging

    from werkzeug.serving import run_simple

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request

    run_simple("127.0.0.1", int(os.environ["PORT"]), app, threaded=True)
