"""The SDK's error base classes; _errors.py (generated) adds one class per code."""

from __future__ import annotations


class FencepostError(Exception):
    """Every error this SDK raises."""


class ControlError(FencepostError):
    """A control API refusal (problem+json). Subclasses, one per code, live in _errors.py."""

    code = "unknown"
    status = 0
    retryable = False

    def __init__(self, detail: str = "", *, status: int = 0, title: str = "", code: str | None = None,
                 epoch: int = 0, tasks: list[str] | None = None, retryable: bool | None = None):
        self.detail = detail
        self.title = title
        if code is not None:
            self.code = code
        if status:
            self.status = status
        if retryable is not None:
            self.retryable = retryable
        self.epoch = epoch
        self.tasks = tasks or []
        super().__init__(detail)  # args stay (detail,), so the error pickles and unpickles as itself

    def __str__(self) -> str:
        s = f"fencepost: {self.code}"
        if self.status:
            s += f" ({self.status})"
        if self.detail or self.title:
            s += f": {self.detail or self.title}"
        return s


class LeaseLost(ControlError):
    """The lease (this epoch) is over: stop the work. Raised for a stop event on the
    attach stream and for every refusal whose code means the lease is gone."""

    code = "lease_lost"
