"""An example worker written with the Python SDK: an agent-like loop that calls a tool
per step, checkpoints after each, asks for approval half-way (wait + signal) and stops
the moment its lease is lost. Under `fencepost run` it takes the sidecar's task
(FENCEPOST_TASK); otherwise it acquires (creating) AGENT_TASK, default agent-demo.

    PYTHONPATH=proxy/worker/python python3 proxy/worker/examples/agent.py
"""

import os
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
import fencepost_worker as fw  # noqa: E402

STEPS = 6


def tool(step: int) -> None:
    """One tool call: a POST to AGENT_TOOL_URL (through the sidecar's proxy, which
    stamps the fencing token) or, without it, a second of work."""
    url = os.environ.get("AGENT_TOOL_URL")
    if not url:
        time.sleep(1)
        return
    urllib.request.urlopen(urllib.request.Request(url, data=f"step {step}".encode(), method="POST"), timeout=30).read()


def main() -> int:
    hold = (fw.current() if os.environ.get("FENCEPOST_TASK")
            else fw.task(os.environ.get("AGENT_TASK", "agent-demo"), create=True))
    try:
        with hold as lease:
            start = (lease.resumed_from or {}).get("step", 0)
            print(f"task {lease.task_id} epoch {lease.epoch}, resuming at step {start}", flush=True)
            for step in range(start, STEPS):
                lease.check()  # raises LeaseLost the moment the sidecar said stop
                tool(step)
                lease.checkpoint(f"step-{step}", {"step": step + 1})
                if step == STEPS // 2 and os.environ.get("AGENT_WAIT"):
                    print(f"waiting for approval: fencepost ctl tasks signal {lease.task_id} --payload '\"ok\"'", flush=True)
                    sig = lease.wait_external(600)
                    print(f"resumed with {sig!r} under epoch {lease.epoch}", flush=True)
    except fw.LeaseLost as e:
        print(f"stopped: the lease was lost: {e}")
        return 3
    print("completed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
