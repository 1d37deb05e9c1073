"""The worker SDKs' conformance scenario played with fencepost_worker.

    python3 proxy/worker/python/conformance.py SCENARIO CONTROL_URL OPERATOR_URL TASK

Prints one JSON transcript line per step (as the Go player does); exits 1 on
the first mismatch with the scenario's expectations, 2 on bad usage."""

from __future__ import annotations

import json
import queue
import sys
import threading
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fencepost_worker as fw  # noqa: E402

CANCEL_TIMEOUT = 30.0


def code(e: BaseException | None):
    if e is None:
        return None
    return e.code if isinstance(e, fw.ControlError) else str(e)


class Actor:
    """One worker's block, on its own thread; ops run inside it, in order."""

    def __init__(self, hold: fw.Hold):
        self.ops: queue.Queue = queue.Queue()
        self.held = threading.Event()
        self.outcome = None
        self.done = threading.Event()
        self.lease: fw.Lease | None = None
        self.start_error: BaseException | None = None
        threading.Thread(target=self._run, args=(hold,), daemon=True).start()

    def _run(self, hold: fw.Hold) -> None:
        entered = False
        try:
            with hold as lease:
                entered = True
                self.lease = lease
                self.held.set()
                while (f := self.ops.get()) is not None:
                    f()
            self.outcome = "ok"
        except BaseException as e:  # noqa: BLE001 - the outcome is the transcript's
            if not entered:
                self.start_error = e
            self.outcome = code(e)
        finally:
            self.held.set()
            self.done.set()

    def do(self, f):
        box, ran = {}, threading.Event()

        def run():
            try:
                box["v"] = f()
            finally:
                ran.set()
        self.ops.put(run)
        ran.wait()
        return box["v"]


class Player:
    def __init__(self, control: str, operator: str, task: str):
        self.client = fw.Client(control)
        self.operator, self.task = operator, task
        self.actors: dict[str, Actor] = {}
        self.events: list[dict] = []  # every stream event, printed on a mismatch
        self.max_epoch = 0

    def epoch_increased(self, e: int) -> bool:
        up = e > self.max_epoch
        self.max_epoch = max(self.max_epoch, e)
        return up

    def step(self, st: dict) -> dict:
        if "operator" in st:
            return self.operate(st)
        op, name = st["op"], st["worker"]
        if op in ("acquire", "claim"):
            ev = self.events.append
            hold = (fw.claim_next(client=self.client, on_event=ev) if op == "claim"
                    else fw.task(self.task, create=st.get("create", False), client=self.client, on_event=ev))
            a = self.actors[name] = Actor(hold)
            a.held.wait()
            if a.start_error is not None:
                raise RuntimeError(f"the block did not start: {a.start_error}")
            return {"epochIncreased": self.epoch_increased(a.lease.epoch), "resumedFrom": a.lease.resumed_from}
        a = self.actors[name]
        if op == "leave":
            a.ops.put(None)
            a.done.wait()
            return {"outcome": a.outcome}
        if op == "await_cancelled":
            if not a.lease.lost.wait(CANCEL_TIMEOUT):
                return {"cancelled": False}
            return {"cancelled": True, "kind": a.lease.error.title}

        def run():
            lease = a.lease
            try:
                if op == "checkpoint":
                    lease.checkpoint(st.get("step", ""), st.get("data"))
                elif op == "complete":
                    lease.complete(st.get("result"))
                elif op == "wait_external":
                    sig = lease.wait_external(st.get("timeoutMs", 0) / 1000)
                    return {"error": None, "epochIncreased": self.epoch_increased(lease.epoch), "signal": sig}
                else:
                    return {"error": f"unknown op {op}"}
            except fw.FencepostError as e:
                return {"error": code(e)}
            return {"error": None}
        return a.do(run)

    def operate(self, st: dict) -> dict:
        u = f"{self.operator}/{st['operator']}?task={urllib.parse.quote(self.task)}"
        data = json.dumps(st["data"]).encode() if "data" in st else None
        get = st["operator"] == "task"
        req = urllib.request.Request(u, data=None if get else (data or b""), method="GET" if get else "POST")
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=60) as r:
            body = r.read()
        return {"state": json.loads(body)["state"]} if get else {}


def main(argv: list[str]) -> int:
    if len(argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    scenario = json.loads(Path(argv[1]).read_text())
    p = Player(argv[2], argv[3], argv[4])
    for i, st in enumerate(scenario["steps"]):
        label = f"step {i} ({st.get('worker', '')}{st.get('operator', '')} {st.get('op', '')})"
        try:
            got = p.step(st)
        except Exception as e:  # noqa: BLE001
            print(f"{label}: {e}", file=sys.stderr)
            return 1
        got = json.loads(json.dumps(got))
        print(json.dumps({"step": i, "got": got}, sort_keys=True), flush=True)
        for k, want in (st.get("expect") or {}).items():
            if got.get(k) != want:
                print(f"{label}: {k} = {got.get(k)!r}, want {want!r}; events: {p.events}", file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
