"""Benchmark of one check (parse + Ed25519 verify + memory store), the
counterpart of Go's BenchmarkValidatorCheckSigned:

    /usr/bin/python3 fence/python/bench_check.py
"""

from __future__ import annotations

import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "src"))

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402

from fencepost_fence import Config, MemStore, Response, StaticKeys, Validator, sign  # noqa: E402
from fencepost_fence.sign import raw_public  # noqa: E402


def bench(name: str, signed: bool, n: int = 20000) -> None:
    priv = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    keys = StaticKeys.of(raw_public(priv.public_key())) if signed else None
    v = Validator(Config(store=MemStore(), keys=keys))
    headers = {"x-fencing-token": [b"7"], "x-fencing-task": [b"task-1"], "x-fencing-holder": [b"w"]}
    if signed:
        headers["x-fencing-signature"] = [sign(priv, b"task-1", 7, b"w").encode()]
    get_all = lambda name: headers.get(name.lower(), [])  # noqa: E731
    resp = Response(200)
    fn = lambda tx: resp  # noqa: E731
    store = v.cfg.store
    for _ in range(1000):
        store.do(v.parse(get_all), fn)
    t0 = time.perf_counter_ns()
    for _ in range(n):
        store.do(v.parse(get_all), fn)
    ns = (time.perf_counter_ns() - t0) / n
    print(f"{name}\t{n}\t{ns:.0f} ns/check")


if __name__ == "__main__":
    bench("python check (memory store, unsigned)", False)
    bench("python check (memory store, Ed25519 signature)", True)
