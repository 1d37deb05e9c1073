"""The decision table of fence/SPEC.md section 4 in one place: the stateless
checks (rows 1-11) here, the stateful ones (12-17) in the stores, and the
glue every middleware calls."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Callable, Iterable

from . import _otel
from . import token as tk
from .problems import BadSignature, MalformedHolder, MalformedTask, MalformedToken, MissingSignature, \
    MissingTask, MissingToken, InvalidIdempotencyKey, Problem, ScopeRejected, WriteFailed, FenceError
from .sign import verify_signature

DEFAULT_MAX_BODY_BYTES = 8 << 20
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
# Response headers never recorded for replay: hop-by-hop, per-response
# values, and cookies (never handed to whoever repeats a key).
UNREPLAYABLE = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-connection", "te", "trailer",
                          "transfer-encoding", "upgrade", "date", "content-length", "set-cookie"})


def default_is_write(method: str, path: str) -> bool:
    """Every method except GET, HEAD, OPTIONS and TRACE is a write."""
    return method.upper() not in SAFE_METHODS


def canonical_header(name: str) -> str:
    """Go's canonical spelling (content-type -> Content-Type), so stored
    records are shared with the Go sqlstore."""
    return "-".join(p[:1].upper() + p[1:].lower() for p in name.split("-"))


def payload_fingerprint(method: str, target: bytes | str, body: bytes) -> bytes:
    """SHA-256 over "fencepost-payload-v1\\n" + method + "\\n" + target + "\\n" + body."""
    h = hashlib.sha256(b"fencepost-payload-v1\n")
    h.update(method.encode("latin-1") + b"\n" + tk.as_bytes(target) + b"\n")
    h.update(body)
    return h.digest()


@dataclass
class Write:
    """One fenced write as a store sees it."""

    task: str
    epoch: int
    tenant: str = ""
    holder: str = ""
    idempotency_key: str = ""
    fingerprint: bytes = b""


@dataclass
class Response:
    """A handler's response as recorded for replay; headers are (name,
    value) pairs in order."""

    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    def recordable(self) -> bool:
        """Below 500: a 5xx means the write did not happen."""
        return self.status < 500

    def replayable(self) -> "Response":
        return Response(self.status, [(canonical_header(k), v) for k, v in self.headers
                                      if k.lower() not in UNREPLAYABLE], bytes(self.body))


@dataclass
class Config:
    """Validator settings. ``keys`` (StaticKeys, KeyFetcher or anything with
    ``public_key(id)``) turns signature checks on; ``allow_unsigned`` then
    still accepts unsigned writes (migrations only)."""

    store: object
    keys: object = None
    allow_unsigned: bool = False
    is_write: Callable[[str, str], bool] = default_is_write
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    # observer(write_or_None, status, problem_or_None, outcome_or_None), for metrics.
    observer: Callable | None = None


def _one(values: list, missing, repeated, name: str):
    if not values:
        if missing is None:
            return None
        raise missing(f"fence: missing {name}")
    if len(values) > 1:
        raise repeated(f"fence: header {name} repeated")
    return tk.as_bytes(values[0])


class Validator:
    """Applies the decision table; safe for concurrent use."""

    def __init__(self, cfg: Config):
        if cfg.store is None:
            raise ValueError("fence: Config.store is required")
        if cfg.max_body_bytes <= 0:
            raise ValueError("fence: Config.max_body_bytes must be positive")
        self.cfg = cfg

    def is_write(self, method: str, path: str) -> bool:
        return self.cfg.is_write(method, path)

    def parse(self, get_all: Callable[[str], list]) -> Write:
        """Rows 1-9: token, task, holder, signature, key syntax, in order.
        ``get_all(name)`` returns every value of a header (bytes or latin-1 str)."""
        raw = _one(get_all(tk.HEADER_TOKEN), MissingToken, MalformedToken, tk.HEADER_TOKEN)
        epoch = tk.parse_epoch(raw)
        task_b = _one(get_all(tk.HEADER_TASK), MissingTask, MalformedTask, tk.HEADER_TASK)
        task = tk.valid_task(task_b)
        holder_b = _one(get_all(tk.HEADER_HOLDER), None, MalformedHolder, tk.HEADER_HOLDER)
        holder = tk.valid_holder(holder_b) if holder_b is not None else ""
        if self.cfg.keys is not None:
            sig = _one(get_all(tk.HEADER_SIGNATURE), None, BadSignature, tk.HEADER_SIGNATURE)
            if sig is None:
                if not self.cfg.allow_unsigned:
                    raise MissingSignature("fence: missing token signature")
            else:
                verify_signature(self.cfg.keys, sig, task_b, epoch, holder_b or b"")
        key_b = _one(get_all(tk.HEADER_IDEMPOTENCY_KEY), None, InvalidIdempotencyKey, tk.HEADER_IDEMPOTENCY_KEY)
        key = tk.valid_idempotency_key(key_b) if key_b is not None else ""
        return Write(task=task, epoch=epoch, holder=holder, idempotency_key=key)

    def scope(self, w: Write, scope: Callable[[str], str] | None) -> None:
        """Row 10: the service's scope hook names the tenant or refuses."""
        if scope is None:
            return
        try:
            w.tenant = scope(w.task)
        except FenceError:
            raise
        except Exception as e:
            raise ScopeRejected(f"fence: task not allowed in this scope: {e}") from None

    def observe(self, w, status, problem=None, outcome=None):
        """Hand one decision to the observer and, when opentelemetry-api is
        installed, to the current span (see _otel)."""
        if self.cfg.observer is not None:
            self.cfg.observer(w, status, problem, outcome)
        _otel.annotate(w, problem, outcome)


def problem_for(err: BaseException) -> Problem:
    """The problem document of a rejection (anything unknown is store-failure)."""
    return Problem(err)


def handler_failed(err: BaseException) -> WriteFailed:
    return WriteFailed(f"fence: write failed: {err}")


def header_getter(pairs: Iterable[tuple], lower: bool = True) -> Callable[[str], list]:
    """get_all over (name, value) pairs, names compared case-insensitively."""
    idx: dict[str, list] = {}
    for k, v in pairs:
        name = k.decode("latin-1") if isinstance(k, bytes) else k
        idx.setdefault(name.lower(), []).append(v)
    return lambda name: idx.get(name.lower(), [])
