"""A worker's HTTP client as a user runs it: proxy and CA bundle come only
from the environment (HTTPS_PROXY, REQUESTS_CA_BUNDLE / SSL_CERT_FILE).

Usage: client.py requests|httpx write|sse|hold URL
Prints one JSON object: status, ctype, retry (x-should-retry), body,
first_ms (first body bytes), total_ms, error.
"""
import json
import sys
import time

lib, mode, url = sys.argv[1:4]
method = "GET" if mode == "sse" else "POST"
data = {"write": b"amount=5", "hold": b"go"}.get(mode)
out = {}
t0 = time.monotonic()


def ms():
    return (time.monotonic() - t0) * 1000


def record(status, headers, chunks):
    out["status"] = status
    out["ctype"] = headers.get("content-type")
    out["retry"] = headers.get("x-should-retry")
    body = []
    for c in chunks:
        if "first_ms" not in out and c:
            out["first_ms"] = ms()
        body.append(c)
    out["body"] = b"".join(body).decode()


try:
    if lib == "requests":
        import requests

        with requests.request(method, url, data=data, stream=True, timeout=30) as r:
            record(r.status_code, r.headers, r.iter_content(chunk_size=None))
    elif lib == "httpx":
        import httpx

        with httpx.Client(timeout=30) as c, c.stream(method, url, content=data) as r:
            record(r.status_code, r.headers, r.iter_raw())
    else:
        raise SystemExit("unknown client " + lib)
except Exception as e:  # the harness reads the error as data
    out["error"] = repr(e)
out["total_ms"] = ms()
print(json.dumps(out))
