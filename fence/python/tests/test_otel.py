"""The verdict on the current OpenTelemetry span. Debian ships no
python3-opentelemetry-api, so the tests install a stand-in ``opentelemetry``
package (the API's two names the validator uses: ``trace.get_current_span``
and a span's ``is_recording``/``set_attributes``) on sys.path and reload the
hook; without it the hook must do nothing."""

from __future__ import annotations

import asyncio
import importlib
import sys
import textwrap

import pytest

from fencepost_fence import FenceASGI, MemStore, Validator, Config, _otel

FAKE_API = textwrap.dedent('''
    class _Span:
        def __init__(self, recording):
            self.recording, self.attributes = recording, {}
        def is_recording(self):
            return self.recording
        def set_attributes(self, attrs):
            self.attributes.update(attrs)

    current = _Span(True)

    def get_current_span(context=None):
        return current
''')


@pytest.fixture
def fake_otel(tmp_path, monkeypatch):
    pkg = tmp_path / "opentelemetry"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "trace.py").write_text(FAKE_API)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [n for n in sys.modules if n == "opentelemetry" or n.startswith("opentelemetry.")]:
        monkeypatch.delitem(sys.modules, name)
    importlib.reload(_otel)
    yield importlib.import_module("opentelemetry.trace")
    for name in [n for n in sys.modules if n == "opentelemetry" or n.startswith("opentelemetry.")]:
        del sys.modules[name]
    monkeypatch.undo()
    importlib.reload(_otel)


def _write(mw, epoch, key=""):
    headers = [(b"x-fencing-token", str(epoch).encode()), (b"x-fencing-task", b"t1")]
    if key:
        headers.append((b"idempotency-key", key.encode()))
    scope = {"type": "http", "method": "POST", "path": "/w", "raw_path": b"/w", "query_string": b"", "headers": headers}
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"x", "more_body": False}

    async def send(m):
        sent.append(m)

    asyncio.run(mw(scope, receive, send))
    return sent[0]["status"]


async def _ok(scope, receive, send):
    await send({"type": "http.response.start", "status": 201, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def test_verdicts_land_on_the_current_span(fake_otel):
    assert _otel.available()
    mw = FenceASGI(_ok, Validator(Config(store=MemStore())))
    assert _write(mw, 5, "k1") == 201
    attrs = fake_otel.current.attributes
    assert attrs == {"fencepost.fence.verdict": "accepted", "fencepost.task.id": "t1", "fencepost.lease.epoch": "5",
                     "fencepost.idempotency_key": "k1"}
    fake_otel.current.attributes.clear()
    assert _write(mw, 5, "k1") == 201
    assert fake_otel.current.attributes["fencepost.fence.verdict"] == "replayed"
    fake_otel.current.attributes.clear()
    assert _write(mw, 4) == 409
    assert fake_otel.current.attributes["fencepost.fence.verdict"] == "stale-token"
    assert fake_otel.current.attributes["fencepost.fence.max_seen_epoch"] == "5"


def test_a_span_that_does_not_record_is_left_alone(fake_otel):
    fake_otel.current = fake_otel._Span(False)
    mw = FenceASGI(_ok, Validator(Config(store=MemStore())))
    assert _write(mw, 5) == 201
    assert fake_otel.current.attributes == {}


def test_without_opentelemetry_nothing_happens():
    if importlib.util.find_spec("opentelemetry") is not None:
        pytest.skip("opentelemetry-api is installed here")
    assert not _otel.available()
    mw = FenceASGI(_ok, Validator(Config(store=MemStore())))
    assert _write(mw, 5) == 201
