"""The reports step indexes the run in the history; a store it cannot reach is said and never stops it."""
from __future__ import annotations

import shutil
from pathlib import Path

from history.store import open_store
from reports.run_reports import main as run_reports

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "benchmarks_only_run"


def test_a_rebuild_indexes_the_run(tmp_path, monkeypatch, capsys) -> None:
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    url = f"sqlite:///{tmp_path / 'h.sqlite3'}"
    monkeypatch.setenv("TT_HISTORY_URL", url)
    assert run_reports(["--run-dir", str(run)]) == 0
    assert "history: indexed 2026-01-11_09-00-00_smollm2-cpu" in capsys.readouterr().out
    with open_store(url) as store:
        entry = store.get("2026-01-11_09-00-00_smollm2-cpu")
        assert entry.verdict == "PASS" and entry.run_dir == str(run.resolve())


def test_an_unreachable_store_is_said_and_the_report_still_written(tmp_path, monkeypatch, capsys) -> None:
    run = tmp_path / "run"
    shutil.copytree(FIXTURE, run)
    (run / "cli_args.json").write_text('{"compare_to": "last"}')
    monkeypatch.setenv("TT_HISTORY_URL", "postgresql://tt@127.0.0.1:9/history?connect_timeout=2")
    assert run_reports(["--run-dir", str(run)]) == 0
    out = capsys.readouterr().out
    assert "cannot be reached" in out and "not indexed" in out and "--output-dir RUN_DIR" in out
    assert "comparison: --compare-to last needs the run history" in out
    assert (run / "reports" / "report.json").is_file()
