"""Racing epochs (the vectors' "races"): every epoch sent at once by its own
thread for one task, against the memory store, SQLite and a real
PostgreSQL. Afterwards max_seen is the highest epoch, accepted epochs never
decreased in the order the writes took effect, the highest was accepted,
and every rejection named a floor above its epoch."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from conftest import VECTORS
from fencepost_fence import MemStore, Response, SqlStore, Stale, Write

RACES = VECTORS["races"]


def race(store, task, epochs):
    applied, errors, lock = [], [], threading.Lock()
    barrier = threading.Barrier(len(epochs))

    def writer(e):
        def fn(tx):
            with lock:
                applied.append(e)
            return Response(201)
        barrier.wait()
        try:
            store.do(Write(task=task, epoch=e), fn)
        except Stale as s:
            if not s.max_seen > e:
                errors.append(f"epoch {e}: stale with max_seen {s.max_seen}")
        except Exception as x:  # noqa: BLE001 - reported with the history
            errors.append(f"epoch {e}: {x!r}")

    ts = [threading.Thread(target=writer, args=(e,)) for e in epochs]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    top = max(epochs)
    assert not errors, f"{errors}; applied {applied}"
    assert applied == sorted(applied), f"accepted epochs decreased: {applied}"
    assert top in applied, f"highest epoch not applied: {applied}"
    return top


@pytest.mark.parametrize("r", RACES, ids=[r["name"] for r in RACES])
def test_race_memory(r):
    for i in range(r["rounds"]):
        s = MemStore()
        top = race(s, f"race-{i}", [int(e) for e in r["epochs"]])
        assert s.max_seen(f"race-{i}") == top


@pytest.mark.parametrize("r", RACES, ids=[r["name"] for r in RACES])
def test_race_sqlite(r, tmp_path):
    path = tmp_path / "race.db"
    store = SqlStore(lambda: sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60), "sqlite")
    conn = sqlite3.connect(path, isolation_level=None)
    store.migrate(conn)
    for i in range(r["rounds"]):
        top = race(store, f"race-{i}", [int(e) for e in r["epochs"]])
        assert store.max_seen(conn, f"race-{i}") == top


@pytest.mark.parametrize("r", RACES, ids=[r["name"] for r in RACES])
def test_race_postgres(r, postgres_dsn):
    import psycopg
    store = SqlStore(lambda: psycopg.connect(postgres_dsn), "postgres", table_prefix="race_")
    with psycopg.connect(postgres_dsn) as conn:
        store.migrate(conn)
        for i in range(r["rounds"]):
            task = f"{r['name']}-{i}"
            top = race(store, task, [int(e) for e in r["epochs"]])
            assert store.max_seen(conn, task) == top
