"""run.py's front door for the media server: the efficientnet-lite0 catalog entry (engine media)
started with --local-server in the media-server venv, with a generated API key, serving the real
classifier."""
from __future__ import annotations

import base64
import io
import os
import re
import signal
import subprocess
import sys
import time

import httpx
import pytest

from tests.helpers import free_port
from tests.tt_media_server.conftest import REPO_ROOT, media_python

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_run_py_serves_efficientnet_with_a_generated_key(tmp_path):
    media_python()  # skips without the venv
    skimage_data = pytest.importorskip("skimage.data")
    from PIL import Image

    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("API_KEY", "VLLM_API_KEY", "JWT_SECRET", "NO_AUTH")}
    result = subprocess.run(
        [sys.executable, "run.py", "--model", "efficientnet-lite0", "--workflow", "server", "--device", "cpu",
         "--local-server", "--service-port", str(port), "--output-dir", str(tmp_path / "run")],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, env=env)
    output = result.stdout + result.stderr
    stop = re.search(r"Stop it: kill -TERM -- -(\d+)", output)
    try:
        assert result.returncode == 0, output[-4000:]
        bearer = re.search(r"^Bearer: (\S+)$", output, re.M).group(1)
        assert bearer != "your-secret-key" and len(bearer) >= 20
        buffer = io.BytesIO()
        Image.fromarray(skimage_data.chelsea()).save(buffer, format="JPEG")
        body = {"model": "efficientnet-lite0", "image": base64.b64encode(buffer.getvalue()).decode(), "top_k": 5}
        url = f"http://127.0.0.1:{port}/v1/cnn/search-image"
        assert httpx.post(url, json=body, timeout=60).status_code == 401
        answer = httpx.post(url, json=body, headers={"Authorization": f"Bearer {bearer}"}, timeout=60)
        assert answer.status_code == 200, answer.text
        labels = [item["label"] for item in answer.json()["image_data"]]
        assert any("cat" in label for label in labels), labels
    finally:
        if stop:
            pgid = int(stop.group(1))
            try:
                os.killpg(pgid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + 20
            while _live_members(pgid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if _live_members(pgid):
                os.killpg(pgid, signal.SIGKILL)
            assert not _live_members(pgid)


def _live_members(pgid: int) -> list[int]:
    """Processes of the group that still run (zombies waiting for a reaper do not count)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry))
    return members
