"""FencedTask with a real Celery worker (celery.contrib.testing.worker, solo pool)
on the in-memory broker, against the fake control API."""

from __future__ import annotations

import json
import threading
import uuid

import pytest

celery = pytest.importorskip("celery", reason="Celery missing: apt-get install python3-celery")
from celery.contrib.testing.worker import start_worker  # noqa: E402

import fencepost_worker as fw  # noqa: E402
from fencepost_worker.celery import FencedTask, current_lease  # noqa: E402


@pytest.fixture(scope="module")
def celery_fake(fake_bin):
    # One worker and one fake for the module: kombu's memory transport is shared
    # by every app in the process, so a second worker would take the first's messages.
    import subprocess
    from conftest import Fake
    p = subprocess.Popen([fake_bin], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    yield Fake(p.stdout.readline().split()[1])
    p.stdin.close()
    p.wait(10)


@pytest.fixture
def fake(celery_fake):
    return celery_fake


@pytest.fixture(scope="module")
def worker_app(celery_fake):
    fake = celery_fake
    app = celery.Celery("t", broker="memory://", backend="cache+memory://")
    app.conf.task_acks_late = True

    class Base(FencedTask):
        abstract = True
        fencepost_client = fw.Client(fake.url)
        fencepost_retry_delay = 0.05
    app.Base = Base
    app.runs = []
    app.gate = threading.Event()
    app.started = threading.Event()

    @app.task(base=Base, bind=True, max_retries=20)
    def pages(self, n, block=False):
        lease = current_lease()
        start = (lease.resumed_from or {}).get("page", 0)
        app.runs.append((self.request.id, lease.epoch, start))
        for page in range(start, n):
            lease.checkpoint(f"page-{page}", {"page": page + 1})
            if block and page == 0 and len(app.runs) == 1:
                app.started.set()
                assert app.gate.wait(10)
        return {"pages": n}
    app.pages = pages
    app.done = []  # (task id, state) of every delivery handled

    def postrun(task_id=None, state=None, **_):
        app.done.append((task_id, state))
    celery.signals.task_postrun.connect(postrun, weak=False)
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        yield app
    celery.signals.task_postrun.disconnect(postrun)


@pytest.fixture
def app(worker_app):
    worker_app.runs.clear()
    worker_app.done.clear()
    worker_app.gate.clear()
    worker_app.started.clear()
    return worker_app


def test_task_runs_under_a_lease_on_its_id(app, fake):
    tid = str(uuid.uuid4())
    assert app.pages.apply_async((3,), task_id=tid).get(timeout=20) == {"pages": 3}
    t = fake.task(tid)
    assert t["state"] == "completed" and json.loads(t["result"]) == {"pages": 3}


def test_a_second_delivery_of_a_done_task_never_runs_the_body(app, fake):
    tid = str(uuid.uuid4())
    app.pages.apply_async((2,), task_id=tid).get(timeout=20)
    r = app.pages.apply_async((2,), task_id=tid)  # the broker redelivers the same id
    from conftest import eventually
    eventually(lambda: len([d for d in app.done if d[0] == tid]) == 2, "the redelivery to be handled")
    assert [x[0] for x in app.runs] == [tid], "the body ran once"
    assert app.done[-1] == (tid, "IGNORED")
    assert r.state == "SUCCESS", "the ignored delivery left the first result as it was"
    assert fake.task(tid)["state"] == "completed"


def test_a_delivery_waits_while_another_owner_holds_the_lease(app, fake):
    tid = str(uuid.uuid4())
    fake.admin("hold", tid)  # another owner holds it
    r = app.pages.apply_async((2,), task_id=tid)
    from conftest import eventually
    eventually(lambda: r.state == "RETRY", "the delivery to retry")
    assert app.runs == []
    fake.admin("revoke", tid)  # the other owner's lease ends
    assert r.get(timeout=20) == {"pages": 2}
    assert len(app.runs) == 1 and app.runs[0][1] == 2, "run under the next epoch"


def test_a_lost_lease_retries_and_resumes_from_the_checkpoint(app, fake):
    tid = str(uuid.uuid4())
    r = app.pages.apply_async((3,), {"block": True}, task_id=tid)
    assert app.started.wait(20)
    fake.admin("revoke", tid)
    from conftest import eventually
    eventually(lambda: fake.task(tid)["state"] == "pending", "the revoke")
    app.gate.set()  # the body's next checkpoint raises LeaseLost: Celery retries
    assert r.get(timeout=20) == {"pages": 3}
    (_, e1, s1), (_, e2, s2) = app.runs
    assert (s1, s2) == (0, 1), "the retry resumed from the checkpoint"
    assert e2 > e1
    assert fake.task(tid)["state"] == "completed"
