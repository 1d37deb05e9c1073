"""The attach stream: GET /v1/attach?task=T kept open on a thread, reconnected with Last-Event-ID."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.parse
from typing import Callable

from ._client import Client, problem_error

RECONNECT_MIN, RECONNECT_MAX = 0.02, 1.0
# A stream silent this long is taken for dead and reconnected: three of the
# sidecar's 15 s keepalives.
STREAM_IDLE = 45.0


def stop_of(ev: dict) -> bool:
    """The one rule for "stop now": the event's stop field; a sidecar older than the
    contract sends none, and then lost and revoked mean stop."""
    if "stop" in ev:
        return bool(ev["stop"])
    return ev.get("kind") in ("lost", "revoked")


class Attach:
    """The block's attach stream, kept across the epochs a wait_external moves through
    (so no close of an old stream can race the next grant); on_stop(event) is called
    when the sidecar says stop for the current epoch."""

    def __init__(self, client: Client, task_id: str, epoch: int,
                 on_event: Callable[[dict], None] | None, on_stop: Callable[[dict], None]):
        self.client, self.task_id, self.epoch = client, task_id, epoch
        self.on_event, self.on_stop = on_event, on_stop
        self.future: dict[int, dict] = {}  # stops for an epoch newer than the one known yet
        self.path = "/v1/attach"
        self.last_id = ""
        self.ready = threading.Event()
        self.conn_error: Exception | None = None
        self._closed = threading.Event()
        self._conn = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name=f"fencepost-attach-{task_id}", daemon=True)

    def open(self, timeout: float = 30.0) -> "Attach":
        self._thread.start()
        if not self.ready.wait(timeout):
            self.close()
            raise TimeoutError(f"fencepost: attach to {self.task_id}: no answer in {timeout}s")
        if self.conn_error is not None:
            self.close()
            raise self.conn_error
        return self

    def set_epoch(self, epoch: int) -> None:
        """Move to the lease's new epoch, firing a stop for it seen before the grant's reply."""
        with self._lock:
            self.epoch = epoch
            ev = self.future.pop(epoch, None)
            self.future.clear()
        if ev is not None:
            self.on_stop(ev)

    def close(self) -> None:
        """End the stream cleanly (after the lease ended)."""
        self._closed.set()
        with self._lock:
            conn = self._conn
        if conn is not None and conn.sock is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(5)

    def _loop(self) -> None:
        wait = RECONNECT_MIN
        while not self._closed.is_set():
            try:
                self._once()
                wait = RECONNECT_MIN
            except Exception as e:  # noqa: BLE001 - any break means reconnect
                if not self.ready.is_set():
                    self.conn_error = e
                    self.ready.set()
                    return
            if self._closed.wait(wait):
                return
            wait = min(wait * 2, RECONNECT_MAX)

    def _once(self) -> None:
        conn = self.client.connect(timeout=STREAM_IDLE)
        with self._lock:
            self._conn = conn
        try:
            headers = {"Accept": "text/event-stream"}
            if self.last_id:
                headers["Last-Event-ID"] = self.last_id
            conn.request("GET", f"{self.path}?task={urllib.parse.quote(self.task_id)}", headers=headers)
            resp = conn.getresponse()
            if resp.status == 404 and self.path == "/v1/attach":
                # A sidecar from before the attach route: the events stream still says stop.
                resp.read()
                self.path = "/v1/events"
                return self._once()
            if resp.status != 200:
                raise problem_error(resp.status, resp.read())
            self.ready.set()
            self._read(resp)
        finally:
            conn.close()

    def _read(self, resp) -> None:
        ev_id, kind, data = "", "", None
        while not self._closed.is_set():
            line = resp.readline()
            if not line:
                return
            line = line.decode("utf-8").rstrip("\r\n")
            if line == "":
                if data is not None:
                    self._handle(ev_id, kind, data)
                kind, data = "", None
            elif line.startswith(":"):
                continue
            else:
                field, _, val = line.partition(":")
                val = val[1:] if val.startswith(" ") else val
                if field == "id":
                    ev_id = val
                elif field == "event":
                    kind = val
                elif field == "data":
                    data = val if data is None else data + "\n" + val

    def _handle(self, ev_id: str, kind: str, data: str) -> None:
        if ev_id:
            self.last_id = ev_id
        try:
            ev = json.loads(data)
        except ValueError:
            return
        ev.setdefault("kind", kind)
        ev["id"] = ev_id
        if ev.get("taskId") and ev["taskId"] != self.task_id:
            return
        stop = stop_of(ev)
        with self._lock:
            cur = self.epoch
            if ev["kind"] == "state":
                # A state that does not show this epoch held is a stop (the sidecar
                # restarted without it, or it ended while the stream was down).
                stop = stop or not ev.get("taskId") or ev.get("epoch") != cur
                ev["taskId"] = self.task_id
            elif stop and ev.get("epoch", 0) > cur:
                self.future[ev["epoch"]] = ev  # the grant's reply has not told us this epoch yet
                stop = False
        ev["stop"] = ev.get("stop") or stop
        if self.on_event is not None:
            self.on_event(ev)
        if stop and (ev["kind"] == "state" or ev.get("epoch", 0) in (0, cur)):
            self.on_stop(ev)
