"""The bounded in-memory store, with the refusal rule of Go's MemStore: a
task's max_seen is never evicted (a full task table refuses new tasks with
store-full), completed idempotency records are evicted least recently used
first and after a TTL, running records never (all slots running ->
store-full). Writes to one task run one at a time; a duplicate key that
arrives while the first runs gets 409 in progress."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict

from .problems import InProgress, PayloadMismatch, Stale, StoreFull
from .validator import Response, Write, handler_failed

DEFAULT_MAX_TASKS = 100_000
DEFAULT_MAX_IDEMPOTENCY_RECORDS = 100_000
DEFAULT_IDEMPOTENCY_TTL = 24 * 3600.0


class _Task:
    __slots__ = ("max_seen", "busy", "waiters", "futures")

    def __init__(self):
        self.max_seen, self.busy, self.waiters, self.futures = 0, False, 0, []


class _Rec:
    __slots__ = ("fp", "done", "resp", "used")

    def __init__(self, fp, used):
        self.fp, self.done, self.resp, self.used = fp, False, None, used


class MemStore:
    """Thread-safe and asyncio-safe; ``do`` for WSGI, ``do_async`` for ASGI."""

    def __init__(self, max_tasks: int = DEFAULT_MAX_TASKS, max_idempotency_records: int = DEFAULT_MAX_IDEMPOTENCY_RECORDS,
                 idempotency_ttl: float = DEFAULT_IDEMPOTENCY_TTL, clock=time.monotonic):
        if max_tasks <= 0 or max_idempotency_records <= 0 or idempotency_ttl <= 0:
            raise ValueError("fence: MemStore sizes and TTL must be positive")
        self._max_tasks, self._max_recs, self._ttl, self._clock = max_tasks, max_idempotency_records, idempotency_ttl, clock
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._tasks: dict[tuple, _Task] = {}
        self._idem: dict[tuple, _Rec] = {}
        self._lru: OrderedDict[tuple, None] = OrderedDict()  # completed records, least recently used first

    def max_seen(self, task: str, tenant: str = "") -> int | None:
        with self._lock:
            t = self._tasks.get((tenant, task))
            return t.max_seen if t else None

    def __len__(self) -> int:
        return len(self._tasks)

    # --- the critical sections (called with self._lock held) ---

    def _enter(self, w: Write, first: bool, claim):
        """One attempt: ('replay', resp) | ('run', claim) | ('wait', claim)."""
        k = (w.tenant, w.task)
        t = self._tasks.get(k)
        if t is None:
            if len(self._tasks) >= self._max_tasks:
                raise StoreFull(f"fence: store full: task table holds {len(self._tasks)} tasks; max_seen is never evicted")
            t = self._tasks[k] = _Task()
        if w.epoch < t.max_seen:
            self._release_locked(claim)
            self._hand_on(t)
            raise Stale(w.epoch, t.max_seen)
        if first and w.idempotency_key:
            claim, replay = self._claim(w)
            if replay is not None:
                t.max_seen = w.epoch
                return "replay", replay
        if not t.busy:
            t.busy, t.max_seen = True, w.epoch
            return "run", claim
        return "wait", claim

    def _claim(self, w: Write):
        k = (w.tenant, w.task, w.idempotency_key)
        now = self._clock()
        while self._lru:
            old = next(iter(self._lru))
            if now - self._idem[old].used < self._ttl:
                break
            del self._lru[old], self._idem[old]
        rec = self._idem.get(k)
        if rec is not None:
            if not rec.done:
                raise InProgress(f"fence: idempotent request in progress: key {w.idempotency_key!r}")
            if rec.fp != w.fingerprint:
                raise PayloadMismatch(f"fence: idempotency key reused with a different payload: key {w.idempotency_key!r}")
            rec.used = now
            self._lru.move_to_end(k)
            return None, rec.resp
        if len(self._idem) >= self._max_recs:
            if not self._lru:
                raise StoreFull(f"fence: store full: {len(self._idem)} idempotency records, all in progress")
            old, _ = self._lru.popitem(last=False)
            del self._idem[old]
        rec = self._idem[k] = _Rec(w.fingerprint, now)
        return (k, rec), None

    def _release_locked(self, claim):
        if claim is not None and self._idem.get(claim[0]) is claim[1]:
            del self._idem[claim[0]]

    def _hand_on(self, t: _Task):
        if not t.busy:
            self._cond.notify_all()
            for loop, fut in t.futures:
                loop.call_soon_threadsafe(lambda f=fut: f.done() or f.set_result(None))
            t.futures.clear()

    def _leave(self, w: Write, claim, resp: Response | None):
        with self._lock:
            if claim is not None:
                if resp is not None and resp.recordable():
                    rec = claim[1]
                    rec.done, rec.resp, rec.used = True, resp.replayable(), self._clock()
                    self._lru[claim[0]] = None
                else:
                    self._release_locked(claim)
            t = self._tasks[(w.tenant, w.task)]
            t.busy = False
            self._hand_on(t)

    # --- the two entry points ---

    def do(self, w: Write, fn) -> tuple[Response, str]:
        """Check, then run ``fn(None)`` (sync) with the task held."""
        with self._lock:
            state, claim = self._enter(w, True, None)
            while state == "wait":
                self._cond.wait()
                state, claim = self._enter(w, False, claim)
        if state == "replay":
            return claim, "replayed"
        resp = None
        try:
            resp = fn(None)
        except Exception as e:
            raise handler_failed(e) from e
        finally:
            self._leave(w, claim, resp)
        return resp, "executed"

    async def do_async(self, w: Write, fn) -> tuple[Response, str]:
        """Check, then ``await fn(None)`` with the task held; waits without
        blocking the event loop."""
        loop = asyncio.get_running_loop()
        first, claim = True, None
        while True:
            with self._lock:
                state, claim = self._enter(w, first, claim)
                if state != "wait":
                    break
                fut = loop.create_future()
                self._tasks[(w.tenant, w.task)].futures.append((loop, fut))
            first = False
            try:
                await fut
            except asyncio.CancelledError:
                with self._lock:
                    self._release_locked(claim)
                    self._hand_on(self._tasks[(w.tenant, w.task)])
                raise
        if state == "replay":
            return claim, "replayed"
        resp = None
        try:
            resp = await fn(None)
        except Exception as e:
            raise handler_failed(e) from e
        finally:
            self._leave(w, claim, resp)
        return resp, "executed"
