"""Which runs may be a comparison's baseline: decided from the run's own manifest.

Why a rule at all: a baseline is the yardstick of the regression gate. A run that did not finish
has partial measurements (a point cut short, a step never started), and a gate measured against
those says nothing. The manifest (``contracts.run_dir``) is the source of truth: the run writes its
final status there when it ends, and a run that died without ending still says ``running``.

The rules (docs/architecture.md, "Run history and comparison"):

* ``--compare-to last`` (and a release's default ``last``) picks the newest run of the same spec,
  host and workflow that ended on its own with nothing failed: manifest status ``passed`` or
  ``inconclusive`` and a verdict PASS or INCONCLUSIVE. Never a run still running or that died
  without ending, an interrupted one, one where a step failed (its measurements are not whole), and
  never one whose verdict FAILED: a run that failed the regression gate or a target is a rejected
  build, and comparing with it would let the same regression pass the next gate as within noise.
* A baseline named on purpose (``--compare-to RUN_DIR|RUN_ID``) must have finished with whole
  measurements: status ``passed`` or ``inconclusive``, or ``failed`` on its verdict alone (every
  other step passed or was skipped). A FAILED verdict is allowed there because the user chose that
  run; the comparison notes it. Anything else is refused: exit 2 from run.py, naming why.
"""
from __future__ import annotations

from pathlib import Path

from contracts.run_dir import Manifest, RunStatus, StepStatus

#: What ``last`` accepts (the history store filters on the same values).
LAST_STATUSES = (RunStatus.PASSED.value, RunStatus.INCONCLUSIVE.value)
LAST_VERDICTS = ("PASS", "INCONCLUSIVE")
#: Steps that measure nothing: their failure leaves the measurements whole.
NOT_MEASURING = ("reports", "teardown")


def unusable_reason(run_dir: Path, *, explicit: bool) -> str | None:
    """Why the run in ``run_dir`` cannot be a baseline (one line), or None when it can.

    ``explicit``: the user named the run (a FAILED verdict is then allowed); else the rule of ``last``.
    """
    path = Path(run_dir) / "manifest.json"
    if not path.is_file():
        return f"{run_dir} is gone or is not a run directory (no manifest.json)"
    try:
        manifest = Manifest.read(path)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        return f"its manifest.json cannot be read ({type(exc).__name__}: {exc})"
    status = manifest.status
    if status is RunStatus.RUNNING:
        return ("it has not finished (manifest status running: still in progress, or it died without "
                "ending); its measurements are not whole")
    if status is RunStatus.INTERRUPTED:
        return "it was interrupted; its measurements are not whole"
    broken = [f"{s.name} {s.status.value}" + (f" ({s.detail})" if s.detail else "") for s in manifest.steps
              if s.name not in NOT_MEASURING and s.status in (StepStatus.FAILED, StepStatus.NOT_RUN,
                                                             StepStatus.RUNNING)]
    if broken:
        return "a step did not finish: " + "; ".join(broken) + "; its measurements are not whole"
    if not explicit and (Path(run_dir) / "requirements.json").is_file():
        return ("it measured a requirements document's points, not the spec's (name it with --compare-to RUN_DIR "
                "to compare with it anyway)")
    if status is RunStatus.FAILED and not explicit:
        return ("its verdict FAILED (a rejected run is never the automatic baseline: name it with "
                "--compare-to RUN_DIR to compare with it anyway)")
    return None

