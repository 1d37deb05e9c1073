"""Holding a task in a block: the lease, its calls, and the sync and async forms."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import threading
import time
from typing import Any, Callable

from ._base import ControlError, FencepostError, LeaseLost
from ._client import Client
from ._errors import StaleEpoch, TaskWaiting
from ._stream import Attach

WAIT_POLL_MIN, WAIT_POLL_MAX = 0.1, 1.0


def _as_json(b: bytes) -> Any:
    try:
        return json.loads(b)
    except ValueError:
        return b.decode("utf-8", "replace")


class Lease:
    """One held task. Attributes: task_id, epoch, resumed_from (the handed-over
    checkpoint data), signal (after wait_external), lost (a threading.Event set the
    moment the sidecar says stop) and error (the LeaseLost, once lost)."""

    def __init__(self, client: Client, task_id: str, on_event: Callable[[dict], None] | None):
        self._client = client
        self.task_id = task_id
        self.epoch = 0
        self.resumed_from: Any = None
        self.signal: Any = None
        self.lost = threading.Event()
        self.error: LeaseLost | None = None
        self._on_event = on_event
        self._on_lost: list[Callable[[], None]] = []
        self._attach: Attach | None = None
        self._ended = False
        self._pending: dict | None = None
        self._lock = threading.Lock()

    # --- state -------------------------------------------------------------

    def _stop(self, ev: dict) -> None:
        with self._lock:
            if self.error is not None:
                return
            if self._ended:
                # The worker is ending this epoch itself (complete, fail, give back,
                # wait): a stop now is the sidecar seeing that end. It counts only if
                # the worker's call fails.
                self._pending = ev
                return
            self.error = LeaseLost(f"{ev.get('kind')} {ev.get('reason', '')}".strip(), title=ev.get("kind", ""),
                                   epoch=ev.get("epoch", 0))
            hooks = list(self._on_lost)
        self.lost.set()
        for h in hooks:
            h()
        # The epoch is over: detach at once, so this stream cannot tie the next
        # owner's grant of the task (the sidecar ties what a stream told its worker of).
        self._close_attach()

    def check(self) -> None:
        """Raise LeaseLost when the lease is over."""
        if self.error is not None:
            raise self.error

    def _call(self, path: str, body: dict) -> Any:
        self.check()
        try:
            return self._client.call(path, body)
        except LeaseLost as e:
            self._stop({"kind": "lost", "reason": e.code, "epoch": self.epoch, "stop": True})
            raise

    def _unend(self) -> None:
        with self._lock:
            self._ended, ev, self._pending = False, self._pending, None
        if ev is not None:
            self._stop(ev)

    def _take(self, grant: dict) -> None:
        self.epoch = grant["lease"]["epoch"]
        if grant.get("checkpointData") is not None:
            self.resumed_from = grant["checkpointData"]
        sig = (grant.get("task") or {}).get("signal")
        self.signal = _as_json(base64.b64decode(sig)) if sig else None
        if self._attach is None:  # else: the block's stream; wait_external moves it to the new epoch
            self._attach = Attach(self._client, self.task_id, self.epoch, self._on_event, self._stop).open()

    def _close_attach(self) -> None:
        a, self._attach = self._attach, None
        if a is not None:
            a.close()

    # --- calls -------------------------------------------------------------

    def checkpoint(self, step: str, data: Any = None) -> None:
        """Durable progress under this epoch; data (any JSON value) is what the next
        owner gets as resumed_from."""
        self._call("/v1/checkpoint", {"taskId": self.task_id, "step": step, "data": data})

    def progress(self) -> None:
        """Mark progress without a checkpoint (carried by the next heartbeat)."""
        self._call("/v1/progress", {"taskId": self.task_id})

    def complete(self, result: Any = None) -> None:
        """End the lease with the task completed; result is any JSON value."""
        self._end("/v1/complete", {"taskId": self.task_id, "result": result})

    def fail(self, reason: str = "") -> None:
        """End the lease with the task failed."""
        self._end("/v1/fail", {"taskId": self.task_id, "reason": reason})

    def give_back(self) -> None:
        """End the lease; the task is claimable again at once."""
        self._end("/v1/giveback", {"taskId": self.task_id})

    def _end(self, path: str, body: dict) -> None:
        self.check()
        if self._ended:
            raise FencepostError("fencepost: the lease was already completed, failed or given back")
        self._ended = True
        try:
            self._call(path, body)
        except BaseException:
            self._unend()
            raise
        self._close_attach()

    def wait_external(self, timeout: float = 0) -> Any:
        """Park the task until a signal (fencepost ctl tasks signal) or timeout seconds
        (0: none), then take it again under a new epoch; returns the signal's data
        (None after a timeout)."""
        self.check()
        self._ended = True
        try:
            self._call("/v1/wait", {"taskId": self.task_id, "timeoutMs": int(timeout * 1000)})
        except BaseException:
            self._unend()
            raise
        # The attach stream stays open: nothing is held while waiting, and the same
        # stream ties the next grant.
        poll = WAIT_POLL_MIN
        while True:
            try:
                grant = self._client.acquire(self.task_id)
            except ControlError as e:
                if not isinstance(e, TaskWaiting) and not e.retryable:
                    raise
                time.sleep(poll)
                poll = min(poll * 2, WAIT_POLL_MAX)
                continue
            self._take(grant)
            with self._lock:
                self._ended, self._pending = False, None
            self._attach.set_epoch(self.epoch)  # fires a stop for the new epoch seen meanwhile
            return self.signal

    # async twins: the same calls off the event loop
    async def acheckpoint(self, step: str, data: Any = None) -> None:
        await asyncio.to_thread(self.checkpoint, step, data)

    async def aprogress(self) -> None:
        await asyncio.to_thread(self.progress)

    async def acomplete(self, result: Any = None) -> None:
        await asyncio.to_thread(self.complete, result)

    async def afail(self, reason: str = "") -> None:
        await asyncio.to_thread(self.fail, reason)

    async def agive_back(self) -> None:
        await asyncio.to_thread(self.give_back)

    async def await_external(self, timeout: float = 0) -> Any:
        return await asyncio.to_thread(self.wait_external, timeout)


class Hold:
    """A task held for a block: `with` (work on this thread; lease.lost is set on
    loss and the next call raises LeaseLost) or `async with` (the task running the
    block is cancelled on loss, and LeaseLost is raised from the block).

    Leaving the block normally completes the task unless it was ended already; leaving
    it with an exception fails it (on_error="fail") or gives it back
    (on_error="give_back", and always for KeyboardInterrupt, SystemExit and an asyncio
    cancellation from outside), never completes it. A lost lease is not ended again."""

    def __init__(self, get: Callable[[Client], tuple[str, dict]], *, client: Client | None, on_error: str,
                 on_event: Callable[[dict], None] | None):
        if on_error not in ("fail", "give_back"):
            raise ValueError(f'on_error: must be "fail" or "give_back", got {on_error!r}')
        self._get, self._client = get, client or Client()
        self._on_error, self._on_event = on_error, on_event
        self.lease: Lease | None = None
        self._atask: asyncio.Task | None = None
        self._inside = False
        self._cancelled_by_us = False

    def __enter__(self) -> Lease:
        task_id, grant = self._get(self._client)
        lease = Lease(self._client, task_id, self._on_event)
        try:
            lease._take(grant)
        except BaseException:
            # Without the stream the work could not be stopped: do not start it.
            try:
                self._client.call("/v1/giveback", {"taskId": task_id})
            except ControlError:
                pass
            raise
        self.lease = lease
        return lease

    def __exit__(self, et, exc, tb) -> bool:
        lease = self.lease
        assert lease is not None
        try:
            if lease.error is not None:
                if exc is None or isinstance(exc, asyncio.CancelledError):
                    raise lease.error from exc
                return False
            if lease._ended:
                return False
            if exc is None:
                lease.complete(None)
            elif self._on_error == "give_back" or isinstance(exc, (KeyboardInterrupt, SystemExit, asyncio.CancelledError)):
                # An interrupted block (Ctrl-C, exit, a cancelled asyncio task) did not
                # fail: the task goes back to be claimed at once.
                lease.give_back()
            else:
                lease.fail(f"{type(exc).__name__}: {exc}")
            return False
        finally:
            lease._close_attach()

    async def __aenter__(self) -> Lease:
        lease = await asyncio.to_thread(self.__enter__)
        self._atask = asyncio.current_task()
        self._inside = True
        loop = asyncio.get_running_loop()

        def do_cancel() -> None:  # on the loop's thread, so it cannot race __aexit__
            if self._inside and not self._cancelled_by_us:
                self._cancelled_by_us = True
                self._atask.cancel()

        def cancel() -> None:
            loop.call_soon_threadsafe(do_cancel)

        with lease._lock:
            lease._on_lost.append(cancel)
            already = lease.error is not None
        if already:
            do_cancel()
        return lease

    async def __aexit__(self, et, exc, tb) -> bool:
        self._inside = False
        if self._cancelled_by_us and self._atask is not None:
            self._atask.uncancel()
        return await asyncio.to_thread(self.__exit__, et, exc, tb)


def task(task_id: str, *, create: bool = False, client: Client | None = None, on_error: str = "fail",
         on_event: Callable[[dict], None] | None = None) -> Hold:
    """Acquire task_id (create it with create=True) and hold it for a block:
    `with fencepost_worker.task("t1") as lease:` or `async with`."""
    return Hold(lambda c: (task_id, c.acquire(task_id, create)), client=client, on_error=on_error, on_event=on_event)


def claim_next(*, client: Client | None = None, on_error: str = "fail",
               on_event: Callable[[dict], None] | None = None) -> Hold:
    """Claim the next claimable task and hold it for a block (NoTask when none)."""
    def get(c: Client) -> tuple[str, dict]:
        g = c.claim()
        return g["lease"]["taskId"] or g["task"]["taskId"], g
    return Hold(get, client=client, on_error=on_error, on_event=on_event)


def current(*, client: Client | None = None, on_error: str = "fail",
            on_event: Callable[[dict], None] | None = None) -> Hold:
    """One-task mode (`fencepost run`): hold the lease the sidecar already holds, the
    task FENCEPOST_TASK names or else the only one GET /v1/lease shows; resumed_from
    is FENCEPOST_CHECKPOINT."""
    def get(c: Client) -> tuple[str, dict]:
        want = os.environ.get("FENCEPOST_TASK", "")
        views = c.leases(want)
        if len(views) != 1:
            raise FencepostError(f"fencepost: one-task mode: FENCEPOST_TASK={want!r} and the sidecar holds "
                                 f"{len(views)} matching leases, not one")
        epoch = os.environ.get("FENCEPOST_EPOCH", "")
        if want and epoch.isdigit() and int(epoch) != views[0]["epoch"]:
            raise StaleEpoch(f"FENCEPOST_EPOCH is {epoch}, the sidecar holds epoch {views[0]['epoch']}",
                             status=409, epoch=views[0]["epoch"])
        g: dict = {"lease": views[0], "task": {"taskId": views[0]["taskId"]}}
        cp = os.environ.get("FENCEPOST_CHECKPOINT", "")
        if cp:
            g["checkpointData"] = _as_json(cp.encode())
        return views[0]["taskId"], g
    return Hold(get, client=client, on_error=on_error, on_event=on_event)
