"""Rejections of the decision table (fence/SPEC.md section 4): one
exception class per problem type, each with its status and title in one
table, and the problem+json document built from it."""

from __future__ import annotations

import json

PROBLEM_CONTENT_TYPE = "application/problem+json"
PROBLEM_BASE = "https://fencepost.dev/problems/"


class FenceError(Exception):
    """Base of every rejection; ``reason`` is the tail of the problem type."""

    reason = "store-failure"


class MissingToken(FenceError):
    reason = "missing-token"


class MalformedToken(FenceError):
    reason = "malformed-token"


class MissingTask(FenceError):
    reason = "missing-task"


class MalformedTask(FenceError):
    reason = "malformed-task"


class MalformedHolder(FenceError):
    reason = "malformed-holder"


class MissingSignature(FenceError):
    reason = "missing-signature"


class BadSignature(FenceError):
    reason = "bad-signature"


class UnknownKey(FenceError):
    reason = "unknown-key"


class ScopeRejected(FenceError):
    reason = "scope-rejected"


class InvalidIdempotencyKey(FenceError):
    reason = "invalid-idempotency-key"


class BodyTooLarge(FenceError):
    reason = "body-too-large"


class Stale(FenceError):
    """The epoch is below the task's max_seen: the sender was replaced."""

    reason = "stale-token"

    def __init__(self, epoch: int, max_seen: int):
        super().__init__(f"fence: stale fencing token: epoch {epoch} is lower than max seen {max_seen}")
        self.epoch, self.max_seen = epoch, max_seen


class InProgress(FenceError):
    reason = "idempotency-in-progress"


class PayloadMismatch(FenceError):
    reason = "idempotency-payload-mismatch"


class StoreFull(FenceError):
    reason = "store-full"


class StoreFailure(FenceError):
    reason = "store-failure"


class WriteFailed(FenceError):
    reason = "write-failed"


# reason -> (status, title); the same table as fence/validator_problem.go,
# checked against the vectors' "problems" list.
TABLE: dict[str, tuple[int, str]] = {
    "missing-token": (400, "Missing fencing token"),
    "malformed-token": (400, "Malformed fencing token"),
    "missing-task": (400, "Missing task id"),
    "malformed-task": (400, "Malformed task id"),
    "malformed-holder": (400, "Malformed holder id"),
    "missing-signature": (403, "Missing token signature"),
    "bad-signature": (403, "Bad token signature"),
    "unknown-key": (403, "Unknown signing key"),
    "scope-rejected": (403, "Task not allowed here"),
    "invalid-idempotency-key": (400, "Invalid Idempotency-Key"),
    "body-too-large": (413, "Request body too large"),
    "stale-token": (409, "Stale fencing token"),
    "idempotency-in-progress": (409, "Idempotent request in progress"),
    "idempotency-payload-mismatch": (422, "Idempotency-Key reused with a different payload"),
    "store-full": (503, "Fencing store full"),
    "store-failure": (503, "Fencing store failure"),
    "write-failed": (500, "Write failed"),
}


class Problem:
    """An RFC 9457 problem document for one rejection."""

    __slots__ = ("type", "title", "status", "detail", "max_seen_epoch")

    def __init__(self, err: BaseException):
        reason = err.reason if isinstance(err, FenceError) else StoreFailure.reason
        self.status, self.title = TABLE[reason]
        self.type = PROBLEM_BASE + reason
        self.detail = str(err) or reason
        self.max_seen_epoch = str(err.max_seen) if isinstance(err, Stale) else None

    @property
    def reason(self) -> str:
        return self.type.rsplit("/", 1)[1]

    def to_dict(self) -> dict:
        d = {"type": self.type, "title": self.title, "status": self.status, "detail": self.detail}
        if self.max_seen_epoch is not None:
            d["max_seen_epoch"] = self.max_seen_epoch
        return d

    def body(self) -> bytes:
        return json.dumps(self.to_dict(), separators=(",", ":")).encode()
