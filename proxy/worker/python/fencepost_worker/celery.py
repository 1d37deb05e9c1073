"""Celery adapter: every task runs under a fencepost lease keyed by its task id.

Celery delivers at least once: with acks_late, a worker crash or a visibility
timeout hands the same message (the same task id) to a second worker while the
first may still run. Run under FencedTask, a delivery first acquires the lease on
the task id through the worker's sidecar, so at most one owner runs it at a time,
its tool calls carry that owner's fencing token (through the sidecar's proxy), and
a later owner resumes from the last checkpoint::

    from celery import Celery
    from fencepost_worker.celery import FencedTask, current_lease

    app = Celery("agents", broker="redis://...")

    @app.task(base=FencedTask, bind=True, acks_late=True)
    def research(self, topic):
        lease = current_lease()
        page = (lease.resumed_from or {}).get("page", 0)
        ...
        lease.checkpoint(f"page-{page}", {"page": page + 1})

What a delivery does:
  - the lease is held elsewhere (lease_held, not_claimable, task_waiting): retry
    later (Celery's retry, fencepost_retry_delay seconds);
  - the task is already completed or failed (task_final): another delivery did it;
    this one is ignored (celery.exceptions.Ignore), the body never runs twice;
  - the lease is lost while the body runs (LeaseLost from an SDK call or on leaving):
    retry, and the next owner resumes from the checkpoint;
  - the body returns: the fencepost task completes with the return value (when it
    is JSON); it raises: the task fails, except celery's Retry, which gives it back.

Needs Celery (Debian: python3-celery); the rest of fencepost_worker does not.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from celery import Task
from celery.exceptions import Ignore, Retry

from ._base import LeaseLost
from ._client import Client
from ._errors import LeaseHeld, NotClaimable, TaskFinal, TaskWaiting
from ._lease import Lease, task as hold_task

_local = threading.local()


def current_lease() -> Lease:
    """The lease of the FencedTask running on this thread."""
    lease = getattr(_local, "lease", None)
    if lease is None:
        raise RuntimeError("fencepost_worker.celery.current_lease: no FencedTask is running on this thread")
    return lease


def _jsonable(v: Any) -> Any:
    try:
        json.dumps(v)
        return v
    except (TypeError, ValueError):
        return None


class FencedTask(Task):
    """A Celery task base class that runs each delivery under a lease on its task id."""

    abstract = True
    #: the sidecar's control API (default: FENCEPOST_CONTROL_URL)
    fencepost_client: Client | None = None
    #: seconds before a delivery that found the lease held elsewhere, or lost it, retries
    fencepost_retry_delay: float = 1.0

    def fencepost_key(self) -> str:
        """The fencepost task id of this delivery: the Celery task id."""
        return self.request.id

    def __call__(self, *args, **kwargs):
        if getattr(self.request, "called_directly", False) or self.request.id is None:
            return self.run(*args, **kwargs)  # a plain call, not a delivery
        key = self.fencepost_key()
        client = self.fencepost_client or Client()
        try:
            with hold_task(key, create=True, client=client) as lease:
                prev, _local.lease = getattr(_local, "lease", None), lease
                try:
                    result = self.run(*args, **kwargs)
                except Retry:
                    lease.give_back()
                    raise
                finally:
                    _local.lease = prev
                lease.check()
                lease.complete(_jsonable(result))
                return result
        except TaskFinal:
            raise Ignore()
        except (LeaseHeld, NotClaimable, TaskWaiting, LeaseLost) as e:
            raise self.retry(exc=e, countdown=self.fencepost_retry_delay, max_retries=self.max_retries)
