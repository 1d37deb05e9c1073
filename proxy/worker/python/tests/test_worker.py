from __future__ import annotations

import asyncio
import json
import threading

import pytest

import fencepost_worker as fw
from conftest import eventually


def test_block_holds_attach_and_completes(fake, client):
    with fw.task("t1", create=True, client=client) as lease:
        assert lease.epoch == 1 and lease.resumed_from is None
        assert fake.task("t1")["attached"] == 1, "the block keeps /v1/attach?task=t1 open"
        lease.checkpoint("page-1", {"page": 1})
        lease.progress()
    t = fake.task("t1")
    assert t["state"] == "completed" and json.loads(t["data"]) == {"page": 1}
    assert t["progress"] == 2
    eventually(lambda: fake.task("t1")["attached"] == 0, "attach to close after complete")
    assert fake.task("t1")["state"] == "completed"


@pytest.mark.parametrize("kind", ["revoke", "lose"])
def test_stop_sets_lost_and_next_call_raises(fake, client, kind):
    events = []
    with pytest.raises(fw.LeaseLost):
        with fw.task("t1", create=True, client=client, on_event=events.append) as lease:
            fake.admin(kind, "t1")
            assert lease.lost.wait(10), "lease.lost was not set by the stop event"
            with pytest.raises(fw.LeaseLost):
                lease.checkpoint("late", 1)
    assert fake.task("t1")["state"] == "pending", "a lost lease is neither failed nor completed"
    assert events[0]["kind"] == "state"
    assert events[-1]["kind"] == {"revoke": "revoked", "lose": "lost"}[kind] and events[-1]["stop"]


def test_exception_fails_or_gives_back_never_completes(fake, client):
    with pytest.raises(ValueError):
        with fw.task("t1", create=True, client=client):
            raise ValueError("boom")
    assert fake.task("t1")["state"] == "failed"
    assert fake.task("t1")["reason"] == "ValueError: boom"
    with pytest.raises(ValueError):
        with fw.task("t2", create=True, client=client, on_error="give_back"):
            raise ValueError("boom")
    assert fake.task("t2")["state"] == "pending"


def test_interrupt_gives_back(fake, client):
    with pytest.raises(KeyboardInterrupt):
        with fw.task("t1", create=True, client=client):
            raise KeyboardInterrupt
    assert fake.task("t1")["state"] == "pending"


def test_claim_resumes_from_checkpoint_under_higher_epoch(fake, client):
    with pytest.raises(fw.LeaseLost):
        with fw.task("t1", create=True, client=client) as lease:
            first = lease.epoch
            lease.checkpoint("page-3", {"page": 3})
            fake.admin("revoke", "t1")
            lease.lost.wait(10)
            lease.checkpoint("page-4", {"page": 4})
    with fw.claim_next(client=client) as lease:
        assert lease.task_id == "t1" and lease.epoch > first
        assert lease.resumed_from == {"page": 3}
        lease.complete({"ok": True})
    assert json.loads(fake.task("t1")["result"]) == {"ok": True}
    with pytest.raises(fw.NoTask) as ei:
        with fw.claim_next(client=client):
            pass
    assert ei.value.status == 404 and not ei.value.retryable


def test_wait_external_resumes_on_signal(fake, client):
    with fw.task("t1", create=True, client=client) as lease:
        e1 = lease.epoch

        def signal():
            eventually(lambda: fake.task("t1")["state"] == "waiting", "the task to wait")
            fake.admin("signal", "t1", b'{"approved": true}')
        threading.Thread(target=signal).start()
        assert lease.wait_external(60) == {"approved": True}
        assert lease.epoch > e1
        assert fake.task("t1")["attached"] == 1
    assert fake.task("t1")["state"] == "completed"


def test_stop_during_the_workers_own_end_is_not_a_loss(fake, client):
    fake.admin("waitlost")
    with fw.task("t1", create=True, client=client) as lease:
        fake.admin("signal", "t1", b'"ok"')
        assert lease.wait_external(60) == "ok"
        lease.checkpoint("after", 1)
    assert fake.task("t1")["state"] == "completed"


def test_reconnect_replays_missed_events(fake, client):
    with pytest.raises(fw.LeaseLost):
        with fw.task("t1", create=True, client=client) as lease:
            fake.admin("drop", pause=1)
            fake.admin("revoke", "t1")
            fake.admin("resume")
            assert lease.lost.wait(10)
    s = fake.admin("streams")
    assert s["replayed"] >= 1 and s["lastEventIds"][-1]


def test_sidecar_restart(fake, client):
    with fw.task("t1", create=True, client=client) as lease:
        n = len(fake.admin("streams")["lastEventIds"])
        fake.admin("restart", keep=1)
        eventually(lambda: len(fake.admin("streams")["lastEventIds"]) > n, "a reconnect")
        lease.checkpoint("after", 1)
        assert not lease.lost.is_set()
    with pytest.raises(fw.LeaseLost):
        with fw.task("t2", create=True, client=client) as lease:
            fake.admin("restart", keep=0)
            assert lease.lost.wait(10)


def test_typed_errors(fake, client):
    with pytest.raises(fw.TaskNotFound) as ei:
        with fw.task("nope", client=client):
            pass
    assert ei.value.code == "task_not_found" and ei.value.status == 404
    assert issubclass(fw.StaleEpoch, fw.LeaseLost) and fw.NoSession.retryable
    assert not issubclass(fw.TaskNotFound, fw.LeaseLost)


def test_one_task_mode(fake, client, monkeypatch):
    epoch = fake.admin("hold", "job-7")["epoch"]
    monkeypatch.setenv("FENCEPOST_TASK", "job-7")
    monkeypatch.setenv("FENCEPOST_CHECKPOINT", '{"step": 2}')
    monkeypatch.setenv("FENCEPOST_EPOCH", str(epoch + 1))
    with pytest.raises(fw.StaleEpoch):
        with fw.current(client=client):
            pass
    monkeypatch.setenv("FENCEPOST_EPOCH", str(epoch))
    with fw.current(client=client) as lease:
        assert lease.epoch == epoch and lease.resumed_from == {"step": 2}
    assert fake.task("job-7")["state"] == "completed"


def test_async_block_is_cancelled_on_loss(fake, client):
    async def main():
        with pytest.raises(fw.LeaseLost):
            async with fw.task("t1", create=True, client=client) as lease:
                await lease.acheckpoint("s", 1)
                await asyncio.to_thread(fake.admin, "revoke", "t1")
                await asyncio.sleep(30)  # cancelled by the stop event
                raise AssertionError("not cancelled")
        async with fw.task("t2", create=True, client=client) as lease:
            await lease.acheckpoint("s", 2)
        assert fake.task("t2")["state"] == "completed"
        await asyncio.sleep(0.05)  # a stale cancel would land here
    asyncio.run(main())


def test_worker_death_ends_the_lease_through_attach(fake, tmp_path):
    # A worker process killed while holding a task: its attach stream closes and the
    # sidecar (here the fake, per the contract) gives the task back at once.
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "w.py"
    script.write_text(
        "import sys, time\n"
        f"sys.path.insert(0, {str(Path(fw.__file__).parent.parent)!r})\n"
        "import fencepost_worker as fw\n"
        f"with fw.task('t1', create=True, client=fw.Client({fake.url!r})):\n"
        "    print('held', flush=True)\n"
        "    time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "held"
        assert fake.task("t1")["held"]
        os.kill(p.pid, signal.SIGKILL)
        eventually(lambda: not fake.task("t1")["held"], "the lease to end when the worker died")
        assert fake.task("t1")["state"] == "pending"
    finally:
        p.kill()
        p.wait()


def test_worker_death_after_a_resume_ends_the_new_epoch(fake, tmp_path):
    # The block's one attach stream ties the epoch wait_external resumed under too.
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    fake.admin("signal", "t1", b'"go"')  # answered as soon as it waits
    script = tmp_path / "w.py"
    script.write_text(
        "import sys, time\n"
        f"sys.path.insert(0, {str(Path(fw.__file__).parent.parent)!r})\n"
        "import fencepost_worker as fw\n"
        f"with fw.task('t1', create=True, client=fw.Client({fake.url!r})) as lease:\n"
        "    lease.wait_external(60)\n"
        "    print('held', lease.epoch, flush=True)\n"
        "    time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline().split()
        assert line[0] == "held" and int(line[1]) == 2
        assert fake.task("t1")["held"] and fake.task("t1")["attached"] == 1
        os.kill(p.pid, signal.SIGKILL)
        eventually(lambda: not fake.task("t1")["held"], "the resumed lease to end when the worker died")
    finally:
        p.kill()
        p.wait()
