"""ASGI middleware (Starlette, FastAPI): fences every write of the wrapped
app. The app's response is buffered so it commits with the fencing state
and can be recorded for replay; the accepted write is in
``request.state.fence_write`` and, with the SQL store, the connection of
the write's transaction in ``request.state.fence_tx``.

    app.add_middleware(FenceASGI, store=MemStore())   # FastAPI / Starlette
"""

from __future__ import annotations

from .problems import BodyTooLarge, FenceError, PROBLEM_CONTENT_TYPE, Problem
from .token import HEADER_REPLAYED
from .validator import Config, Response, Validator, header_getter, payload_fingerprint


class FenceASGI:
    """``FenceASGI(app, store=..., keys=..., scope=lambda scope, task: tenant)``;
    the remaining keyword arguments are Config fields."""

    def __init__(self, app, validator: Validator | None = None, scope=None, **config):
        self.app = app
        self.v = validator or Validator(Config(**config))
        self.scope_fn = scope

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not self.v.is_write(scope["method"], scope["path"]):
            return await self.app(scope, receive, send)
        target = scope.get("raw_path") or scope["path"].encode("utf-8")
        if scope.get("query_string"):
            target += b"?" + scope["query_string"]
        w = None
        try:
            w = self.v.parse(header_getter(scope["headers"]))
            self.v.scope(w, None if self.scope_fn is None else (lambda task: self.scope_fn(scope, task)))
            if w.idempotency_key:
                body = await _read_body(receive, self.v.cfg.max_body_bytes)
                w.fingerprint = payload_fingerprint(scope["method"], target, body)
                receive = _replay_body(body)
            resp, outcome = await self.v.cfg.store.do_async(w, lambda tx: self._run(scope, receive, w, tx))
        except FenceError as e:
            p = Problem(e)
            self.v.observe(w, p.status, problem=p)
            return await _send(send, p.status, [(b"content-type", PROBLEM_CONTENT_TYPE.encode())], p.body())
        self.v.observe(w, resp.status, outcome=outcome)
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in resp.headers if k.lower() != "content-length"]
        if outcome == "replayed":
            headers.append((HEADER_REPLAYED.lower().encode(), b"true"))
        await _send(send, resp.status, headers, resp.body)

    async def _run(self, scope, receive, w, tx) -> Response:
        state = dict(scope.get("state") or {})
        state.update(fence_write=w, fence_tx=tx)
        status, headers, chunks = 500, [], []

        async def capture(msg):
            nonlocal status, headers
            if msg["type"] == "http.response.start":
                status = msg["status"]
                headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in msg.get("headers", [])]
            elif msg["type"] == "http.response.body":
                chunks.append(msg.get("body", b""))

        await self.app(dict(scope, state=state), receive, capture)
        return Response(status, headers, b"".join(chunks))


async def _read_body(receive, limit: int) -> bytes:
    buf = bytearray()
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            raise FenceError("fence: store failure: request ended before the write")
        buf += msg.get("body", b"")
        if len(buf) > limit:
            raise BodyTooLarge(f"fence: request body too large: more than {limit} bytes")
        if not msg.get("more_body"):
            return bytes(buf)


def _replay_body(body: bytes):
    sent = False

    async def receive():
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}
    return receive


async def _send(send, status: int, headers: list, body: bytes):
    headers = headers + [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
