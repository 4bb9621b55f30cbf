"""run.py end to end with a requirements document against the delay-programmed stub (a named fake: TTFT 50 ms,
10 ms per token), as a customer runs it against their own server (--server-url): the shipped example sets one
must to fail (tpot-fast: 5 ms per token) and the run ends FAIL, exit 3, naming it; the report opens with the
"Requirements" table and report.json carries it. The same measurements judged again (a reports rebuild of the
run directory) with that must relaxed PASS (exit 0), and with a must set at its measured value are undecided:
INCONCLUSIVE, exit 4, saying what more sampling would take."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from contracts import REPO_ROOT

MODEL = "SmolLM2-135M-Instruct"
EXAMPLE = REPO_ROOT / "examples" / "requirements" / "smollm2_stub.json"


def _run(*args: str, history=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, TT_HISTORY_URL=f"sqlite:///{history}") if history else None  # a private run history
    return subprocess.run([sys.executable, str(REPO_ROOT / "run.py"), "--no-auth", *args], capture_output=True,
                          text=True, timeout=600, cwd=REPO_ROOT, env=env)


def _rebuild(out, change) -> tuple[subprocess.CompletedProcess, dict]:
    path = out / "requirements.json"
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
    done = _run("--workflow", "reports", "--output-dir", str(out), history=out.parent / "history.db")
    return done, json.loads((out / "reports" / "report.json").read_text())


def _target(doc: dict, rid: str) -> dict:
    return next(t for p in doc["benchmarks"] for t in p["targets"] if t.get("id") == rid)


def test_a_requirements_document_against_a_server_url(tmp_path, fake_server_process) -> None:
    stub = fake_server_process("benchmarking.stub_server", "--ttft-ms", "50", "--itl-ms", "10", "--model", MODEL)
    out = tmp_path / "run"
    done = _run("--requirements", str(EXAMPLE), "--workflow", "benchmarks", "--server-url", stub.url,
                "--workflow-args", "mode=smoke", "--output-dir", str(out), history=tmp_path / "history.db")
    assert done.returncode == 3, done.stdout[-4000:] + done.stderr[-2000:]
    report = json.loads((out / "reports" / "report.json").read_text())
    rows = {r["id"]: r for r in report["requirements"]["rows"]}
    assert rows["tpot-fast"]["status"] == "not met" and rows["tpot-fast"]["ci95"][0] > 5
    assert rows["ttft-interactive"]["status"] == "met" and rows["agent-sessions"]["shown_value"] == "2/2 sessions"
    assert [b["item"] for b in report["verdict"]["blockers"]] == ["tpot-fast"]
    markdown = (out / "reports" / "report.md").read_text()
    assert markdown.index("## Requirements") < markdown.index("## Verdict")
    assert "| tpot-fast | must | tpot_ms | not met |" in markdown

    relaxed, report = _rebuild(out, lambda d: _target(d, "tpot-fast").update(max=500))
    assert relaxed.returncode == 0 and report["verdict"]["result"] == "PASS", relaxed.stdout[-3000:]

    measured = rows["ttft-interactive"]["value"]
    at_value, report = _rebuild(out, lambda d: _target(d, "ttft-interactive").update(max=measured))
    assert at_value.returncode == 4 and report["verdict"]["result"] == "INCONCLUSIVE", at_value.stdout[-3000:]
    row = next(r for r in report["requirements"]["rows"] if r["id"] == "ttft-interactive")
    assert row["status"] == "undecided" and "no amount of sampling decides it" in row["detail"]
