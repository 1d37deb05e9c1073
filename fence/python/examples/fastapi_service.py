"""A plain FastAPI service that keeps an append-only log of writes per task,
fenced by five added lines (marked "# fence"). It is the downstream of
`fencepost demo --downstream python`, with the routes of the Go reference
service (fence/refsvc): POST /v1/tasks/{task}/writes appends an entry,
GET /v1/log lists them, GET /v1/stats counts rejected writes.

    PYTHONPATH=fence/python/src /usr/bin/python3 fence/python/examples/fastapi_service.py --port 8080
"""

import argparse
import datetime
import hashlib

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from fencepost_fence import FenceASGI, MemStore  # fence

app = FastAPI()
log: list[dict] = []
stats = {"rejected": 0, "rejected_stale": 0}


def count(write, status, problem, outcome):  # fence: count rejections (the double-execution alarm)
    stats["rejected"] += problem is not None
    stats["rejected_stale"] += problem is not None and problem.reason == "stale-token"


app.add_middleware(FenceASGI, store=MemStore(), observer=count)  # fence


@app.post("/v1/tasks/{task}/writes")
async def append(task: str, request: Request):
    w = request.state.fence_write  # fence: the accepted epoch, holder and key
    if w.task != task:  # fence: a token for one task cannot append to another
        return JSONResponse({"error": "path and X-Fencing-Task name different tasks"}, status_code=403)
    body = await request.body()
    entry = {"seq": len(log) + 1, "task": task, "epoch": w.epoch, "holder": w.holder,
             "idempotency_key": w.idempotency_key, "body_sha256": hashlib.sha256(body).hexdigest(),
             "body_len": len(body), "at": datetime.datetime.now(datetime.timezone.utc).isoformat()}
    log.append(entry)
    return JSONResponse(entry, status_code=201)


@app.get("/v1/log")
async def get_log():
    return {"entries": log}


@app.get("/v1/stats")
async def get_stats():
    return stats


@app.get("/healthz")
async def healthz():
    return {"status": "ok"}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    uvicorn.run(app, host="127.0.0.1", port=ap.parse_args().port, log_level="warning")
