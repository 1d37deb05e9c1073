"""WSGI middleware (Flask, Django): fences every write of the wrapped app.
The accepted write is in ``environ["fencepost.write"]`` and, with the SQL
store, the connection of the write's transaction in ``environ["fencepost.tx"]``.

    app.wsgi_app = FenceWSGI(app.wsgi_app, store=MemStore())   # Flask

WSGI servers join a repeated header into one value ("a, b"); a repeated
token, signature or key is then still malformed, but a repeated task or
holder id reads as one id containing ", " (ASGI keeps repeats apart)."""

from __future__ import annotations

import io

from .problems import BodyTooLarge, FenceError, PROBLEM_CONTENT_TYPE, Problem
from .token import HEADER_REPLAYED
from .validator import Config, Response, Validator, payload_fingerprint

_REASONS = {200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request", 403: "Forbidden", 409: "Conflict",
            413: "Content Too Large", 422: "Unprocessable Content", 500: "Internal Server Error", 503: "Service Unavailable"}


def _environ_getter(environ):
    def get_all(name: str):
        v = environ.get("HTTP_" + name.upper().replace("-", "_"))
        return [] if v is None else [v]
    return get_all


class FenceWSGI:
    """``FenceWSGI(app, store=..., keys=..., scope=lambda environ, task: tenant)``;
    the remaining keyword arguments are Config fields."""

    def __init__(self, app, validator: Validator | None = None, scope=None, **config):
        self.app = app
        self.v = validator or Validator(Config(**config))
        self.scope_fn = scope

    def __call__(self, environ, start_response):
        method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
        if not self.v.is_write(method, path):
            return self.app(environ, start_response)
        # PEP 3333 strings are latin-1 spellings of the bytes on the wire.
        target = environ.get("RAW_URI") or environ.get("REQUEST_URI") or (environ.get("SCRIPT_NAME", "") + path)
        if environ.get("QUERY_STRING") and "?" not in target:
            target += "?" + environ["QUERY_STRING"]
        w = None
        try:
            w = self.v.parse(_environ_getter(environ))
            self.v.scope(w, None if self.scope_fn is None else (lambda task: self.scope_fn(environ, task)))
            if w.idempotency_key:
                body = _read_body(environ, self.v.cfg.max_body_bytes)
                w.fingerprint = payload_fingerprint(method, target, body)
            resp, outcome = self.v.cfg.store.do(w, lambda tx: self._run(environ, w, tx))
        except FenceError as e:
            p = Problem(e)
            self.v.observe(w, p.status, problem=p)
            return _send(start_response, p.status, [("Content-Type", PROBLEM_CONTENT_TYPE)], p.body())
        self.v.observe(w, resp.status, outcome=outcome)
        headers = [(k, v) for k, v in resp.headers if k.lower() != "content-length"]
        if outcome == "replayed":
            headers.append((HEADER_REPLAYED, "true"))
        return _send(start_response, resp.status, headers, resp.body)

    def _run(self, environ, w, tx) -> Response:
        env = dict(environ)
        env["fencepost.write"], env["fencepost.tx"] = w, tx
        got = {}

        def capture(status, headers, exc_info=None):
            got["status"], got["headers"] = int(status.split(" ", 1)[0]), list(headers)
            return lambda data: got.setdefault("written", []).append(data)

        it = self.app(env, capture)
        try:
            chunks = list(it)
        finally:
            if hasattr(it, "close"):
                it.close()
        body = b"".join(got.get("written", [])) + b"".join(chunks)
        return Response(got.get("status", 500), got.get("headers", []), body)


def _read_body(environ, limit: int) -> bytes:
    try:
        n = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        n = 0
    if n > limit:
        raise BodyTooLarge(f"fence: request body too large: more than {limit} bytes")
    if not n and environ.get("wsgi.input_terminated"):
        # A chunked body without Content-Length: read to the end, within the limit.
        body = environ["wsgi.input"].read(limit + 1)
        if len(body) > limit:
            raise BodyTooLarge(f"fence: request body too large: more than {limit} bytes")
    else:
        body = environ["wsgi.input"].read(n) if n else b""
    environ["wsgi.input"] = io.BytesIO(body)
    return body


def _send(start_response, status: int, headers: list, body: bytes):
    start_response(f"{status} {_REASONS.get(status, 'Status')}", headers + [("Content-Length", str(len(body)))])
    return [body]
