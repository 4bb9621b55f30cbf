"""End to end through ``run.py``: the vision kind's release on CPU with the real tt-media-server.

The catalog's FAKE ``tiny-random-qwen3-vl`` (the real Qwen3-VL classes, scaled down, random weights that
run.py generates once into its cache) runs ``--workflow release --local-server`` in smoke mode:
readiness (one vision request), the vision consistency eval, benchmarks with images per request, the
API tests with image_url cases (bad images, refused URLs), stress_tests, and the report with its
vision section and a PASS verdict. Random weights: only shapes, token counts and plumbing are judged.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import free_port, port_free

REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_tiny_vision_release_on_cpu_passes_with_its_report_section(tmp_path):
    port = free_port()
    out_dir = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("API_KEY", "VLLM_API_KEY", "JWT_SECRET")}
    done = subprocess.run([sys.executable, str(REPO / "run.py"), "--model", "tiny-random-qwen3-vl", "--device", "cpu",
                           "--workflow", "release", "--local-server", "--service-port", str(port),
                           "--workflow-args", "mode=smoke", "--output-dir", str(out_dir)],
                          capture_output=True, text=True, timeout=1500, cwd=REPO, env=env)
    tail = (done.stdout + done.stderr)[-4000:]
    assert done.returncode == 0, tail

    manifest = json.loads((out_dir / "manifest.json").read_text())
    steps = {s["name"]: s for s in manifest["steps"]}
    assert "one vision request" in steps["wait_ready"]["detail"]
    assert [steps[n]["status"] for n in ("evals", "benchmarks", "tests", "stress_tests", "reports")] == ["passed"] * 5

    report = json.loads((out_dir / "reports" / "report.json").read_text())
    assert report["verdict"]["result"] == "PASS", report["verdict"]
    # benchmarks: images per request and the image tokens the model read per image, from usage
    (point,) = [row for row in report["media"] if row["ran"]]
    assert point["kind"] == "vision" and point["completed"] == point["num_requests"] > 0
    figures = point["figures"]
    assert figures["images_per_request"] >= 1 and figures["prompt_tokens_per_image"] > 0
    assert figures["prompt_tokens_per_request"] > figures["images_per_request"] * figures["prompt_tokens_per_image"]
    # tests: the image_url cases ran and passed, the refused URLs among them
    (tests,) = report["tests"]["items"]
    cases = {row[0]: row[1] for table in report["tests"]["tables"] if table["kind"] == "cases" for row in table["rows"]}
    assert tests["passed"] is True and {"vision/image_tokens_counted", "vision/stream_with_image",
                                        "vision/loopback_url_400"} <= set(cases)
    assert set(cases.values()) == {"PASSED"}, cases
    evals = {e["task"]: e for e in report["evals"]}
    assert evals["vision_consistency"]["value"] == 1.0 and evals["vision_consistency"]["samples"] == 5
    markdown = (out_dir / "reports" / "report.md").read_text()
    section = markdown.split("## Media benchmarks: Vision chat (image_url parts)", 1)[1].split("\n## ", 1)[0]
    assert "| images/request | prompt tokens/image | prompt tokens/request | images/s |" in section
    assert f"| {point['key']} |" in section and "VERDICT: PASS" in markdown
    assert port_free(port), "the media server still listens after run.py exited"
