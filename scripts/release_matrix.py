#!/usr/bin/env python3
"""Run one tier of the catalog's release matrix and write the model support table.

    python3 scripts/release_matrix.py --tier cpu --workflow-args mode=smoke --out DIR
    python3 scripts/release_matrix.py --tier nightly --executor k8s --out DIR   # Kubernetes objects
    python3 scripts/release_matrix.py --tier nightly --executor ray --address auto --out DIR   # a Ray cluster
    python3 scripts/release_matrix.py --tier nightly --plan 4    # the makespan on 4 hosts per device, no run
    python3 scripts/release_matrix.py --tier cpu --workflow-args mode=ci --promote --apply --out DIR
    python3 scripts/release_matrix.py --list-tiers

Tiers (``workflows/release_matrix.yaml``) select catalog specs by device and status. ``--executor
local`` (default) runs every spec of the tier on this host, one after another, with ``run.py
--local-server``: a failure does not stop the others, Ctrl-C stops the running spec and keeps what
finished. It writes ``DIR/model_support.md`` (one row per spec: model, device, impl, status, verdict
PASS/FAIL/INCONCLUSIVE/NOT RUN with the reason, headline figures, comparison with the previous run,
run id, date) and ``DIR/release_specs.json`` (the status each verdict supports). ``--executor k8s``
writes ``DIR/k8s/``: one Job per entry from the deploy workflow's manifests plus a collector, validated
offline. ``--collect RUNS`` builds the table from run directories a cluster wrote (the collector).
``--executor ray`` runs every spec as one task of the Ray cluster at ``--address`` (``workflows/matrix_ray.py``:
each on a node offering its device, retried once on another node when its node dies, its run brought home
to ``DIR/runs`` and indexed into one history), then writes the same table. ``--plan FLEET`` prints how long
the tier takes on a fleet (N hosts per device, or ``n150=4,t3k=2``) from the history's measured per-spec
times, running nothing.

``--promote`` then reads the run history (``workflows/promotion.py``) and writes ``DIR/promotions.json``:
per spec of the tier the status its last releases on its host class support (from, to, evidence run
ids, reason). ``--apply`` writes those changes into the catalog as line-level edits (and bumps VERSION
and the changed templates' ``version:``), regenerates ``docs/model_support.md`` from the catalog and
writes ``DIR/release_notes.md``; ``--apply-to ROOT`` edits a copy of the repository instead (a dry
run). ``--skip-run`` promotes from the history alone, running nothing.

Exit codes: 0 every spec that ran passed (NOT RUN rows do not fail a tier); 3 a spec FAILED; 4 none
failed but one is INCONCLUSIVE; 1 the k8s objects are invalid; 2 bad input, or ``--promote`` could not
read the history or ``--apply`` could not write its edit (a demotion is not an error); 130 interrupted.
Like run.py, it runs on any Python >= 3.10 and re-executes itself in the orchestrator's venv.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MARKER = "TT_INFERENCE_ORCHESTRATOR"
EXECUTORS = ("local", "k8s", "ray")


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="release_matrix.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--tier", help="tier of workflows/release_matrix.yaml (see --list-tiers)")
    p.add_argument("--workflow-args", default="", help="'key=value ...' laid over the tier's (e.g. mode=smoke)")
    p.add_argument("--out", type=Path, help="where model_support.md and release_specs.json (or k8s/) go")
    p.add_argument("--compare-to", help="passed to every run.py (default: a release compares with the last run)")
    p.add_argument("--executor", default="local", choices=EXECUTORS)
    p.add_argument("--namespace", default="default", help="--executor k8s: namespace of every object")
    p.add_argument("--client-image", default="", help="--executor k8s: image with run.py for the Jobs")
    p.add_argument("--storage-class", default="", help="--executor k8s: storage class of the results claim")
    p.add_argument("--address", default="auto", help="--executor ray: the cluster (auto: the one this host "
                   "joined with ray start; or HOST:PORT of its head)")
    p.add_argument("--retries", type=int, default=1, help="--executor ray: attempts more for a spec whose node died")
    p.add_argument("--history-url", help="the run history every run is indexed in (sets TT_HISTORY_URL: "
                   "postgresql://... or sqlite:///PATH; default the driver's SQLite)")
    p.add_argument("--plan", metavar="FLEET", help="print the tier's makespan on a fleet of N hosts per device "
                   "(or DEVICE=N,...) from the run history's per-spec times, and run nothing")
    p.add_argument("--collect", type=Path, help="build the table from the run directories under this directory")
    p.add_argument("--matrix", type=Path, help="another matrix file (default workflows/release_matrix.yaml)")
    p.add_argument("--list-tiers", action="store_true", help="print the tiers and the specs each selects")
    p.add_argument("--promote", action="store_true", help="write DIR/promotions.json from the run history")
    p.add_argument("--apply", action="store_true", help="--promote: edit the catalog, regenerate "
                   "docs/model_support.md, write DIR/release_notes.md")
    p.add_argument("--apply-to", type=Path, help="--apply: the repository copy to edit (default this checkout)")
    p.add_argument("--skip-run", action="store_true", help="--promote: run nothing, decide from the history")
    p.add_argument("--runs", type=Path, action="append", default=[], help="--promote: run directories collected "
                   "from other runners (a run's report is looked up by its run id here when its indexed path is gone)")
    return p.parse_args(argv)


def _bootstrap(argv: list[str]) -> int:
    """Re-execute in the orchestrator's venv (``deploy`` for the Kubernetes paths: kubernetes-validate)."""
    import _repo  # noqa: F401  (the repository importable: scripts/_repo.py)
    from workflows import venvs

    name = "deploy" if any(a in argv for a in ("--collect", "k8s", "--executor=k8s")) else "run"
    if _executor(argv) == "ray" and not any(a == "--plan" or a.startswith("--plan=") for a in argv):
        name = "ray"  # Ray in its own pinned venv (requirements/ray.txt); the other executors never import it
    try:
        info = venvs.ensure_venv(name)
    except venvs.VenvError as exc:
        print(f"release_matrix.py: error: could not prepare the {name} venv: {exc}", file=sys.stderr)
        return 1
    os.execve(str(info.python), [str(info.python), os.path.abspath(__file__), *argv],
              dict(os.environ, **{MARKER: str(info.path)}))
    return 1  # not reached


def _executor(argv: list[str]) -> str | None:
    for i, a in enumerate(argv):
        if a == "--executor" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--executor="):
            return a.split("=", 1)[1]
    return None


def main(argv: list[str]) -> int:
    if os.environ.get(MARKER) != sys.prefix:
        return _bootstrap(argv)
    import _repo  # noqa: F401  (the repository importable: scripts/_repo.py)
    try:
        args = parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code else 0
    from contracts.run_dir import host_facts
    from contracts.workflow_args import WorkflowArgsError, WorkflowType, parse_workflow_args, validate_workflow_args
    from workflows.catalog import load_catalog
    from workflows.release_matrix import MATRIX_PATH, MatrixError, load_matrix, tier_specs

    if args.history_url:
        os.environ["TT_HISTORY_URL"] = args.history_url  # every run.py and the indexing read it
    if args.apply_to is not None:  # the dry run's catalog: read, run and edited there (workflows.catalog)
        os.environ["TT_CATALOG_ROOT"] = str(args.apply_to.resolve())
    try:
        if (args.apply or args.skip_run) and not args.promote or args.apply_to and not args.apply:
            raise MatrixError("--apply and --skip-run go with --promote, --apply-to with --apply")
        matrix = load_matrix(args.matrix or MATRIX_PATH)
        catalog = load_catalog()
        if args.list_tiers:
            return _list_tiers(matrix, catalog)
        if args.tier not in matrix.tiers:
            raise MatrixError(f"--tier {args.tier!r}: one of {', '.join(matrix.tiers)}")
        if args.retries < 0 or args.retries > 10:
            raise MatrixError(f"--retries {args.retries}: 0 to 10")
        if args.plan is not None:
            return _plan(args, tier_specs(matrix.tiers[args.tier], catalog), matrix.tiers[args.tier])
        if args.out is None:
            raise MatrixError("--out DIR is required")
        tier = matrix.tiers[args.tier]
        workflow_args = parse_workflow_args(args.workflow_args)
        validate_workflow_args(WorkflowType(tier.workflow), {"mode": tier.mode, **workflow_args})
    except (MatrixError, WorkflowArgsError, ValueError) as exc:
        print(f"release_matrix.py: error: {exc}", file=sys.stderr)
        return 2
    specs = tier_specs(tier, catalog)
    facts = host_facts()
    host = f"{facts['cpu']}, {facts['cores']} cores, {facts['ram_gb']} GB, {facts['os']}"
    mode = workflow_args.get("mode", tier.mode)
    if args.executor == "k8s" and args.collect is None:
        from workflows.matrix_k8s import render_tier, write_tier

        rendered, problems = render_tier(tier, specs, list(catalog.specs.values()), namespace=args.namespace,
                                         mode=mode, client_image=args.client_image, storage_class=args.storage_class)
        for line in problems:
            print(f"release_matrix.py: INVALID {line}", file=sys.stderr)
        if problems:
            return 1
        written = write_tier(args.out, rendered, tier, args.namespace)
        print(f"tier {tier.name}: {len(rendered) - 1} entry Job(s) and a collector, {len(written)} files, valid; "
              f"apply with: kubectl apply -f {args.out / 'k8s' / 'all.yaml'}")
        return 0
    if args.skip_run:
        code = 0
    else:
        code = _run_tier(args, matrix, tier, specs, workflow_args, host, mode)
    if args.promote and code != 130:
        promoted = _promote(args, matrix, tier, specs)
        return promoted if promoted else code
    return code


def _list_tiers(matrix, catalog) -> int:
    from workflows.release_matrix import tier_specs

    for tier in matrix.tiers.values():
        specs = tier_specs(tier, catalog)
        print(f"{tier.name}: {tier.description} ({len(specs)} specs, {tier.workflow}, mode {tier.mode})")
        for s in specs:
            print(f"  {s.model_name:32} {s.device_type.value:8} {s.impl.impl_name:20} {s.status.name}")
    return 0


def _run_tier(args, matrix, tier, specs, workflow_args, host: str, mode: str) -> int:
    """Run (or collect) the tier and write the support table; the tier's exit code."""
    from workflows.catalog import load_catalog
    from workflows.release_matrix import EntryResult, run_tier
    from workflows.support_table import write_outputs

    if args.collect is not None:
        from workflows.matrix_k8s import entry_job_name, entry_options

        results = []
        every = list(load_catalog().specs.values())
        for spec in specs:
            options = entry_options(spec, tier, args.namespace, "", mode, every)
            run_dir = args.collect / entry_job_name(spec, options)
            results.append(EntryResult(spec, run_dir=run_dir) if run_dir.is_dir() else EntryResult(
                spec, not_run=f"no run directory {run_dir.name} was collected (its Job did not run here)"))
        interrupted = False
    elif args.executor == "ray":
        results, interrupted, host = _run_on_ray(args, tier, specs, workflow_args, mode)
        if results is None:
            return 2
    else:
        print(f"tier {tier.name}: {len(specs)} spec(s), {tier.workflow} with mode={mode}, one after another on "
              f"this host ({host})", flush=True)
        results, interrupted = run_tier(tier, specs, workflow_args, compare_to=args.compare_to,
                                        say=lambda line: print(f"release_matrix: {line}", flush=True))
    rows = write_outputs(args.out, matrix, tier, results, host, interrupted)
    for row in rows:
        print(f"  {row.verdict:12} {row.model} {row.device} {row.impl}" + (f": {row.reason}" if row.reason else ""))
    print(f"wrote {args.out / 'model_support.md'} and {args.out / 'release_specs.json'}")
    verdicts = {row.verdict for row in rows}
    if interrupted:
        return 130
    return 3 if "FAIL" in verdicts else 4 if "INCONCLUSIVE" in verdicts else 0


def _run_on_ray(args, tier, specs, workflow_args, mode: str):
    """The tier on the Ray cluster (``workflows.matrix_ray``): results, interrupted, the table's host line."""
    from workflows.matrix_ray import RayMatrixError, run_tier_on_ray

    say = lambda line: print(f"release_matrix: {line}", flush=True)  # noqa: E731
    print(f"tier {tier.name}: {len(specs)} spec(s), {tier.workflow} with mode={mode}, on the Ray cluster at "
          f"{args.address}", flush=True)
    try:
        results, interrupted, nodes = run_tier_on_ray(
            tier, specs, workflow_args, address=args.address, out=args.out, retries=args.retries,
            compare_to=args.compare_to, say=say, tty=sys.stdout.isatty())
    except RayMatrixError as exc:
        print(f"release_matrix.py: error: {exc}", file=sys.stderr)
        return None, False, ""
    return results, interrupted, f"a Ray cluster of {nodes} node(s) at {args.address}"


def _plan(args, specs, tier) -> int:
    """``--plan FLEET``: the makespan from the run history's measured per-spec times (assumed where none)."""
    from history.store import HistoryError, open_store
    from workflows.matrix_fleet import history_durations, parse_fleet, render_plan, spec_times
    from workflows.release_matrix import MatrixError

    mode = dict(kv.split("=", 1) for kv in args.workflow_args.split() if "=" in kv).get("mode", tier.mode)
    try:
        fleet = parse_fleet(args.plan, {s.device_type.value for s in specs})
    except ValueError as exc:
        raise MatrixError(str(exc)) from None
    try:
        with open_store() as store:
            durations = history_durations(store.runs(), tier.workflow)
    except HistoryError as exc:
        print(f"release_matrix.py: note: {exc}; every spec's time is assumed", file=sys.stderr)
        durations = {}
    print(render_plan(tier.name, mode, spec_times(specs, durations, mode), fleet))
    return 0


def _promote(args, matrix, tier, specs) -> int:
    """Proposals from the run history (DIR/promotions.json), then ``--apply``; 0, or 2 when that failed."""
    from history.store import HistoryError, open_store
    from workflows.promotion import proposals, spec_evidence, write_promotions

    try:
        with open_store() as store:
            evidence = spec_evidence(store, specs, tier.workflow, search=tuple(args.runs))
    except HistoryError as exc:
        print(f"release_matrix.py: error: --promote: {exc}", file=sys.stderr)
        return 2
    found = proposals(specs, evidence, matrix.releases)
    path = write_promotions(args.out, tier.name, matrix.releases, found, evidence)
    for p in found:
        print(f"  {p.decision:8} {p.model} {p.device} {p.impl}: {p.from_status} -> {p.to_status} ({p.reason})")
    print(f"wrote {path}")
    return _apply(args, matrix, tier, specs, found, evidence) if args.apply else 0


def _apply(args, matrix, tier, specs, found, evidence) -> int:
    """The catalog edits, docs/model_support.md and DIR/release_notes.md (``workflows.release_docs``)."""
    from workflows.catalog import load_catalog_from
    from workflows.catalog_edit import CatalogEditError, apply_statuses
    from workflows.release_docs import DOC_PATH, render_release_notes, render_support_doc, repo_commit

    root = (args.apply_to or REPO).resolve()
    by_id = {s.model_id: s for s in specs}
    try:
        version, written = apply_statuses(root, [(by_id[p.spec_id], p.to_status) for p in found
                                                 if p.decision != "keep"])
    except (CatalogEditError, OSError) as exc:
        print(f"release_matrix.py: error: --apply: {exc}", file=sys.stderr)
        return 2
    version = version or (root / "VERSION").read_text(encoding="utf-8").strip()
    catalog = load_catalog_from(root / "workflows" / "model_specs", version)
    doc = root / DOC_PATH
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(render_support_doc(list(catalog.specs.values()), version, evidence), encoding="utf-8")
    now = [catalog.specs[s.model_id] for s in specs if s.model_id in catalog.specs]
    notes = args.out / "release_notes.md"
    notes.write_text(render_release_notes(version, tier.name, matrix.releases, now, found, evidence,
                                          repo_commit()), encoding="utf-8")  # the code's commit
    changed = ", ".join(str(p.relative_to(root)) for p in written) or "nothing (no status change)"
    print(f"release {version}: changed {changed}; regenerated {doc}; wrote {notes}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
