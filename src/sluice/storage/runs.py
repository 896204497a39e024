"""Workflow runs: one row per run, newest first; and the outcome of each ``$.send``.

A run is written in the transaction that marks its job done (so a completed run is never run
again); a run a step paused (``$.flow``) is written again by each ``resume`` job that carries it
on (``update_sync``). Its sends are rows of ``run_sends``, each updated by the job that
performs it.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.domain import text
from sluice.domain.runs import Run
from sluice.domain.states import SendStatus
from sluice.storage import database
from sluice.storage.tables import accounts, mail_throttle, step_state
from sluice.storage.tables import run_sends as st
from sluice.storage.tables import runs as t


def _row(row: Any) -> Run:
    return Run(
        row.id,
        row.owner_id,
        row.workflow_id,
        row.deployment_id,
        row.status,
        row.event,
        dict(row.context or {}),
        list(row.steps or []),
        row.error,
        row.flow_exit,
        row.response,
        row.started_ms,
        float(row.duration_ms),
        row.replay_of,
        pause=row.pause,
    )


#: ``insert_sync`` on SQLite's own cursor (the insert of every run): JSON values serialized as
#: the ``StoredJSON`` columns would (``domain.text.to_stored``, then ``json.dumps``).
_INSERT_SQLITE = (
    "INSERT INTO runs (id, owner_id, workflow_id, deployment_id, status, event, context, steps, "
    "error, flow_exit, response, started_ms, duration_ms, replay_of, pause) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


#: ``insert_sync`` elsewhere (PostgreSQL): one statement, its values as parameters, so SQLAlchemy
#: compiles it once. Built per run with ``.values(...)``, each value became a bound element of a
#: new statement and the statement a new cache key: ~600-800 µs of the server's CPU a run
#: stored (bench/run_writer.py), most of a workflow run's cost on PostgreSQL.
_INSERT = t.insert()


def _json(value: Any) -> str:
    return text.stored_json(value)


def _str(value: Any) -> Any:
    return text.clean(value) if isinstance(value, str) else value


def insert_sync(conn: Connection, run: Run, *, at_end: bool = False) -> None:
    """Insert the run (and its sends). ``at_end``: in a ``database.Writer``'s transaction, the
    run's row waits for the end of the transaction's work, where a group commit's runs go in
    one statement (``executemany``: on PostgreSQL one round trip for the group, not one a run);
    nothing in a run's transaction reads its own row back."""
    if at_end and database.at_end(conn, _GATHERED, insert_gathered_sync):
        database.memo(conn).setdefault(_GATHERED, []).append(run)
    else:
        _insert_rows(conn, [run])
    _insert_sends(conn, run, 0)


#: ``database.memo``'s key of the runs gathered for the end of a transaction.
_GATHERED = "runs_to_insert"


def insert_gathered_sync(conn: Connection) -> None:
    """The runs gathered so far in this transaction (``insert_sync(at_end=True)``), inserted
    now: before what must see them (a trim), else at the end."""
    _insert_rows(conn, database.memo(conn).pop(_GATHERED, []))


def _insert_rows(conn: Connection, runs: list[Run]) -> None:
    """The runs' rows, in one statement (executed once per row on SQLite's own cursor)."""
    if not runs:
        return
    dbapi = database.sqlite_dbapi(conn)
    if dbapi is not None:
        dbapi.executemany(
            _INSERT_SQLITE,
            [
                (
                    _str(run.id), _str(run.owner_id), _str(run.workflow_id),
                    _str(run.deployment_id), _str(run.status), _json(run.event),
                    _json(run.context), _json(run.steps), _json(run.error),
                    _json(run.flow_exit), _json(run.response), run.started_ms, run.duration_ms,
                    _str(run.replay_of), _json(run.pause),
                )
                for run in runs
            ],
        )  # fmt: skip
        return
    conn.execute(
        _INSERT,
        [
            {
                "id": run.id,
                "owner_id": run.owner_id,
                "workflow_id": run.workflow_id,
                "deployment_id": run.deployment_id,
                "status": run.status,
                "event": run.event,
                "context": run.context,
                "steps": run.steps,
                "error": run.error,
                "flow_exit": run.flow_exit,
                "response": run.response,
                "started_ms": run.started_ms,
                "duration_ms": run.duration_ms,
                "replay_of": run.replay_of,
                "pause": run.pause,
            }
            for run in runs
        ],
    )


def update_sync(conn: Connection, run: Run, sends_from: int) -> None:
    """A paused run carried on: what it is now, and its sends from index ``sends_from`` on
    (the earlier ones are stored already)."""
    conn.execute(
        t.update()
        .where(t.c.id == run.id)
        .values(
            status=run.status,
            steps=run.steps,
            error=run.error,
            flow_exit=run.flow_exit,
            duration_ms=run.duration_ms,
            pause=run.pause,
        )
    )
    _insert_sends(conn, run, sends_from)


def set_pause_sync(conn: Connection, run_id: str, pause: dict[str, Any] | None) -> None:
    conn.execute(t.update().where(t.c.id == run_id).values(pause=pause))


def get_sync(conn: Connection, run_id: str) -> Run | None:
    row = conn.execute(sa.select(t).where(t.c.id == run_id)).first()
    if row is None:
        return None
    run = _row(row)
    sends = conn.execute(sa.select(st).where(st.c.run_id == run_id).order_by(st.c.idx)).all()
    run.sends = _sends_of(list(sends)).get(run_id, [])
    return run


def _insert_sends(conn: Connection, run: Run, start: int) -> None:
    if len(run.sends) <= start:
        return
    conn.execute(
        st.insert(),
        [
            {
                "run_id": run.id,
                "idx": i,
                "owner_id": run.owner_id,
                "workflow_id": run.workflow_id,
                "type": s["type"],
                "step_id": s.get("step"),
                "config": s.get("config"),
                "status": s.get("status", SendStatus.QUEUED),
                "outcome": s.get("outcome"),
                "updated_ms": run.started_ms,
            }
            for i, s in enumerate(run.sends)
            if i >= start
        ],
    )


def trim_sync(conn: Connection, workflow_id: str, keep: int) -> None:
    """All but the newest ``keep`` runs of the workflow (and their sends) are deleted."""
    cutoff = conn.execute(
        sa.select(t.c.pk)
        .where(t.c.workflow_id == workflow_id)
        .order_by(t.c.pk.desc())
        .offset(keep)
        .limit(1)
    ).scalar_one_or_none()
    if cutoff is None:
        return
    old = sa.select(t.c.id).where(t.c.workflow_id == workflow_id, t.c.pk <= cutoff)
    conn.execute(st.delete().where(st.c.run_id.in_(old)))
    conn.execute(t.delete().where(t.c.workflow_id == workflow_id, t.c.pk <= cutoff))


def _sends_of(rows: list[Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r.run_id, []).append(
            {
                "type": r.type,
                "step": r.step_id,
                "config": r.config,
                "status": r.status,
                "outcome": r.outcome,
            }
        )
    return out


async def _attach_sends(conn: AsyncConnection, found: list[Run]) -> None:
    if not found:
        return
    rows = (
        await conn.execute(
            sa.select(st).where(st.c.run_id.in_([r.id for r in found])).order_by(st.c.idx)
        )
    ).all()
    by_run = _sends_of(list(rows))
    for run in found:
        run.sends = by_run.get(run.id, [])


async def get(conn: AsyncConnection, owner_id: str, run_id: str) -> Run | None:
    row = (
        await conn.execute(sa.select(t).where(t.c.owner_id == owner_id, t.c.id == run_id))
    ).first()
    if row is None:
        return None
    run = _row(row)
    await _attach_sends(conn, [run])
    return run


async def page(
    conn: AsyncConnection,
    workflow_id: str,
    *,
    limit: int,
    before: str | None = None,
    after: str | None = None,
) -> tuple[list[Run], int]:
    """Newest first. ``after`` a run id: the older ones; ``before``: the newer ones."""
    scope = t.c.workflow_id == workflow_id
    total = int((await conn.execute(sa.select(sa.func.count()).where(scope))).scalar_one())
    query = sa.select(t).where(scope)
    ascending = False
    for cursor, older in ((after, True), (before, False)):
        if cursor is None:
            continue
        pk = (await conn.execute(sa.select(t.c.pk).where(scope, t.c.id == cursor))).scalar()
        if pk is None:
            return [], total
        query = query.where(t.c.pk < pk if older else t.c.pk > pk)
        ascending = not older and after is None
    order = t.c.pk.asc() if ascending else t.c.pk.desc()
    rows = (await conn.execute(query.order_by(order).limit(limit))).all()
    found = [_row(r) for r in sorted(rows, key=lambda r: r.pk, reverse=True)]
    await _attach_sends(conn, found)
    return found, total


def set_send_sync(
    conn: Connection, run_id: str, idx: int, *, status: str, outcome: Any, now_ms: int
) -> None:
    conn.execute(
        st.update()
        .where(st.c.run_id == run_id, st.c.idx == idx)
        .values(status=status, outcome=outcome, updated_ms=now_ms)
    )


async def get_send(conn: AsyncConnection, run_id: str, idx: int) -> dict[str, Any] | None:
    row = (await conn.execute(sa.select(st).where(st.c.run_id == run_id, st.c.idx == idx))).first()
    if row is None:
        return None
    return {"type": row.type, "config": row.config, "status": row.status, "outcome": row.outcome}


async def account_email(conn: AsyncConnection, owner_id: str) -> tuple[str | None, bool]:
    """The account's address and whether it is verified (``$.send.email`` needs it)."""
    row = (
        await conn.execute(
            sa.select(accounts.c.email, accounts.c.email_verified).where(accounts.c.id == owner_id)
        )
    ).first()
    if row is None or not row.email:
        return None, False
    return str(row.email), bool(row.email_verified)


def reserve_email_sync(
    conn: Connection, owner_id: str, run_id: str, idx: int, *, now_ms: int, limit: int
) -> int | None:
    """Take one of the account's ``limit`` e-mails of the last hour for send ``(run_id, idx)``
    (its status becomes ``sending``, so concurrent sends count it); None when taken, else the
    count that refuses it. The account's row is locked on PostgreSQL, so the count is exact
    across processes too."""
    conn.execute(sa.select(accounts.c.id).where(accounts.c.id == owner_id).with_for_update())
    query = (
        sa.select(sa.func.count())
        .select_from(st)
        .where(
            st.c.owner_id == owner_id,
            st.c.type == "email",
            st.c.status.in_(("sent", "written", "sending")),
            st.c.updated_ms >= now_ms - 3_600_000,
        )
    )
    sent = int(conn.execute(query).scalar_one())
    if sent >= limit:
        return sent
    conn.execute(
        st.update()
        .where(st.c.run_id == run_id, st.c.idx == idx)
        .values(status="sending", updated_ms=now_ms)
    )
    return None


def release_mail_slot_sync(conn: Connection, owner_id: str, key: str, sent_ms: int) -> None:
    """Undo ``claim_mail_slot_sync`` of ``sent_ms`` (the mail could not be sent)."""
    conn.execute(
        mail_throttle.delete().where(
            mail_throttle.c.owner_id == owner_id,
            mail_throttle.c.key == key,
            mail_throttle.c.sent_ms == sent_ms,
        )
    )


def claim_mail_slot_sync(
    conn: Connection, owner_id: str, key: str, *, now_ms: int, window_ms: int
) -> bool:
    """True when no mail with ``key`` went out in the last ``window_ms`` (the slot is taken
    now); False when one did. Exact under concurrency: the insert and the compare-and-set
    update each succeed for one transaction only."""
    dialect: Any = postgresql if conn.dialect.name == "postgresql" else sqlite
    inserted = conn.execute(
        dialect.insert(mail_throttle)
        .values(owner_id=owner_id, key=key, sent_ms=now_ms)
        .on_conflict_do_nothing()
    )
    if inserted.rowcount == 1:
        return True
    same = (mail_throttle.c.owner_id == owner_id, mail_throttle.c.key == key)
    sent = conn.execute(sa.select(mail_throttle.c.sent_ms).where(*same)).scalar_one_or_none()
    if sent is None or now_ms - int(sent) < window_ms:
        return False
    moved = conn.execute(
        mail_throttle.update().where(*same, mail_throttle.c.sent_ms == sent).values(sent_ms=now_ms)
    )
    return bool(moved.rowcount == 1)


async def delete_for_workflow(conn: AsyncConnection, workflow_id: str) -> None:
    await conn.execute(step_state.delete().where(step_state.c.workflow_id == workflow_id))
    await conn.execute(st.delete().where(st.c.workflow_id == workflow_id))
    await conn.execute(t.delete().where(t.c.workflow_id == workflow_id))


def step_states_sync(conn: Connection, step_ids: list[str]) -> dict[str, dict[str, Any]]:
    """``$.service.db`` stores of these code steps: {step id: {key: value}}."""
    out: dict[str, dict[str, Any]] = {step_id: {} for step_id in step_ids}
    if not step_ids:
        return out
    rows = conn.execute(
        sa.select(step_state.c.step_id, step_state.c.key, step_state.c.value).where(
            step_state.c.step_id.in_(step_ids)
        )
    )
    for row in rows:
        out[row.step_id][row.key] = row.value
    return out


def write_step_state_sync(
    conn: Connection, workflow_id: str, step_id: str, writes: dict[str, Any], deletes: list[str]
) -> None:
    keys = list(writes) + list(deletes)
    if not keys:
        return
    conn.execute(
        step_state.delete().where(step_state.c.step_id == step_id, step_state.c.key.in_(keys))
    )
    if writes:
        conn.execute(
            step_state.insert(),
            [
                {"step_id": step_id, "key": k, "value": v, "workflow_id": workflow_id}
                for k, v in writes.items()
            ],
        )
