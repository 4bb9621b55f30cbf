"""A request's X-Request-ID reaches the device worker with its work and is on the worker's log lines for it.

Unit level, in the media-server venv (the worker's modules need its pydantic settings): the real admission
and dispatch hand the ids to a RunBatch / AddRequest, and the real worker loops (``_batch_loop``,
``_run_streaming``) run FAKE runners (no model: a batch runner that fails on one payload, a streaming
runner whose step answers every running request) with the worker's own log set-up, so the lines checked
are the lines a worker writes. The same through a real server: test_rerank_and_request_ids.py.
"""
from __future__ import annotations

import json
import re

from tests.tt_media_server.conftest import run_media_script

SCRIPT = r"""
import asyncio, json, logging, queue, sys
from media_server import workers
from media_server.config import load_settings
from media_server.pool.admission import Admission
from media_server.pool.dispatch import Dispatcher
from media_server.request_id import bound_request_ids
from media_server.runners.base import StreamEvent
from media_server.worker_messages import AddRequest, CancelRequest, RunBatch, Stop

workers.configure_logging(3, "DEBUG")
log = logging.getLogger("media_server.runners.fake")
out = {}


class FakeWorker:  # FAKE: the server's handle of a ready worker, recording what it was sent
    state, capacity, max_batch = "ready", 4, 4

    def __init__(self):
        self.inflight, self.sent = {}, []

    def send(self, message):
        self.sent.append(message)
        return True


async def admitted(streaming):
    # as the API does it: each request admitted while its id is the task's (the middleware sets it)
    settings = load_settings(no_auth=True, max_batch_delay_time_ms=0)
    admission, worker = Admission("m", settings), FakeWorker()
    for request_id in ("client-p", "client-q"):
        with bound_request_ids([request_id]):
            admission.admit({"x": 1}, 10.0, stream=streaming, ready=[worker])
    Dispatcher("m", admission, [worker], streaming=streaming).dispatch()
    return worker.sent

batch = asyncio.run(admitted(False))
out["run_batch"] = [type(m).__name__ for m in batch] + [list(m.http_request_ids) for m in batch]
out["add_request"] = [[type(m).__name__, m.http_request_id] for m in asyncio.run(admitted(True))]


class FakeBatchRunner:  # FAKE: upper-cases its payloads, fails on "boom"
    def run_batch(self, payloads):
        log.info("runner sees %d payload(s)", len(payloads))
        if "boom" in payloads:
            raise RuntimeError("fake fault")
        return [p.upper() for p in payloads]


class Conn:
    def __init__(self):
        self.sent = []

    def send(self, message):
        self.sent.append(message)


inbox, conn = queue.Queue(), Conn()
for message in (RunBatch([("r1", "a"), ("r2", "b")], ("client-a", "client-b")),
                RunBatch([("r3", "boom")], ("client-c,client-d",)), RunBatch([("r4", "x")]), Stop()):
    inbox.put(message)
workers._batch_loop(conn, inbox, FakeBatchRunner(), lambda seconds, size: None)
out["batch_results"] = [[[rid, str(result)] for rid, result in m.results] for m in conn.sent]


class FakeStreamRunner:  # FAKE: one step finishes every running request
    def __init__(self, inbox):
        self.active, self.inbox = [], inbox

    def add(self, request_id, payload):
        if payload == "bad":
            raise ValueError("fake bad payload")
        self.active.append(request_id)

    def cancel(self, request_id):
        self.active.remove(request_id)

    def has_work(self):
        return bool(self.active)

    def step(self):
        log.warning("fake step over %d request(s)", len(self.active))
        if "crash" in self.active:
            raise RuntimeError("fake step fault")
        events, self.active = [StreamEvent.done(r, {}) for r in self.active], []
        self.inbox.put(Stop())
        return events


class Outbox:
    def __init__(self):
        self.events = []

    def send(self, events, seconds):
        self.events += events


inbox, outbox = queue.Queue(), Outbox()
for message in (AddRequest("s1", "ok", "client-s1"), AddRequest("s2", "bad", "client-s2"),
                AddRequest("s3", "ok", "client-s3"), CancelRequest("s3")):
    inbox.put(message)
workers._run_streaming(outbox, inbox, FakeStreamRunner(inbox), lambda seconds, size: None)
out["stream_events"] = [[rid, kind] for rid, kind, _ in outbox.events]
inbox = queue.Queue()
inbox.put(AddRequest("crash", "ok", "client-x"))
try:
    workers._run_streaming(Outbox(), inbox, FakeStreamRunner(inbox), lambda seconds, size: None)
except RuntimeError as exc:
    out["step_fault"] = str(exc)
print(json.dumps(out))
"""


def _line(log: str, pattern: str) -> str:
    found = re.search(r"^.*" + pattern + r".*$", log, re.MULTILINE)
    assert found, f"no line matching {pattern!r} in:\n{log}"
    return found.group(0)


def test_worker_lines_carry_the_request_ids_of_their_work(tmp_path):
    done = run_media_script(SCRIPT, tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    out, log = json.loads(done.stdout.strip().splitlines()[-1]), done.stderr
    # the server side: each admitted request's id goes out with its work
    assert out["run_batch"] == ["RunBatch", ["client-p", "client-q"]]
    assert out["add_request"] == [["AddRequest", "client-p"], ["AddRequest", "client-q"]]
    # a batch: every line written while it runs names its requests, the failure's first line too
    assert out["batch_results"][0] == [["r1", "A"], ["r2", "B"]] and "fake fault" in out["batch_results"][1][0][1]
    assert _line(log, r"worker-3 INFO runner sees 2 payload\(s\)").endswith(" request_id=client-a,client-b")
    assert re.search(r"worker-3 DEBUG batch of 2 ran in [0-9.]+ ms request_id=client-a,client-b$", log, re.MULTILINE)
    failed = log[log.index("batch of 1 failed"):]
    assert failed.startswith("batch of 1 failed request_id=client-c,client-d\nTraceback"), failed[:300]
    assert "request_id=" not in _line(log, r"runner sees 1 payload\(s\)$")  # RunBatch without ids: none
    # a stream: its admission, a refusal, and a step over the requests still running (s3 was cancelled)
    assert out["stream_events"] == [["s2", "error"], ["s1", "done"]]
    assert _line(log, "request s2 not admitted").endswith("ValueError: fake bad payload request_id=client-s2")
    assert _line(log, "request s3 cancelled").endswith("request_id=client-s3")
    assert _line(log, "fake step over 1 request").endswith("WARNING fake step over 1 request(s) request_id=client-s1")
    assert out["step_fault"] == "fake step fault"
    assert "step with 1 running request(s) failed request_id=client-x\nTraceback" in log
