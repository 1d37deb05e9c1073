"""fencepost_worker: the Python worker SDK of the fencepost sidecar's control API.

Standard library only, Python 3.11+. Hold a task in a block; the SDK keeps the
task's attach stream open (so the worker's death ends the lease) and, the moment
the sidecar says stop, sets ``lease.lost`` (and cancels the block's asyncio task
in the async form); the next SDK call raises ``LeaseLost``::

    import fencepost_worker as fw

    with fw.task("t1", create=True) as lease:
        start = (lease.resumed_from or {}).get("page", 0)
        for page in range(start, 10):
            if lease.lost.is_set():
                break
            lease.checkpoint(f"page-{page}", {"page": page + 1})

Errors are one class per problem code, generated from the shared error table
(``_errors.py``); every one is a ``ControlError`` with ``code``, ``status`` and
``retryable``, and the codes that mean the lease is over are ``LeaseLost``.
"""

from ._base import ControlError, FencepostError, LeaseLost
from ._client import DEFAULT_CONTROL_URL, Client
from ._errors import *  # noqa: F401,F403 - one class per code
from ._errors import KINDS, __all__ as _codes
from ._lease import Hold, Lease, claim_next, current, task

__all__ = ["Client", "ControlError", "DEFAULT_CONTROL_URL", "FencepostError", "Hold", "KINDS", "Lease",
           "LeaseLost", "claim_next", "current", "task", *_codes]
