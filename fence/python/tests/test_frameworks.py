"""The vectors through real frameworks: Flask (WSGI, its test client) and
FastAPI (ASGI, Starlette's TestClient), each a plain app with the fence
added, answering each step's canned response."""

from __future__ import annotations

import pytest

from conftest import VECTORS, b
from harness import check, validator, wsgi_unsafe
from fencepost_fence import FenceASGI, FenceWSGI, MemStore

SEQS = [s for s in VECTORS["requests"] + VECTORS["sequences"]
        if not s.get("raw_only") and not s.get("memory_only") and not wsgi_unsafe(s)]


def _headers(step):
    return [(k, b(v).decode("latin-1")) for k, v in step["headers"]]


@pytest.mark.parametrize("seq", SEQS, ids=[s["name"] for s in SEQS])
def test_flask(seq):
    flask = pytest.importorskip("flask", reason="python3-flask is not installed")
    app = flask.Flask(__name__)
    cur = {}

    @app.route("/<path:p>", methods=["GET", "POST", "PUT"])
    def handler(p):
        step = cur["step"]
        cur["ran"] = True
        h = step["handler"]
        return flask.Response(b(h["body"]), status=h["status"], headers=[(k, b(v).decode("latin-1")) for k, v in h["headers"]])

    app.wsgi_app = FenceWSGI(app.wsgi_app, validator(seq, MemStore(max_tasks=seq["config"].get("max_tasks") or 100_000)))
    client = app.test_client()
    for step in seq["steps"]:
        cur.update(step=step, ran=False)
        r = client.open(step["target"], method=step["method"], headers=_headers(step), data=b(step["body"]))
        hs = {}
        for k, v in r.headers.items():
            hs.setdefault(k.lower(), []).append(v)
        check(step, r.status_code, hs, r.get_data(), cur["ran"], f"flask {seq['name']!r}")


def _non_ascii(seq):
    return any(max(map(ord, v), default=0) > 0x7F for st in seq["steps"] for _, v in st["headers"])


@pytest.mark.parametrize("seq", SEQS, ids=[s["name"] for s in SEQS])
def test_fastapi(seq):
    if _non_ascii(seq):
        pytest.skip("Starlette's TestClient re-encodes non-ASCII header bytes as UTF-8 (covered by the raw ASGI run)")
    fastapi = pytest.importorskip("fastapi", reason="python3-fastapi is not installed")
    pytest.importorskip("httpx", reason="python3-httpx is not installed (Starlette's TestClient needs it)")
    from fastapi.testclient import TestClient
    from starlette.responses import Response

    app = fastapi.FastAPI()
    cur = {}

    @app.api_route("/{p:path}", methods=["GET", "POST", "PUT"])
    async def handler(p: str):
        step = cur["step"]
        cur["ran"] = True
        h = step["handler"]
        resp = Response(b(h["body"]), status_code=h["status"])
        for k, v in h["headers"]:
            resp.headers.append(k, b(v).decode("latin-1"))
        return resp

    app.add_middleware(FenceASGI, validator=validator(seq, MemStore(max_tasks=seq["config"].get("max_tasks") or 100_000)))
    client = TestClient(app)
    for step in seq["steps"]:
        cur.update(step=step, ran=False)
        r = client.request(step["method"], step["target"], headers=[(k.encode(), b(v)) for k, v in step["headers"]],
                           content=b(step["body"]))
        hs = {}
        for k, v in r.headers.multi_items():
            hs.setdefault(k.lower(), []).append(v)
        check(step, r.status_code, hs, r.content, cur["ran"], f"fastapi {seq['name']!r}")
