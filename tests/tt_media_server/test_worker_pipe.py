"""The server's pipe to a worker carries messages larger than the pipe's buffer under uvloop.

uvicorn runs on uvloop whenever it is installed (the media-server venv has it: requirements/media-server.txt),
and uvloop makes a file descriptor non-blocking when the loop watches it. multiprocessing's Connection
needs a blocking one: on a non-blocking pipe a 1 MB send or recv stops half-way with BlockingIOError,
which the server read as the worker's death (every request at concurrency failed). Here a real worker
process with the MOCK image runner (no model) takes a 1 MB request and answers with about 1 MB.
"""
from __future__ import annotations

import json

from tests.tt_media_server.conftest import run_media_script

SCRIPT = r"""
import asyncio, json, os, uvloop
from media_server.config import DeviceGroup, load_settings
from media_server.worker_messages import BatchResults, RunBatch
from media_server.workers import WorkerHandle


async def main():
    settings = load_settings(no_auth=True, model_runner="mock", mock_load_delay_seconds=0)
    answers, exits = asyncio.Queue(), []
    handle = WorkerHandle(0, DeviceGroup(0, (0,)), "mock", "mock-image", settings,
                          on_message=lambda w, m: isinstance(m, BatchResults) and answers.put_nowait(m),
                          on_exit=lambda w: exits.append(w.exit_code()))
    handle.start()
    await asyncio.wait_for(handle.ready_event.wait(), 60)
    out = {"state": handle.state, "blocking": os.get_blocking(handle.conn.fileno())}
    sent = handle.send(RunBatch([("r1", {"prompt": "x" * 1_000_000, "number_of_images": 8000})], ("c1",)))
    result = await asyncio.wait_for(answers.get(), 60)
    (request_id, images), = result.results
    out.update(sent=sent, request_id=request_id, images=len(images), answer_bytes=sum(map(len, images)),
               exits=exits, state_after=handle.state)
    handle.kill()
    print(json.dumps(out))

uvloop.run(main())
"""


def test_a_megabyte_each_way_reaches_the_worker_and_back_under_uvloop(tmp_path):
    done = run_media_script(SCRIPT, tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["state"] == "ready" and out["blocking"] is True
    assert out["sent"] is True and out["request_id"] == "r1" and out["images"] == 8000
    assert out["answer_bytes"] > 256 * 1024, out  # far past a pipe's 64 KiB buffer
    assert out["exits"] == [] and out["state_after"] == "ready"
