"""Plays a vector sequence through the ASGI or WSGI middleware, called
in-process with the header bytes exactly as the vectors give them, and
compares every answer with the one the Go middleware gave."""

from __future__ import annotations

import asyncio
import io
import json

from conftest import VECTORS, b
from fencepost_fence import Config, FenceASGI, FenceWSGI, StaticKeys, Validator, parse_keys

KEYS = parse_keys(VECTORS["key_document"])


def validator(seq, store) -> Validator:
    c = seq["config"]
    kw = {"store": store}
    if c.get("max_body_bytes"):
        kw["max_body_bytes"] = c["max_body_bytes"]
    if c["signatures"] in ("required", "allow_unsigned"):
        kw["keys"] = KEYS
        kw["allow_unsigned"] = c["signatures"] == "allow_unsigned"
    return Validator(Config(**kw))


def check(step, status, headers, body, ran, where):
    """headers: dict lower-case name -> list of values."""
    e = step["expect"]
    msg = f"{where}: {step['method']} {step['target']} {step['headers']!r}: got {status} {body[:300]!r}"
    assert status == e["status"], msg
    if e["outcome"] == "rejected":
        assert headers.get("content-type") == ["application/problem+json"], msg
        p = json.loads(body)
        for k in ("type", "title", "status"):
            assert p[k] == e["problem"][k], msg
        assert p.get("max_seen_epoch") == e["problem"].get("max_seen_epoch"), msg
        assert not ran, msg
        return
    assert body == b(e["body"]), msg
    assert ran == (e["outcome"] == "executed"), msg
    for name, want in e["headers"].items():
        got = ", ".join(headers.get(name.lower(), []))
        assert got == want, f"{msg}: header {name}"


class _App:
    """The fenced handler: answers the current step's canned response and,
    for a step with During requests, sends those while it runs."""

    def __init__(self):
        self.current, self.ran, self.nested = None, {}, None


def run_asgi(seq, store, where="asgi"):
    mw_holder = {}
    app = _App()

    async def inner(scope, receive, send):
        step = app.current
        app.ran[id(step)] = True
        body = b""
        while True:
            m = await receive()
            body += m.get("body", b"")
            if not m.get("more_body"):
                break
        for d in step.get("during", []):
            app.current = d
            await play(d)
        app.current = step
        h = step["handler"]
        await send({"type": "http.response.start", "status": h["status"],
                    "headers": [(k.lower().encode(), b(v)) for k, v in h["headers"]]})
        await send({"type": "http.response.body", "body": b(h["body"])})

    mw_holder["mw"] = FenceASGI(inner, validator(seq, store))

    async def play(step):
        app.current = step
        path, _, query = step["target"].partition("?")
        scope = {"type": "http", "method": step["method"], "path": path, "raw_path": path.encode(),
                 "query_string": query.encode(), "headers": [(k.lower().encode(), b(v)) for k, v in step["headers"]]}
        sent = []
        done = False

        async def receive():
            nonlocal done
            if done:
                return {"type": "http.disconnect"}
            done = True
            return {"type": "http.request", "body": b(step["body"]), "more_body": False}

        async def send(m):
            sent.append(m)

        await mw_holder["mw"](scope, receive, send)
        start = sent[0]
        hdrs = {}
        for k, v in start["headers"]:
            hdrs.setdefault(k.decode().lower(), []).append(v.decode("latin-1"))
        check(step, start["status"], hdrs, b"".join(m.get("body", b"") for m in sent[1:]), app.ran.get(id(step), False),
              f"{where} {seq['name']!r}")

    async def main():
        for step in seq["steps"]:
            await play(step)
    asyncio.run(main())


def wsgi_unsafe(seq) -> bool:
    """A WSGI server joins repeated headers; repeated task/holder ids then
    read as one id (see fencepost_fence.wsgi)."""
    for st in seq["steps"]:
        names = [k.lower() for k, _ in st["headers"]]
        if names.count("x-fencing-task") > 1 or names.count("x-fencing-holder") > 1:
            return True
    return False


def run_wsgi(seq, store, where="wsgi"):
    app = _App()

    def inner(environ, start_response):
        step = app.current
        app.ran[id(step)] = True
        environ["wsgi.input"].read()
        for d in step.get("during", []):
            play(d)
        app.current = step
        h = step["handler"]
        start_response(f"{h['status']} X", [(k, b(v).decode("latin-1")) for k, v in h["headers"]])
        return [b(h["body"])]

    mw = FenceWSGI(inner, validator(seq, store))

    def play(step):
        app.current = step
        path, _, query = step["target"].partition("?")
        body = b(step["body"])
        env = {"REQUEST_METHOD": step["method"], "PATH_INFO": path, "QUERY_STRING": query, "REQUEST_URI": step["target"],
               "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body)}
        for k, v in step["headers"]:
            key = "HTTP_" + k.upper().replace("-", "_")
            env[key] = env[key] + ", " + v if key in env else v
        got = {}
        out = b"".join(mw(env, lambda s, h, e=None: got.update(status=int(s.split()[0]), headers=h)))
        hdrs = {}
        for k, v in got["headers"]:
            hdrs.setdefault(k.lower(), []).append(v)
        check(step, got["status"], hdrs, out, app.ran.get(id(step), False), f"{where} {seq['name']!r}")

    for step in seq["steps"]:
        play(step)


__all__ = ["run_asgi", "run_wsgi", "wsgi_unsafe", "StaticKeys", "KEYS"]
