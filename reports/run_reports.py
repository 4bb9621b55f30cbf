"""Reports client workflow: rebuild every report of ONE run directory from its files.

    python -m reports.run_reports --run-dir RUN_DIR [--model-spec-json PATH]
        [--server-url URL] [--workflow-args-json JSON] [--disable-trace-capture]
        [--ignore-verdict]

Reads only RUN_DIR (manifest, model spec snapshot, CLI args, result records) and writes
RUN_DIR/reports/{report.json,report.md,summary.csv,report.html,outputs.json}, then prints the
console summary with the verdict on its last line.

Exit codes: 0 PASS (or any verdict with --ignore-verdict, also settable as
``{"ignore_verdict": true}`` in --workflow-args-json), 3 FAIL, 2 bad input (no usable
manifest/model spec, bad arguments), 1 anything else went wrong.
``--server-url`` and ``--disable-trace-capture`` are accepted and ignored so every client
workflow shares one signature; reports never talk to a server.

Why not the other clients' harness (``contracts.client_main``): a report is of a run directory, not
of a spec handed in: the spec is the run's own snapshot (``--model-spec-json`` only fills a missing
one), a finished run is re-rendered long after its server is gone, and the exit code is the
verdict (3 FAIL, 4 INCONCLUSIVE), not the outcome of the work.
"""
from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path

EXIT_PASS, EXIT_ERROR, EXIT_BAD_INPUT, EXIT_FAIL, EXIT_INCONCLUSIVE = 0, 1, 2, 3, 4


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run-dir", required=True, type=Path)
    p.add_argument("--model-spec-json", type=Path, default=None,
                   help="used only when RUN_DIR has no model_spec.json of its own")
    p.add_argument("--server-url", default=None, help="accepted and ignored")
    p.add_argument("--workflow-args-json", default=None)
    p.add_argument("--disable-trace-capture", action="store_true", help="accepted and ignored")
    p.add_argument("--ignore-verdict", action="store_true",
                   help="write the reports and exit 0 even when the verdict is FAIL or INCONCLUSIVE")
    p.add_argument("--final", action="store_true",
                   help="render once more after the run ended (its final status, end time and every step's "
                        "outcome): write the reports quietly and exit 0 unless rendering itself fails")
    return p.parse_args(argv)


def _workflow_args(text: str | None) -> dict:
    if not text:
        return {}
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("--workflow-args-json must be a JSON object")
    return value


class RunHistory:
    """The run history as the reports step uses it: the baseline of a comparison, then this run indexed.

    A store that cannot be reached is said in one line and never stops the report: the run
    directory keeps everything and ``run.py --workflow reports --output-dir RUN_DIR`` indexes it later.
    """

    def __init__(self, quiet: bool = False) -> None:
        self._store, self._tried, self.quiet = None, False, quiet

    def store(self):
        if not self._tried:
            self._tried = True
            from history.store import HistoryError, open_store

            try:
                self._store = open_store()
            except HistoryError as exc:
                self.say(f"history: {exc}; this run is not indexed (its run directory keeps everything: "
                         f"index it later with `python3 run.py --workflow reports --output-dir RUN_DIR`)")
        return self._store

    def say(self, line: str) -> None:
        if not self.quiet:
            print(f"reports: {line}", flush=True)

    def comparer(self, run_dir: Path, model_spec_json: Path | None, wf_args: dict):
        """The ``compare`` hook of ``build_report``: None when the run compares with nothing."""
        from reports.builder import load_inputs
        from reports.comparison import CompareError, baseline_from, build_comparison, settings_from

        def compare(record):
            try:
                _, spec, cli_args = load_inputs(run_dir, model_spec_json)
                settings = settings_from(cli_args, wf_args, spec, record.metadata.workflow)
                if settings is None:
                    return None
                store = self.store()
                skipped: list[str] = []
                found = baseline_from(settings, record, store, skipped)
            except CompareError as exc:
                self.say(f"comparison: {exc}; not compared")
                return None
            for line in skipped:
                self.say(f"comparison: {line}")
            if found is None:
                self.say("comparison: no earlier run of this spec and workflow on this host in the history ended "
                         "with nothing failed (passed or inconclusive); nothing to compare with")
                return None
            comparison = build_comparison(settings, record, run_dir, found[0], found[1], store)
            comparison.notes.extend(skipped)
            self.say(f"comparison: against {comparison.baseline_run} ({len(comparison.metrics)} metric(s))")
            return comparison

        return compare

    def index(self, record, run_dir: Path) -> None:
        from history.store import HistoryError, shown_url

        store = self.store()
        if store is None:
            return
        try:
            entry = store.index(record, run_dir)
        except HistoryError as exc:
            self.say(f"history: {exc}; the run directory keeps everything")
            return
        self.say(f"history: indexed {entry.run_id} in {shown_url(store.url)} (spec {entry.spec_key}, "
                 f"host {entry.host_fingerprint})")

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except SystemExit as exc:  # argparse: usage errors are bad input
        return EXIT_BAD_INPUT if exc.code else EXIT_PASS
    try:
        wf_args = _workflow_args(args.workflow_args_json)
    except ValueError as exc:
        print(f"reports: bad --workflow-args-json: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    ignore = args.ignore_verdict or str(wf_args.get("ignore_verdict", "")).lower() in (
        "1", "true", "yes")

    from reports import BadRunDir, build_report, write_reports
    from reports.console import print_summary

    run_dir: Path = args.run_dir
    print(f"reports: building the report from {run_dir}", flush=True)
    history = RunHistory(quiet=args.final)
    try:
        record = build_report(run_dir, args.model_spec_json,
                              compare=history.comparer(run_dir, args.model_spec_json, wf_args), workflow_args=wf_args)
    except BadRunDir as exc:
        print(f"reports: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception:  # noqa: BLE001 - any other failure is an error, with its traceback
        traceback.print_exc()
        return EXIT_ERROR
    try:
        outputs = write_reports(record, run_dir)
        outputs.append("reports/outputs.json")
        (run_dir / "reports" / "outputs.json").write_text(
            json.dumps({"outputs": outputs}, indent=2) + "\n", encoding="utf-8")
        for rel in outputs:
            print(f"reports: wrote {rel}", flush=True)
        history.index(record, run_dir)
        if args.final:
            return EXIT_PASS  # the verdict was returned by the reports step; this only refreshes the files
        print_summary(record)
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        return EXIT_ERROR
    sys.stdout.flush()
    if record.verdict.result == "PASS":
        return EXIT_PASS
    if ignore:
        print(f"reports: verdict {record.verdict.result} ignored (--ignore-verdict)", flush=True)
        return EXIT_PASS
    return EXIT_INCONCLUSIVE if record.verdict.result == "INCONCLUSIVE" else EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
