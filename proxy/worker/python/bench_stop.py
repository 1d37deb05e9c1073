"""Benchmark: stop event -> lease.lost set, against the fake control API.

    python3 proxy/worker/python/bench_stop.py [N]

Each round holds a fresh task, asks the fake to revoke it and times from just
before that request to lease.lost being set (so the figure includes the admin
request's round trip: an upper bound). Prints p50 and p99 in ms; exits 1 when
p99 > 50 ms (the issue's bound)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "proxy" / "worker" / "python"))
import fencepost_worker as fw  # noqa: E402


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    with tempfile.TemporaryDirectory() as d:
        exe = str(Path(d) / "fakectl")
        subprocess.run([shutil.which("go"), "build", "-o", exe, "./proxy/worker/internal/fakectl/serve"], cwd=ROOT, check=True)
        p = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        url = p.stdout.readline().split()[1]
        client = fw.Client(url)
        lat = []
        for i in range(n):
            try:
                with fw.task(f"b{i}", create=True, client=client) as lease:
                    t0 = time.perf_counter()
                    urllib.request.urlopen(urllib.request.Request(f"{url}/_fake/revoke?task=b{i}", method="POST")).read()
                    if not lease.lost.wait(10):
                        raise SystemExit("lease.lost not set within 10 s")
                    lat.append(time.perf_counter() - t0)
            except fw.LeaseLost:
                pass
        p.stdin.close()
        p.wait(10)
    lat.sort()
    p50, p99 = lat[len(lat) // 2] * 1000, lat[len(lat) * 99 // 100] * 1000
    print(f"python stop->lease.lost: n={n} p50={p50:.2f}ms p99={p99:.2f}ms")
    return 0 if p99 <= 50 else 1


if __name__ == "__main__":
    sys.exit(main())
