"""Evals client workflow: run lm-eval against the served model and gate on accuracy.

Contract (docs/architecture.md, "Client workflow contract"):

    python evals/run_evals.py --run-dir RUN_DIR --model-spec-json PATH --server-url URL \
        --workflow-args-json '{"mode": "smoke"}' [--disable-trace-capture]

Per task it writes ``RUN_DIR/evals/<task>/eval_record.json`` (tt-eval-record/1), lm-eval's own
output under ``RUN_DIR/evals/<task>/lm_eval/`` (results + per-sample logs + a response cache), and
the full lm-eval log as ``lm_eval.log``. ``RUN_DIR/evals/outputs.json`` lists the result files.
Exit 0: every task ran and none failed its accuracy check; 1: some task failed or errored (the
others still ran); 2: bad input.

Why each task is its own lm-eval process: a crash or a missing dataset costs one task, not the run;
each task has its own record, log and cache, so a rerun into the same run directory skips finished
tasks and resumes an interrupted one from its request cache (lm-eval ``--use_cache``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `evals.*` importable from the repo root
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evals.eval_config import EVAL_CONFIGS, parse_workflow_args
from evals.eval_spec import EvalConfig, EvalTask, engine_supports_loglikelihood
from evals.lm_eval_command import (
    REDACTED,
    Refusal,
    api_root,
    build_command,
    choose_tokenizer,
)
from evals.records import (
    STATUS_ERROR,
    STATUS_FAILED,
    STATUS_PASSED,
    EvalRecord,
    ResultsError,
    accuracy_check,
    find_results_file,
    score_results,
)

STATE_FILE = "task_state.json"
OFFLINE_ENV = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")


def log(msg: str) -> None:
    print(f"[evals] {msg}", flush=True)


def served_model_name(spec: dict) -> str:
    return os.environ.get("TT_SERVED_MODEL_NAME") or spec.get("served_model_name") or spec["hf_model_repo"]


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the HF hub answers at all; if not, datasets must fail fast instead of retrying."""
    url = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/") + "/api/datasets?limit=1"
    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True  # it answered
    except (urllib.error.URLError, OSError, ValueError):
        return False


def child_env(task: EvalTask, offline_hub: bool) -> dict[str, str]:
    env = dict(os.environ)
    if task.offline or offline_hub:
        env.update({k: "1" for k in OFFLINE_ENV})
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def preflight(server_url: str, model: str, bearer: str | None, use_chat: bool) -> str | None:
    """One tiny request so a dead or misconfigured server fails every task in seconds, not retries."""
    root = api_root(server_url)
    if use_chat:
        url, body = root + "/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}]}
    else:
        url, body = root + "/v1/completions", {"prompt": "Hi"}
    body.update({"model": model, "max_tokens": 1, "temperature": 0})
    headers = {"Content-Type": "application/json"}
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            json.load(resp)
        return None
    except urllib.error.HTTPError as e:
        detail = e.read(300).decode(errors="replace").strip().replace("\n", " ")
        return f"server answered HTTP {e.code} to a 1-token request at {url}: {detail}"
    except (urllib.error.URLError, OSError, ValueError) as e:
        return f"server not answering at {url}: {e}"


# Matched on the final exception line only: the traceback also shows the raising source line.
_DATASET_RE = re.compile(
    r"^\w*(?:Error|Exception): (?:Couldn't reach '([^']+)'|Couldn't find [^']*'([^']+)')", re.MULTILINE
)
_EXC_RE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Refused|Exit)\w*): (.+)$")


def one_line_error(task: EvalTask, log_text: str, rc: int, offline: bool) -> str:
    """Boil a failed lm-eval run down to one line, naming the dataset when that is the cause."""
    found = list(_DATASET_RE.finditer(log_text))
    if found:
        m = found[-1]
        name = m.group(1) or m.group(2)
        how = " (HF hub offline: HF_DATASETS_OFFLINE=1)" if offline else ""
        return f"dataset {name} cannot be reached{how}; task {task.task_name} not run"
    for line in reversed(log_text.splitlines()):
        m2 = _EXC_RE.match(line.strip())
        if m2:
            return f"lm-eval exited {rc}: {m2.group(1)}: {m2.group(2)[:300]}"
    tail = [ln.strip() for ln in log_text.splitlines() if ln.strip()]
    return f"lm-eval exited {rc}: {tail[-1][:300] if tail else 'no output'}"


def _is_progress(line: str) -> bool:
    return "it/s]" in line or "s/it]" in line or "%|" in line


def scrub_secret(directory: Path, secret: str | None) -> None:
    """Replace a secret lm-eval echoed into its output files (it records its model_args verbatim)."""
    if not secret:
        return
    for path in directory.rglob("*.json*"):
        text = path.read_text(errors="replace")
        if secret in text:
            path.write_text(text.replace(secret, REDACTED))


def run_logged(
    argv: list[str], cwd: Path, env: dict[str, str], log_path: Path, secret: str | None = None
) -> tuple[int, str]:
    """Run lm-eval, keeping its whole output in ``log_path`` and echoing the non-progress lines.

    A log left by an earlier attempt is kept as ``<name>.<n>.log``: it may be the only account of
    why that attempt died.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    if log_path.exists():
        n = 1
        while log_path.with_suffix(f".{n}.log").exists():
            n += 1
        log_path.rename(log_path.with_suffix(f".{n}.log"))
    with log_path.open("w") as fh:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
        )
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip("\n").split("\r")[-1]
            if secret:
                line = line.replace(secret, REDACTED)
            fh.write(line + "\n")
            fh.flush()
            if line.strip() and not _is_progress(line):
                print(f"  | {line}", flush=True)
        rc = proc.wait()
    return rc, log_path.read_text(errors="replace")


def _read_state(task_dir: Path) -> dict:
    try:
        return json.loads((task_dir / STATE_FILE).read_text())
    except (OSError, ValueError):
        return {}


def finished_record(task_dir: Path, mode: str, limit: int | None) -> EvalRecord | None:
    """The task's record if an earlier run already finished it with the same mode and limit."""
    state = _read_state(task_dir)
    if state.get("mode") != mode or state.get("limit") != limit:
        return None
    try:
        rec = EvalRecord.read(task_dir / "eval_record.json")
    except (OSError, ValueError, TypeError):
        return None
    return rec if rec.is_finished else None


class TaskRunner:
    """Runs the configured tasks one by one; owns the paths and shared settings of one run."""

    def __init__(self, run_dir: Path, spec: dict, config: EvalConfig, server_url: str, mode: str, limit: int | None):
        self.run_dir, self.spec, self.config = run_dir, spec, config
        self.server_url, self.mode, self.limit_override = server_url, mode, limit
        self.evals_dir = run_dir / "evals"
        self.model_id = str(spec.get("model_id") or spec.get("model_name"))
        self.model = served_model_name(spec)
        self.bearer = os.environ.get("OPENAI_API_KEY") or None
        self.tokenizer_dir = os.environ.get("TT_TOKENIZER_DIR") or None
        self._hub_offline: bool | None = None

    def rel(self, path: Path) -> str:
        return str(path.resolve().relative_to(self.run_dir.resolve()))

    def hub_offline(self) -> bool:
        if os.environ.get("HF_DATASETS_OFFLINE") == "1":
            return True
        if self._hub_offline is None:
            self._hub_offline = not hub_reachable()
            if self._hub_offline:
                log("HF hub unreachable: datasets are loaded offline (HF_DATASETS_OFFLINE=1)")
        return self._hub_offline

    def _base_record(self, task: EvalTask, command: str) -> EvalRecord:
        s = task.score
        return EvalRecord(
            model_id=self.model_id,
            task=task.task_name,
            metric=(s.metric_keys[0] if s.score_func == "single" else f"mean({'; '.join(s.metric_keys)})") if s else "",
            mode=self.mode,
            lm_eval_command=command,
            published_score=s.published_score if s else None,
            published_source=s.published_source if s else None,
            reference_score=(s.mode_reference_scores.get(self.mode, s.reference_score) if s else None),
            reference_source=s.reference_source if s else None,
            tolerance=s.tolerance if s else 0.05,
        )

    def run_task(self, task: EvalTask, preflight_error: str | None) -> EvalRecord:
        task_dir = self.evals_dir / task.task_name
        limit = self.limit_override if self.limit_override is not None else task.limit_for(self.mode)
        done = finished_record(task_dir, self.mode, limit)
        if done is not None:
            log(f"{task.task_name}: already finished in this run directory ({done.status}); skipped")
            return done
        task_dir.mkdir(parents=True, exist_ok=True)
        (task_dir / STATE_FILE).write_text(json.dumps({"mode": self.mode, "limit": limit}) + "\n")
        rec = self._base_record(task, "")
        try:
            if preflight_error:
                raise Refusal(preflight_error)
            if task.needs_loglikelihood:
                ok, why = engine_supports_loglikelihood(self.spec)
                if not ok:
                    raise Refusal(f"refused: {task.task_name} needs loglikelihood and {why}")
            tok = choose_tokenizer(task, self.server_url, self.bearer, self.tokenizer_dir)
        except Refusal as e:
            rec.error = str(e)
            log(f"{task.task_name}: ERROR {rec.error}")
            return rec
        out_dir = task_dir / "lm_eval"
        (out_dir / "cache").mkdir(parents=True, exist_ok=True)
        inv = build_command(
            task,
            python=sys.executable,
            server_url=self.server_url,
            model_name=self.model,
            output_dir=out_dir,
            cache_path=out_dir / "cache" / "requests",
            tokenizer=tok,
            limit=limit,
        )
        rec.lm_eval_command = inv.display
        offline = task.offline or self.hub_offline()
        log(f"{task.task_name}: tokenizer={tok.backend} ({tok.reason}); limit={limit}")
        log(f"{task.task_name}: lm-eval command: {inv.display}")
        started = time.time()
        rc, text = run_logged(inv.argv, inv.cwd, child_env(task, offline), task_dir / "lm_eval.log", tok.auth_token)
        scrub_secret(out_dir, tok.auth_token)
        log(f"{task.task_name}: lm-eval exited {rc} after {time.time() - started:.0f} s")
        if rc != 0:
            rec.error = one_line_error(task, text, rc, offline)
            log(f"{task.task_name}: ERROR {rec.error}")
            return rec
        results_path = find_results_file(out_dir)
        if results_path is None or results_path.stat().st_mtime < started - 1:
            rec.error = "lm-eval exited 0 but wrote no results file"
            return rec
        rec.results_file = self.rel(results_path)
        if task.score is None:
            rec.status, rec.error = STATUS_ERROR, "task has no score spec"
            return rec
        try:
            value, stderr, samples = score_results(json.loads(results_path.read_text()), task.task_name, task.score)
        except (ResultsError, ValueError) as e:
            rec.error = str(e)
            return rec
        exact_mode = self.mode if limit == task.limit_for(self.mode) else None
        chk = accuracy_check(value, task.score, exact_mode, samples, ran_subset=limit is not None)
        rec.value, rec.stderr, rec.samples = value, stderr, samples
        rec.reference_score, rec.tolerance = chk.reference_score, chk.tolerance
        rec.ratio_to_reference, rec.ratio_to_published, rec.passed = (
            chk.ratio_to_reference,
            chk.ratio_to_published,
            chk.passed,
        )
        rec.status = STATUS_FAILED if chk.passed is False else STATUS_PASSED
        return rec

    def outputs(self, records: list[EvalRecord]) -> list[str]:
        out: list[str] = []
        for rec in records:
            task_dir = self.evals_dir / rec.task
            for p in [task_dir / "eval_record.json", task_dir / "lm_eval.log"]:
                if p.exists():
                    out.append(self.rel(p))
            if rec.results_file:
                out.append(rec.results_file)
                out += sorted(self.rel(p) for p in (self.run_dir / rec.results_file).parent.glob("samples_*.jsonl"))
        return out

    def write_outputs(self, records: list[EvalRecord]) -> None:
        path = self.evals_dir / "outputs.json"
        path.write_text(json.dumps({"outputs": self.outputs(records)}, indent=2) + "\n")


def _fmt(v: float | None, nd: int = 4) -> str:
    return "-" if v is None else f"{v:.{nd}f}"


def result_table(records: list[EvalRecord]) -> str:
    rows = [("task", "metric", "n", "value", "reference", "tol", "ratio", "status")]
    for r in records:
        ratio = r.ratio_to_reference if r.ratio_to_reference is not None else r.ratio_to_published
        basis = r.reference_score if r.reference_score is not None else r.published_score
        rows.append(
            (
                r.task,
                r.metric,
                "-" if r.samples is None else str(r.samples),
                _fmt(r.value),
                _fmt(basis),
                f"{r.tolerance:.3f}",
                _fmt(ratio, 3),
                r.status.upper(),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    errors = [f"  {r.task}: {r.error}" for r in records if r.error]
    return "\n".join(lines + (["errors:"] + errors if errors else []))


def select_tasks(config: EvalConfig, wanted: set[str] | None) -> list[EvalTask]:
    if not wanted:
        return list(config.tasks)
    unknown = wanted - {t.task_name for t in config.tasks}
    if unknown:
        raise ValueError(
            f"unknown tasks {sorted(unknown)} for {config.model_name}; have {[t.task_name for t in config.tasks]}"
        )
    return [t for t in config.tasks if t.task_name in wanted]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="Run lm-eval tasks against the served model.")
    ap.add_argument("--run-dir", required=True, type=Path)
    ap.add_argument("--model-spec-json", required=True, type=Path)
    ap.add_argument("--server-url", required=True)
    ap.add_argument("--workflow-args-json", default="{}")
    ap.add_argument(
        "--disable-trace-capture",
        action="store_true",
        help="accepted for the common contract; evals send no warm-up sweep (one 1-token preflight only)",
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        spec = json.loads(args.model_spec_json.read_text())
        wf_args = json.loads(args.workflow_args_json or "{}")
        if not isinstance(wf_args, dict):
            raise TypeError("--workflow-args-json must be a JSON object")
        mode, wanted, limit = parse_workflow_args({k: str(v) for k, v in wf_args.items()})
        name = spec.get("model_name")
        if name not in EVAL_CONFIGS:
            raise ValueError(f"no eval config for model_name {name!r}; models with evals: {sorted(EVAL_CONFIGS)}")
        config = EVAL_CONFIGS[name]
        tasks = select_tasks(config, wanted)
    except (OSError, ValueError, TypeError, KeyError) as e:
        print(f"[evals] bad input: {e}", file=sys.stderr, flush=True)
        return 2

    runner = TaskRunner(args.run_dir, spec, config, args.server_url, mode, limit)
    runner.evals_dir.mkdir(parents=True, exist_ok=True)
    log(
        f"model {config.model_name} (served as {runner.model}) at {args.server_url}; mode={mode}; "
        f"tasks={[t.task_name for t in tasks]}"
    )
    use_chat = all(t.model_class == "local-chat-completions" for t in tasks)
    pre = preflight(args.server_url, runner.model, runner.bearer, use_chat)
    if pre:
        log(f"preflight failed: {pre}")

    records: list[EvalRecord] = []
    for task in tasks:
        rec = runner.run_task(task, pre)
        rec.write(runner.evals_dir / task.task_name / "eval_record.json")
        records.append(rec)
        runner.write_outputs(records)
        log(f"{task.task_name}: {rec.status} value={_fmt(rec.value)} passed={rec.passed}")

    print(result_table(records), flush=True)
    ok = all(r.status == STATUS_PASSED for r in records)
    log("all tasks passed" if ok else "some tasks failed or errored")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
