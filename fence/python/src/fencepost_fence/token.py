"""Header names and the syntax of fencing tokens, task and holder ids and
Idempotency-Keys (fence/SPEC.md section 2).

Header values are handled as the bytes the HTTP parser delivered: pass
``bytes``, or ``str`` in the WSGI convention (one character per byte,
latin-1), which is also how ASGI's byte headers decode without loss."""

from __future__ import annotations

from .problems import InvalidIdempotencyKey, MalformedHolder, MalformedTask, MalformedToken

HEADER_TOKEN = "X-Fencing-Token"
HEADER_TASK = "X-Fencing-Task"
HEADER_HOLDER = "X-Fencing-Holder"
HEADER_SIGNATURE = "X-Fencing-Signature"
HEADER_IDEMPOTENCY_KEY = "Idempotency-Key"
HEADER_REPLAYED = "Idempotent-Replayed"

MAX_TASK_LEN = 256
MAX_IDEMPOTENCY_KEY_LEN = 255
MAX_EPOCH = 2**64 - 1
_DIGITS = frozenset(b"0123456789")


def as_bytes(v: bytes | str) -> bytes:
    """The bytes of a header value (str values are latin-1, as in WSGI)."""
    return v if isinstance(v, bytes) else v.encode("latin-1")


def parse_epoch(v: bytes | str) -> int:
    """Parse a fencing token strictly: 1-20 ASCII digits, no leading zero,
    value 1..2^64-1; anything else raises MalformedToken."""
    b = as_bytes(v)
    if not b:
        raise MalformedToken("fence: malformed fencing token: empty")
    if len(b) > 20:
        raise MalformedToken("fence: malformed fencing token: more than 20 digits")
    if not _DIGITS.issuperset(b):
        raise MalformedToken("fence: malformed fencing token: not a decimal digit")
    if b[0] == 0x30:
        raise MalformedToken("fence: malformed fencing token: zero or leading zero")
    e = int(b)
    if e > MAX_EPOCH:
        raise MalformedToken("fence: malformed fencing token: out of range")
    return e


def _valid_id(v: bytes | str, err: type) -> str:
    b = as_bytes(v)
    if not b:
        raise err(f"fence: {err.reason}: empty")
    if len(b) > MAX_TASK_LEN:
        raise err(f"fence: {err.reason}: longer than {MAX_TASK_LEN} bytes")
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError as e:
        raise err(f"fence: {err.reason}: invalid UTF-8 at byte {e.start}") from None
    for ch in s:
        c = ord(ch)
        if c < 0x20 or 0x7F <= c <= 0x9F:
            raise err(f"fence: {err.reason}: control character")
    return s


def valid_task(v: bytes | str) -> str:
    """Return the task id as text, or raise MalformedTask: 1..256 bytes of
    UTF-8 without control characters (Unicode category Cc)."""
    return _valid_id(v, MalformedTask)


def valid_holder(v: bytes | str) -> str:
    """Return the holder id as text, or raise MalformedHolder."""
    return _valid_id(v, MalformedHolder)


def valid_idempotency_key(v: bytes | str) -> str:
    """Return the key, or raise InvalidIdempotencyKey: 1..255 bytes, each
    visible ASCII 0x21-0x7E."""
    b = as_bytes(v)
    if not b:
        raise InvalidIdempotencyKey("fence: invalid idempotency key: empty")
    if len(b) > MAX_IDEMPOTENCY_KEY_LEN:
        raise InvalidIdempotencyKey("fence: invalid idempotency key: longer than 255 bytes")
    if any(c < 0x21 or c > 0x7E for c in b):
        raise InvalidIdempotencyKey("fence: invalid idempotency key: not visible ASCII")
    return b.decode("ascii")
