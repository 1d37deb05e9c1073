"""The SQL store through a DB-API connection: the epoch check, the
idempotency record and the service's own statements share the caller's
transaction, with the tables of the Go fence/sqlstore (a Go and a Python
service can share one database). PostgreSQL via psycopg 3, SQLite via
sqlite3.

Two ways to use it: ``do(w, fn)`` opens a connection with ``connect()``,
runs ``fn(conn)`` in the transaction and commits (the middlewares do
this); or, in a transaction you manage, ``check(conn, w)`` (stale check,
raise, idempotency lookup), your statements, ``record(conn, w, resp)``,
commit. Writes to one task are serialised by the row lock of the epoch
UPDATE, so a concurrent duplicate key waits for the first and replays."""

from __future__ import annotations

import asyncio
import json
import re
import time

from .problems import FenceError, PayloadMismatch, Stale, StoreFailure
from .validator import Response, Write, handler_failed

_IDENT = re.compile(r"[a-z_][a-z0-9_]{0,40}")
_MAX_ATTEMPTS = 4


def encode_epoch(e: int) -> str:
    """20 zero-padded digits: text order is numeric order over all of uint64."""
    return "%020d" % e


class SqlStore:
    """``dialect`` is "sqlite" (sqlite3; open it with isolation_level=None so
    this store's BEGIN IMMEDIATE takes the write lock up front) or
    "postgres" (psycopg 3, autocommit off; READ COMMITTED is enough)."""

    def __init__(self, connect=None, dialect: str = "postgres", table_prefix: str = "fence_", clock=time.time):
        if dialect not in ("sqlite", "postgres"):
            raise ValueError("fence: SqlStore dialect must be 'sqlite' or 'postgres'")
        if not _IDENT.fullmatch(table_prefix):
            raise ValueError(f"fence: SqlStore table_prefix {table_prefix!r} must match {_IDENT.pattern}")
        self._connect, self.dialect, self._clock = connect, dialect, clock
        t, i = table_prefix + "tasks", table_prefix + "idempotency"
        epoch_t = 'TEXT COLLATE "C"' if dialect == "postgres" else "TEXT"
        blob_t = "BYTEA" if dialect == "postgres" else "BLOB"
        p = "%s" if dialect == "postgres" else "?"

        def q(s: str) -> str:
            return s.replace("?", p)

        self.schema = [
            f"CREATE TABLE IF NOT EXISTS {t} (\n\ttenant      TEXT NOT NULL,\n\ttask_id     TEXT NOT NULL,\n"
            f"\tlease_epoch {epoch_t} NOT NULL,\n\tupdated_at  BIGINT NOT NULL,\n\tPRIMARY KEY (tenant, task_id))",
            f"CREATE TABLE IF NOT EXISTS {i} (\n\ttenant      TEXT NOT NULL,\n\ttask_id     TEXT NOT NULL,\n"
            f"\tidem_key    TEXT NOT NULL,\n\tfingerprint TEXT NOT NULL,\n\tlease_epoch {epoch_t} NOT NULL,\n"
            f"\tstatus      INTEGER NOT NULL,\n\theader      TEXT NOT NULL,\n\tbody        {blob_t} NOT NULL,\n"
            f"\tcreated_at  BIGINT NOT NULL,\n\tPRIMARY KEY (tenant, task_id, idem_key))",
            f"CREATE INDEX IF NOT EXISTS {i}_created ON {i} (created_at)",
        ]
        self._update = q(f"UPDATE {t} SET lease_epoch = ?, updated_at = ? WHERE tenant = ? AND task_id = ? AND lease_epoch <= ?")
        self._insert = q(f"INSERT INTO {t} (tenant, task_id, lease_epoch, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT (tenant, task_id) DO NOTHING")
        self._epoch = q(f"SELECT lease_epoch FROM {t} WHERE tenant = ? AND task_id = ?")
        self._idem_get = q(f"SELECT fingerprint, status, header, body FROM {i} WHERE tenant = ? AND task_id = ? AND idem_key = ?")
        self._idem_put = q(f"INSERT INTO {i} (tenant, task_id, idem_key, fingerprint, lease_epoch, status, header, body, created_at) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
        self._purge = q(f"DELETE FROM {i} WHERE created_at < ?")

    def migrate(self, conn) -> None:
        """Create the tables if they do not exist, and commit."""
        for s in self.schema:
            conn.execute(s)
        if self.dialect == "postgres" or conn.in_transaction:
            conn.commit()

    def begin(self, conn) -> None:
        """Start the transaction (SQLite: BEGIN IMMEDIATE; psycopg starts one itself)."""
        if self.dialect == "sqlite" and not conn.in_transaction:
            conn.execute("BEGIN IMMEDIATE")

    def _fence(self, conn, w: Write) -> None:
        e, now = encode_epoch(w.epoch), int(self._clock() * 1000)
        for _ in range(_MAX_ATTEMPTS):
            if conn.execute(self._update, (e, now, w.tenant, w.task, e)).rowcount == 1:
                return
            if conn.execute(self._insert, (w.tenant, w.task, e, now)).rowcount == 1:
                return
            row = conn.execute(self._epoch, (w.tenant, w.task)).fetchone()
            if row is None:
                continue
            seen = int(row[0])
            if w.epoch < seen:
                raise Stale(w.epoch, seen)
            # committed by someone else between our UPDATE and INSERT: UPDATE again
        raise StoreFailure(f"fence: store failure: task {w.task!r} did not settle after {_MAX_ATTEMPTS} attempts")

    def check(self, conn, w: Write) -> Response | None:
        """In the caller's transaction: Stale if the epoch is below the
        floor, else raise it (the row stays locked); then the recorded
        response to replay, PayloadMismatch, or None (perform the write)."""
        try:
            self._fence(conn, w)
            if not w.idempotency_key:
                return None
            row = conn.execute(self._idem_get, (w.tenant, w.task, w.idempotency_key)).fetchone()
        except FenceError:
            raise
        except Exception as e:
            raise StoreFailure(f"fence: store failure: {e}") from e
        if row is None:
            return None
        if row[0] != w.fingerprint.hex():
            raise PayloadMismatch(f"fence: idempotency key reused with a different payload: key {w.idempotency_key!r}")
        headers = [(k, v) for k, vs in json.loads(row[2]).items() for v in vs]
        return Response(int(row[1]), headers, bytes(row[3] or b""))

    def record(self, conn, w: Write, resp: Response) -> None:
        """Record resp under the key, in the caller's transaction (no-op
        without a key or for a 5xx)."""
        if not w.idempotency_key or not resp.recordable():
            return
        r = resp.replayable()
        header: dict[str, list[str]] = {}
        for k, v in r.headers:
            header.setdefault(k, []).append(v)
        try:
            conn.execute(self._idem_put, (w.tenant, w.task, w.idempotency_key, w.fingerprint.hex(), encode_epoch(w.epoch),
                                          r.status, json.dumps(header, separators=(",", ":")), r.body, int(self._clock() * 1000)))
        except Exception as e:
            raise StoreFailure(f"fence: store failure: record key {w.idempotency_key!r}: {e}") from e

    def max_seen(self, conn, task: str, tenant: str = "") -> int | None:
        row = conn.execute(self._epoch, (tenant, task)).fetchone()
        return int(row[0]) if row else None

    def purge_idempotency(self, conn, cutoff: float) -> int:
        """Delete records created before cutoff (epoch seconds); task rows are never purged."""
        return conn.execute(self._purge, (int(cutoff * 1000),)).rowcount

    # --- the middleware entry points: one connection and transaction per write ---

    def _start(self, w: Write):
        if self._connect is None:
            raise ValueError("fence: SqlStore needs connect= for do()")
        conn = self._connect()
        try:
            self.begin(conn)
            replay = self.check(conn, w)
            if replay is not None:
                conn.commit()  # the replay's raise of max_seen
        except BaseException:
            self._end(conn, False)
            raise
        return conn, replay

    def _finish(self, conn, w: Write, resp: Response) -> None:
        ok = False
        try:
            if resp.recordable():
                self.record(conn, w, resp)
                try:
                    conn.commit()
                except Exception as e:
                    raise StoreFailure(f"fence: store failure: commit: {e}") from e
                ok = True
        finally:
            self._end(conn, ok)

    def _end(self, conn, committed: bool) -> None:
        try:
            if not committed:
                conn.rollback()
        finally:
            conn.close()

    def do(self, w: Write, fn) -> tuple[Response, str]:
        conn, replay = self._start(w)
        if replay is not None:
            conn.close()
            return replay, "replayed"
        try:
            resp = fn(conn)
        except Exception as e:
            self._end(conn, False)
            raise handler_failed(e) from e
        self._finish(conn, w, resp)
        return resp, "executed"

    async def do_async(self, w: Write, fn) -> tuple[Response, str]:
        """As do, with the blocking DB-API calls in a worker thread; fn is
        async and gets the connection (use it from a thread too)."""
        conn, replay = await asyncio.to_thread(self._start, w)
        if replay is not None:
            conn.close()
            return replay, "replayed"
        try:
            resp = await fn(conn)
        except Exception as e:
            await asyncio.to_thread(self._end, conn, False)
            raise handler_failed(e) from e
        await asyncio.to_thread(self._finish, conn, w, resp)
        return resp, "executed"
