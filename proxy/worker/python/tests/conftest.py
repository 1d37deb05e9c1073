"""Tests run against the fake control API (proxy/worker/internal/fakectl), which
implements the agreed attach contract; it is built once per session with go."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT / "proxy" / "worker" / "python"))


class Fake:
    def __init__(self, url: str):
        self.url = url

    def admin(self, op: str, task: str = "", data: bytes = b"", **q) -> dict | None:
        qs = "&".join([f"task={task}"] + [f"{k}={v}" for k, v in q.items()])
        req = urllib.request.Request(f"{self.url}/_fake/{op}?{qs}", data=data or None,
                                     method="GET" if op in ("task", "streams") else "POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            body = r.read()
        return json.loads(body) if body.strip() else None

    def task(self, task: str) -> dict:
        return self.admin("task", task)


def eventually(cond, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


@pytest.fixture(scope="session")
def fake_bin(tmp_path_factory) -> str:
    go = shutil.which("go")
    if go is None:
        pytest.skip("the go tool is not on PATH: the fake control API is built with it")
    out = tmp_path_factory.mktemp("fakectl") / "fakectl"
    subprocess.run([go, "build", "-o", str(out), "./proxy/worker/internal/fakectl/serve"], cwd=ROOT, check=True)
    return str(out)


@pytest.fixture
def fake(fake_bin) -> Fake:
    p = subprocess.Popen([fake_bin], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline().split()
    assert line and line[0] == "listening", line
    yield Fake(line[1])
    p.stdin.close()
    p.wait(10)


@pytest.fixture
def client(fake):
    import fencepost_worker as fw
    return fw.Client(fake.url)
