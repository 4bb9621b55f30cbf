"""scripts/measure_release_time.py: what it reads from a finished release (manifest steps, the
verdict's decisions) and how it prints it. The real measurement runs whole releases (minutes),
so here run.py is replaced by a FAKE that writes a run directory as run.py does."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.helpers import load_script

mrt = load_script(Path(__file__).resolve().parents[2] / "scripts" / "measure_release_time.py")


def fake_release(decisions: list[str], code: int = 0):
    def run(cmd, **kwargs):
        run_dir = Path(cmd[cmd.index("--output-dir") + 1])
        (run_dir / "reports").mkdir(parents=True)
        steps = [{"name": "wait_ready", "duration_s": 12.0}, {"name": "benchmarks", "duration_s": 70.5}]
        (run_dir / "manifest.json").write_text(json.dumps({"steps": steps}))
        checks = [{"name": f"check {i}", "decision": d} for i, d in enumerate(decisions)]
        (run_dir / "reports" / "report.json").write_text(json.dumps({"verdict": {"result": "X", "checks": checks}}))
        return subprocess.CompletedProcess(cmd, code)
    return run


def test_a_release_is_read_step_by_step_with_its_undecided_checks(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(mrt.subprocess, "run", fake_release(["pass", "inconclusive", "pass"], code=4))
    timing = mrt.measure_once("SmolLM2-135M-Instruct", "ci", tmp_path / "run")
    assert timing.exit_code == 4 and timing.steps == {"wait_ready": 12.0, "benchmarks": 70.5}
    assert timing.decisions == {"pass": 2, "inconclusive": 1} and timing.undecided == ["check 1"]
    mrt.print_mode("ci", [timing])
    out = capsys.readouterr().out
    assert "benchmarks" in out and "70.5" in out and "undecided: check 1" in out and "goal < 240 s" in out


def test_the_command_is_the_readme_release_in_the_asked_mode(tmp_path):
    cmd = mrt.release_command("M", "smoke", tmp_path)
    assert cmd[1].endswith("run.py") and cmd[cmd.index("--workflow") + 1] == "release"
    assert "--local-server" in cmd and cmd[cmd.index("--workflow-args") + 1] == "mode=smoke"


def test_a_failed_release_makes_the_script_fail_and_name_it(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(mrt.subprocess, "run", fake_release(["pass"], code=1))
    monkeypatch.setattr("sys.argv", ["measure_release_time.py", "--modes", "smoke", "--keep", str(tmp_path)])
    assert mrt.main() == 1
    assert "smoke run 1 exited 1" in capsys.readouterr().err
