"""``run.py --history``: three releases recorded into a private history store by the reports step, then the
history page and document written from it, and the page rendered by headless Chromium.

The releases are the fixture run directory (the real formats) made into five runs: three of one build a
little apart (the accepted runs whose spread the regression gate needs), one whose TTFT is 60% slower (the
gate decides it regressed against the newest of them), and one on another host.
"""
from __future__ import annotations

import json
import shutil

import pytest

from reports import run_history, run_reports
from tests.reports.test_reports_browser import _browser, _run, png_pixels
from workflows.main import main as run_py

CON4 = "isl-128_osl-128_con-4"
POINT4 = f"benchmarks/point_{CON4}_n-16"


def _release(make_run, day: int, slower: float = 1.0, cpu: str | None = None):
    """A finished release run directory of the fixture, started on 2026-01-<day>, reported and indexed."""
    run = make_run("release_run")
    dest = run.path.with_name(f"run-{day}")
    run.path.rename(dest)
    run.path = dest
    run_id = f"2026-01-{day:02d}_10-00-00_smollm2-cpu"

    def finished(m: dict) -> None:
        m.update(run_id=run_id, started=f"2026-01-{day:02d}T10:00:00+00:00", status="passed",
                 ended=f"2026-01-{day:02d}T10:10:00+00:00")
        if cpu:
            m["environment"] = {"python": "3.11.7", "packages": {}, "host": {"cpu": cpu, "cores": 64, "ram_gb": 256.0,
                                                                            "os": "Linux", "cpu_flags": "x"}}
    run.edit("manifest.json", finished)
    if slower != 1.0:
        lines = (run.path / f"{POINT4}.requests.jsonl").read_text().splitlines()
        rows = [json.loads(line) for line in lines if line.strip()]
        for row in rows:
            row["ttft_ms"] *= slower
        (run.path / f"{POINT4}.requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        run.edit(f"{POINT4}.json", lambda p: p["metrics"].update(mean_ttft_ms=p["metrics"]["mean_ttft_ms"] * slower))
    assert run_reports.main(["--run-dir", str(run.path), "--ignore-verdict"]) == 0
    return run_id


@pytest.fixture
def history(make_run, tmp_path, monkeypatch):
    """Five releases indexed into a private SQLite history store; their ids, oldest first."""
    monkeypatch.setenv("TT_HISTORY_URL", f"sqlite:///{tmp_path / 'history.sqlite3'}")
    return [_release(make_run, 8, slower=0.98), _release(make_run, 9, slower=1.02), _release(make_run, 10),
            _release(make_run, 11, slower=1.6), _release(make_run, 12, cpu="Other CPU")]


def test_history_writes_the_document_and_the_page(history, tmp_path):
    out = tmp_path / "history-out"
    assert run_history.main(["--output-dir", str(out), "--model", "SmolLM2-135M-Instruct"]) == 0
    doc = json.loads((out / "history.json").read_text())
    assert [r["run_id"] for r in doc["runs"]] == history and len(doc["specs"]) == 1
    _, _, base, slow, other = doc["runs"]
    assert base["spec"]["key"] == "SmolLM2-135M-Instruct|cpu|cpu-reference|vllm" and base["verdict"] == "PASS"
    assert set(base) >= {"run_id", "spec", "commit", "host_fingerprint", "started", "verdict", "metrics"}
    ttft = next(m for m in base["metrics"] if m["check"] == f"ttft_ms {CON4} complete")
    assert ttft["series"] == f"ttft_ms {CON4}" and ttft["ci95"][0] < ttft["value"] < ttft["ci95"][1]
    # the gate decided the slow release regressed against the newest accepted one, on the metric it names
    assert {(g["series"], g["decision"], g["baseline_run"]) for g in slow["gate"]} >= {
        (f"ttft_ms {CON4}", "regressed", history[2])}
    assert slow["verdict"] == "FAIL" and not slow["host_changes"]
    # every release says what its comparison decided: the first was compared with nothing, the slow one
    # regressed (named with its ratio) and failed the verdict
    assert doc["runs"][0]["comparison"] is None
    assert slow["comparison"]["summary"].startswith(f"regressed: ttft_ms {CON4} x1.") and slow["comparison"]["gated"]
    assert slow["comparison"]["baseline_run"] == history[2]
    assert base["comparison"]["summary"] in ("within noise", "inconclusive") or \
        base["comparison"]["summary"].startswith("within noise (")
    assert (base["mode"], base["server"]) == ("ci", "local")  # the fixture's cli_args.json: --local-server
    assert other["host_changes"] and any(c.startswith("cpu: ") for c in other["host_changes"])
    assert other["host_fingerprint"] != base["host_fingerprint"] and not other["gate"]
    assert base["report"] == "../run-10/reports/report.html"
    html = (out / "history.html").read_text()
    assert html.count('data-plot="history"') >= 10 and 'class="gate regressed"' in html
    assert 'class="host-change"' in html and 'href="../run-11/reports/report.html"' in html
    cells = [row.split('class="gate-cell')[1].split("</td>")[0] for row in html.split("<tr>")[2:7]]
    assert cells[0].endswith(">-") and "regressed: ttft_ms" in cells[3] and "(failed the verdict)" in cells[3]
    assert all(cell.split(">", 1)[1] != "-" for cell in cells[1:4]), cells  # no longer "-" for every release
    assert "<th>Mode</th><th>Server</th>" in html and "<td>ci</td>" in html
    assert "<script" not in html and "http" not in html.replace(doc["store"], "")
    # other filters: none of these releases
    assert run_history.main(["--output-dir", str(out / "none"), "--device", "n150"]) == 0
    assert json.loads((out / "none" / "history.json").read_text())["runs"] == []
    assert "No release in the run history matches" in (out / "none" / "history.html").read_text()


def test_run_py_history_option(history, tmp_path, capsys):
    """The option as run.py declares it: validated like the others, run in the reports venv."""
    assert run_py(["--history", "--output-dir", str(tmp_path / "h"), "--model", "SmolLM2-135M-Instruct",
                   "--device", "CPU"]) == 0
    doc = json.loads((tmp_path / "h" / "history.json").read_text())
    assert doc["filters"] == {"model": "SmolLM2-135M-Instruct", "device": "cpu"} and len(doc["runs"]) == 5
    assert run_py(["--history", "--model", "SmolLM2-135M-Instruct"]) == 2
    assert "add --output-dir DIR" in capsys.readouterr().err
    assert run_py(["--history", "--workflow", "release", "--output-dir", str(tmp_path / "x")]) == 2
    assert run_py(["--history", "--model", "SmolLM2-135M-Instrukt", "--output-dir", str(tmp_path / "x")]) == 2
    assert "did you mean 'SmolLM2-135M-Instruct'" in capsys.readouterr().err


@pytest.mark.browser
def test_history_page_renders_in_headless_chromium(history, tmp_path):
    _browser()
    out = tmp_path / "history-out"
    assert run_history.main(["--output-dir", str(out)]) == 0
    url = (out / "history.html").resolve().as_uri()
    dom = _run(["--dump-dom", url], tmp_path / "profile-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-plot="history"' in dom.stdout and 'class="gate regressed"' in dom.stdout
    shot = tmp_path / "history.png"
    res = _run([f"--screenshot={shot}", "--window-size=1280,2400", url], tmp_path / "profile")
    assert shot.is_file(), res.stderr[-2000:]
    _, bpp, rows = png_pixels(shot.read_bytes())
    pixels = {row[i:i + 3] for row in rows[::8] for i in range(0, len(row), bpp * 8)}
    assert len(pixels) > 20, "screenshot is (nearly) one colour: the page did not render"
    # the interval whiskers and points (#1f77b4) are drawn
    assert any(row[i:i + 3] == bytes((0x1f, 0x77, 0xb4)) for row in rows for i in range(0, len(row), bpp))
    shutil.rmtree(tmp_path / "profile", ignore_errors=True)
