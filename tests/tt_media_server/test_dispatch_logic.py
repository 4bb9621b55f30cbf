"""How the dispatcher hands queued requests of a batch runner to its workers.

Unit level, in the media-server venv (the dispatcher's modules need its pydantic settings): the real
Admission and Dispatcher with FAKE worker handles (no process: each records the RunBatch it was sent).
What is checked: queued requests are shared evenly among the idle workers instead of the first idle
worker taking up to its whole batch while the others wait (measured on two one-thread embedding workers:
benchmarks/embeddings_served_vs_direct.py), and a worker still takes up to its batch when it is the only
idle one.
"""
from __future__ import annotations

import json

from tests.tt_media_server.conftest import run_media_script

SCRIPT = r"""
import asyncio, json
from media_server.config import load_settings
from media_server.pool.admission import Admission
from media_server.pool.dispatch import Dispatcher


class FakeWorker:  # FAKE: the server's handle of a ready worker, recording the batches it was sent
    capacity, max_batch = 1, 4

    def __init__(self, state="ready"):
        self.state, self.inflight, self.sent = state, {}, []

    def send(self, message):
        self.sent.append(len(message.items))
        return True


async def sent(queued, states):
    settings = load_settings(no_auth=True, max_batch_delay_time_ms=0, max_queue_size=64)
    admission, workers = Admission("m", settings), [FakeWorker(s) for s in states]
    for _ in range(queued):
        admission.admit({"x": 1}, 10.0, stream=False, ready=workers)
    Dispatcher("m", admission, workers, streaming=False).dispatch()
    return [w.sent for w in workers] + [len(admission.queue)]

out = {}
out["two_idle_two_queued"] = asyncio.run(sent(2, ["ready", "ready"]))
out["two_idle_seven_queued"] = asyncio.run(sent(7, ["ready", "ready"]))
out["two_idle_eleven_queued"] = asyncio.run(sent(11, ["ready", "ready"]))
out["one_idle_three_queued"] = asyncio.run(sent(3, ["ready", "starting"]))
print(json.dumps(out))
"""


def test_queued_requests_are_shared_evenly_among_idle_workers(tmp_path):
    done = run_media_script(SCRIPT, tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    # [batch sizes sent to worker 0], [... to worker 1], requests left queued
    assert out["two_idle_two_queued"] == [[1], [1], 0]  # one each, not both to the first
    assert out["two_idle_seven_queued"] == [[4], [3], 0]  # ceil(7 / 2) = 4 each at most, the rest to the second
    assert out["two_idle_eleven_queued"] == [[4], [4], 3]  # each worker's batch is capped at its max_batch
    assert out["one_idle_three_queued"] == [[3], [], 0]  # a worker still starting takes nothing
