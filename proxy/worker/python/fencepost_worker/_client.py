"""Calls of the sidecar's control API over http.client (never through a proxy)."""

from __future__ import annotations

import http.client
import json
import os
import urllib.parse
from typing import Any

from ._base import ControlError
from ._errors import KINDS

DEFAULT_CONTROL_URL = "http://127.0.0.1:7481"
CALL_TIMEOUT = 30.0


def problem_error(status: int, body: bytes) -> ControlError:
    """The typed error of a refusal."""
    try:
        p = json.loads(body)
        code = p["code"]
    except (ValueError, KeyError, TypeError):
        p, code = {"detail": body[:200].decode("utf-8", "replace").strip()}, "unknown"
    cls = KINDS.get(code)
    kw = dict(status=status, title=p.get("title", ""), epoch=p.get("epoch", 0), tasks=p.get("tasks"))
    if cls is None:
        return ControlError(p.get("detail", ""), code=code, retryable=status >= 500, **kw)
    return cls(p.get("detail", ""), **kw)


class Client:
    """A client of one sidecar's control API, e.g. Client("http://127.0.0.1:7481")."""

    def __init__(self, base_url: str | None = None):
        base_url = base_url or os.environ.get("FENCEPOST_CONTROL_URL") or DEFAULT_CONTROL_URL
        u = urllib.parse.urlsplit(base_url)
        if u.scheme != "http" or not u.hostname:
            raise ValueError(f"FENCEPOST_CONTROL_URL: must be http://host:port, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.host, self.port = u.hostname, u.port or 80

    def connect(self, timeout: float | None = CALL_TIMEOUT) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def call(self, path: str, body: dict[str, Any] | None = None) -> Any:
        """POST body (GET when None) to path; the decoded reply, or a typed ControlError."""
        conn = self.connect()
        try:
            if body is None:
                conn.request("GET", path)
            else:
                data = json.dumps({k: v for k, v in body.items() if v is not None}).encode()
                conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        if resp.status // 100 != 2:
            raise problem_error(resp.status, raw)
        return json.loads(raw) if raw.strip() else None

    def acquire(self, task_id: str, create: bool = False) -> dict:
        return self.call("/v1/acquire", {"taskId": task_id, "create": create})

    def claim(self) -> dict:
        return self.call("/v1/claim", {})

    def leases(self, task_id: str = "") -> list[dict]:
        q = "?taskId=" + urllib.parse.quote(task_id) if task_id else ""
        return self.call("/v1/lease" + q)["leases"]
