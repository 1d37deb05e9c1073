"""fencepost_fence: downstream validation of fencepost fencing tokens
(fence/SPEC.md), conforming to the Go package's vectors
(fence/testdata/vectors.json).

FastAPI / Starlette::

    from fencepost_fence import FenceASGI, MemStore
    app.add_middleware(FenceASGI, store=MemStore())

Flask / Django (WSGI)::

    from fencepost_fence import FenceWSGI, MemStore
    app.wsgi_app = FenceWSGI(app.wsgi_app, store=MemStore())
"""

from .asgi import FenceASGI
from .memstore import MemStore
from .problems import FenceError, Problem, Stale
from .sign import KeyFetcher, StaticKeys, parse_keys, sign, verify_signature
from .sqlstore import SqlStore
from .token import parse_epoch, valid_holder, valid_idempotency_key, valid_task
from .validator import Config, Response, Validator, Write, payload_fingerprint
from .wsgi import FenceWSGI

__all__ = ["FenceASGI", "FenceWSGI", "MemStore", "SqlStore", "Validator", "Config", "Write", "Response", "Problem",
           "FenceError", "Stale", "KeyFetcher", "StaticKeys", "parse_keys", "sign", "verify_signature", "parse_epoch",
           "valid_task", "valid_holder", "valid_idempotency_key", "payload_fingerprint"]
