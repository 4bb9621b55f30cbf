"""A stress_tests run picked up after a kill: the load points an earlier run of the same directory finished are kept,
the server is left to go idle, and only what is missing is sent.

Why: a rerun of the same command after run.py was killed resumes in the same run directory
(``workflows.resume``); a stress load point takes minutes, and measuring it again while the killed run's requests
may still be served would both waste them and mix two loads. A point cut by a signal is marked ``interrupted``
(``records.stress.StressPointRecord``) and measured again; a point that was not run is run.
"""
from __future__ import annotations

from pathlib import Path

RECORD_NAME = "stress_record.json"


def finished_points(out_dir: Path) -> dict[str, object]:
    """Point name -> its record, for every point the run in ``out_dir`` measured to its end (none when the
    directory holds no readable stress record)."""
    from contracts.typed_record import RecordError
    from records.stress import StressRecord

    path = Path(out_dir) / RECORD_NAME
    if not path.is_file():
        return {}
    try:
        record = StressRecord.read(path)
    except (RecordError, OSError, ValueError, TypeError, KeyError):
        return {}
    return {p.name: p for p in record.points if p.status != "not_run" and not p.interrupted}


def quiet_before_measuring(base_url: str, api_key: str | None, log) -> None:
    """Wait until the server is idle (``benchmarking.reconcile.wait_quiet``) and log how that went."""
    from benchmarking.reconcile import wait_quiet

    log(f"resuming: {wait_quiet(base_url, api_key)}")
