"""Evals client workflow: run lm-eval against the served model and gate on accuracy.

Contract (docs/architecture.md, "Client workflow contract"):

    python -m evals.run_evals --run-dir RUN_DIR --model-spec-json PATH --server-url URL \
        --workflow-args-json '{"mode": "smoke"}' [--disable-trace-capture]

Per task it writes ``RUN_DIR/evals/<task>/eval_record.json`` (``EvalRecord``), lm-eval's own
output under ``RUN_DIR/evals/<task>/lm_eval/`` (results + per-sample logs + a response cache), and
the full lm-eval log as ``lm_eval.log``. ``RUN_DIR/evals/outputs.json`` lists the result files.
Exit 0: every task ran and none failed its accuracy check; 1: some task failed or errored (the
others still ran, unless the server was gone); 2: bad input; 130/143: interrupted (finished
tasks' records are kept).

Why one lm-eval process for all tasks (``evals/lm_eval_worker.py``): importing lm-eval costs more
than a smoke task. Each task still has its own command, record, log and cache, so a crash or a
missing dataset costs one task, a rerun into the same run directory skips finished tasks, and an
interrupted one resumes from its request cache (lm-eval ``--use_cache``).

Why the server is checked before every task: lm-eval retries each request and then fails with
whatever the last aiohttp error was (``Session is closed``...). A dead server must end the run
at once with "cannot connect to <url>", and a flaky one must be named by its HTTP status, the
same words every time.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from contracts.client_main import BadInput, ClientInvocation, add_baseline_arguments, run_client
from contracts.model_spec import ModelSpec, read_known_issues
from evals import sequential_eval
from evals.diagnosis import summarize_failure
from evals.eval_config import EVAL_CONFIGS, parse_workflow_args
from evals.eval_spec import (
    LOCAL_CHAT_COMPLETIONS,
    WORKFLOW_ARG_KEYS,
    EvalConfig,
    EvalTask,
    InProcessScore,
    engine_supports_loglikelihood,
)
from evals.lm_eval_command import (
    REDACTED,
    Refusal,
    build_command,
    choose_tokenizer,
    endpoint_url,
)
from evals.lm_eval_results import (
    ResultsError,
    find_results_file,
    item_scores,
    newest_samples_file,
    score_results,
)
from evals.lm_eval_session import LmEvalSessions, WorkerError
from evals.passthrough import apply_passthrough, passthrough_args
from evals.references import task_config_sha256
from evals.result_table import fmt, result_table
from evals.server_check import check_server
from records.evals import (
    SERVING_SUSPECTS,
    STATUS_ERROR,
    STATUS_INCONCLUSIVE,
    STATUS_PASSED,
    EvalRecord,
    accuracy_check,
    serving_check,
)

STATE_FILE = "task_state.json"
OFFLINE_ENV = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
#: Deadline for one task's lm-eval run, by mode (seconds): far above an honest run on a small CPU,
#: so only a task that would never end meets it.
TASK_DEADLINE_S = {"smoke": 900.0, "ci": 3600.0, "full": 6 * 3600.0}


def log(msg: str) -> None:
    print(f"[evals] {msg}", flush=True)


def served_model_name(spec: ModelSpec) -> str:
    return os.environ.get("TT_SERVED_MODEL_NAME") or spec.served_model_name or spec.hf_model_repo


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
    """One tiny request, retried with backoff: a dead server fails every task in seconds, and one
    transient error does not fail any."""
    return check_server(server_url, model, bearer, use_chat, log=log)


def scrub_secret(directory: Path, secret: str | None) -> None:
    """Replace a secret lm-eval echoed into its output files (it records its model_args verbatim)."""
    if not secret:
        return
    for path in [*directory.rglob("*.json*"), *directory.rglob("*.log")]:
        text = path.read_text(errors="replace")
        if secret in text:
            path.write_text(text.replace(secret, REDACTED))


def fresh_log(log_path: Path) -> Path:
    """Keep a log left by an earlier attempt as ``<name>.<n>.log``: it may be the only account of
    why that attempt died."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    if log_path.exists():
        n = 1
        while log_path.with_suffix(f".{n}.log").exists():
            n += 1
        log_path.rename(log_path.with_suffix(f".{n}.log"))
    return log_path


def _read_state(task_dir: Path) -> dict:
    try:
        return json.loads((task_dir / STATE_FILE).read_text())
    except (OSError, ValueError):
        return {}


def finished_record(task_dir: Path, mode: str, limit: int | None,
                    passthrough: dict[str, str] | None = None) -> EvalRecord | None:
    """The task's record if an earlier run already finished it with the same mode, limit and lm-eval settings."""
    state = _read_state(task_dir)
    if state.get("mode") != mode or state.get("limit") != limit:
        return None
    if state.get("passthrough", {}) != (passthrough or {}):
        return None
    try:
        rec = EvalRecord.read(task_dir / "eval_record.json")
    except (OSError, ValueError, TypeError):
        return None
    return rec if rec.is_finished else None


class TaskRunner:
    """Runs the configured tasks one by one; owns the paths and shared settings of one run."""

    def __init__(self, run_dir: Path, spec: ModelSpec, config: EvalConfig, server_url: str, mode: str,
                 limit: int | None, sessions: LmEvalSessions | None = None):
        self.run_dir, self.spec, self.config = run_dir, spec, config
        self.server_url, self.mode, self.limit_override = server_url, mode, limit
        self.evals_dir = run_dir / "evals"
        self.model_id = spec.model_id or spec.model_name
        self.model = served_model_name(spec)
        self.bearer = os.environ.get("OPENAI_API_KEY") or None
        self.tokenizer_dir = os.environ.get("TT_TOKENIZER_DIR") or None
        self._hub_offline: bool | None = None
        self.sessions = sessions if sessions is not None else LmEvalSessions(sys.executable, self.evals_dir)
        self.use_chat = all(t.model_class == LOCAL_CHAT_COMPLETIONS for t in config.tasks)
        self.passthrough: dict[str, str] = {}  # --workflow-args keys lm-eval gets (evals.passthrough)
        #: Set once the server stopped answering: no further task is started against it.
        self.server_error: str | None = None

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

    def check_server(self) -> str | None:
        """Before a task (and after a failed one): does the server still answer? Sticky once it does not."""
        if self.server_error is None:
            self.server_error = preflight(self.server_url, self.model, self.bearer, self.use_chat)
            if self.server_error:
                log(f"server check failed: {self.server_error}")
        return self.server_error

    def limit_for(self, task: EvalTask) -> int | None:
        return self.limit_override if self.limit_override is not None else task.limit_for(self.mode)

    def finished(self, task: EvalTask) -> EvalRecord | None:
        return finished_record(self.evals_dir / task.task_name, self.mode, self.limit_for(task), self.passthrough)

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

    def not_run(self, task: EvalTask, why: str) -> EvalRecord:
        rec = self._base_record(task, "")
        rec.error = why
        log(f"{task.task_name}: ERROR {why}")
        return rec

    def run_task(self, task: EvalTask) -> EvalRecord:
        task_dir = self.evals_dir / task.task_name
        limit = self.limit_for(task)
        done = self.finished(task)
        if done is not None:
            log(f"{task.task_name}: already finished in this run directory ({done.status}); skipped")
            return done
        task_dir.mkdir(parents=True, exist_ok=True)
        state = {"mode": self.mode, "limit": limit, **({"passthrough": self.passthrough} if self.passthrough else {})}
        (task_dir / STATE_FILE).write_text(json.dumps(state) + "\n")
        if self.check_server():
            return self.not_run(task, f"not run: {self.server_error}")
        rec = self._base_record(task, "")
        try:
            if task.needs_loglikelihood:
                ok, why = engine_supports_loglikelihood(self.spec.engine.value)
                if not ok:
                    raise Refusal(f"refused: {task.task_name} needs loglikelihood and {why}")
            tok = choose_tokenizer(task, self.server_url, self.bearer, self.tokenizer_dir)
        except Refusal as e:
            return self.not_run(task, str(e))
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
        log_path = fresh_log(task_dir / "lm_eval.log")
        log(f"{task.task_name}: tokenizer={tok.backend} ({tok.reason}); limit={limit}; log {self.rel(log_path)}")
        started = time.time()
        reference = self.paired_reference(task)
        if reference is not None:
            return self._run_sequential(task, rec, tok, out_dir, log_path, child_env(task, offline), reference)
        rc, text, cause = self._run_lm_eval(task, inv, child_env(task, offline), log_path)
        scrub_secret(task_dir, tok.auth_token)
        log(f"{task.task_name}: lm-eval exited {rc} after {time.time() - started:.0f} s")
        if rc != 0:
            return self._failed(task, rec, rc, text, cause, offline, log_path)
        return self._score(task, rec, out_dir, started, limit)

    def _failed(self, task: EvalTask, rec: EvalRecord, rc: int, text: str, cause: str | None, offline: bool,
                log_path: Path) -> EvalRecord:
        self.server_error = None  # was it the server? ask again (with retries) before judging
        self.check_server()
        rec.error = (cause if cause and not self.server_error else
                     summarize_failure(task, text, rc, offline=offline,
                                       endpoint=endpoint_url(self.server_url, task.model_class),
                                       server_gone=self.server_error))
        log(f"{task.task_name}: ERROR {rec.error} (details: {self.rel(log_path)})")
        return rec

    def paired_reference(self, task: EvalTask) -> InProcessScore | None:
        """The in-process per-item scores of the task's whole set, when this run can be paired with them
        item by item (``evals.sequential_eval``): a single-metric score, the task's files unchanged since
        the measurement, no ``limit`` override or lm-eval settings passed through (other items or
        settings are not the measured ones). None: one fixed pass, judged as before."""
        score = task.score
        if score is None or score.score_func != "single" or self.limit_override is not None or self.passthrough:
            return None
        ref = score.in_process_scores.get("full")
        if ref is None or not ref.items:
            return None
        if task.offline and task_config_sha256(task.task_name) != ref.task_config_sha256:
            log(f"{task.task_name}: the task changed since its in-process scores were measured; one fixed pass")
            return None
        return ref

    def _run_sequential(self, task: EvalTask, rec: EvalRecord, tok, out_dir: Path, log_path: Path,
                        env: dict[str, str], reference: InProcessScore) -> EvalRecord:
        """Score the task chunk by chunk (lm-eval ``--limit`` one chunk more each pass; its request cache
        answers the items already scored) until every check is decided, every item is scored, or the
        mode's budget is spent (``evals.sequential_eval``)."""
        assert task.score is not None
        budget, metric = self.limit_for(task), task.score.metric_keys[0]
        target = sequential_eval.full_set_target(task.score)
        scored, looks, started = 0, 0, time.time()
        while True:
            limit = sequential_eval.next_limit(scored, budget, reference.samples)
            inv = build_command(task, python=sys.executable, server_url=self.server_url, model_name=self.model,
                                output_dir=out_dir, cache_path=out_dir / "cache" / "requests", tokenizer=tok,
                                limit=limit)
            rec.lm_eval_command = inv.display
            pass_started = time.time()
            rc, text, cause = self._run_lm_eval(task, inv, env, log_path)
            scrub_secret(out_dir.parent, tok.auth_token)
            if rc != 0:
                return self._failed(task, rec, rc, text, cause, task.offline or self.hub_offline(), log_path)
            try:
                samples_file = newest_samples_file(out_dir, task.task_name)
                if samples_file is None or samples_file.stat().st_mtime < pass_started - 1:
                    raise ResultsError("lm-eval exited 0 but wrote no samples file")
                served = item_scores(samples_file, metric)
                state = sequential_eval.look(served, target, reference.items)
            except (ResultsError, ValueError, OSError) as e:
                rec.error = str(e)
                return rec
            looks += 1
            reason = sequential_eval.stop_reason(state, budget)
            log(f"{task.task_name}: look {looks} after {time.time() - started:.0f} s: "
                f"{sequential_eval.describe(state, looks, reason or 'not yet')}")
            if reason is not None or len(served) <= scored:
                break
            scored = len(served)
        rec = self._score(task, rec, out_dir, pass_started, limit, serving=False)
        if rec.value is not None:
            sequential_eval.apply_look(rec, state, looks, reason or sequential_eval.STOP_BUDGET, task.score,
                                       reference, suspects=serving_suspects(task))
        return rec

    def _run_lm_eval(self, task: EvalTask, inv, env: dict[str, str], log_path: Path) -> tuple[int, str, str | None]:
        """Run the task in the shared lm-eval worker: (exit code, the task's log text, and the cause
        when it is already known without reading the log: a missed deadline or a worker that never started)."""
        deadline = TASK_DEADLINE_S.get(self.mode, TASK_DEADLINE_S["full"])
        try:
            outcome = self.sessions.run(task.task_name, inv.cli_args, inv.cwd, env, log_path, deadline,
                                        builtin_tasks=not task.offline)
        except WorkerError as e:
            return 1, f"{e}\n", str(e)
        text = log_path.read_text(errors="replace") if log_path.exists() else ""
        if outcome.timed_out:
            return outcome.rc or 1, text, (f"lm-eval did not finish task {task.task_name} within its {deadline:.0f} s "
                                           f"deadline (mode {self.mode}); stopped")
        if outcome.worker_died:
            text += f"\nthe lm-eval process exited with {outcome.rc} during task {task.task_name}\n"
            return outcome.rc or 1, text, None
        return outcome.rc, text, None

    def _score(self, task: EvalTask, rec: EvalRecord, out_dir: Path, started: float, limit: int | None,
               serving: bool = True) -> EvalRecord:
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
        rec.value, rec.stderr, rec.samples = value, stderr, samples
        rec.apply(accuracy_check(value, task.score, exact_mode, samples, stderr))
        if not serving:
            return rec
        rec.apply_serving(serving_check(value, samples, task.score.in_process_scores.get(exact_mode or "full"),
                                        task_config_sha256=task_config_sha256(task.task_name) if task.offline else None,
                                        suspects=serving_suspects(task)))
        if rec.serving_decision:
            log(f"{task.task_name}: served vs in-process {rec.serving_decision.upper()}: {rec.serving_detail}")
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
        invocation = ClientInvocation("evals", self.run_dir, self.spec, self.server_url, {})
        invocation.write_outputs(self.outputs(records))


def serving_suspects(task: EvalTask) -> str:
    """What a serving bug in this task most likely is, by what the task asks of the server."""
    kind = "loglikelihood" if task.needs_loglikelihood else "chat" if task.apply_chat_template else "generate"
    return SERVING_SUSPECTS[kind]


def select_tasks(config: EvalConfig, wanted: set[str] | None) -> list[EvalTask]:
    if not wanted:
        return list(config.tasks)
    unknown = wanted - {t.task_name for t in config.tasks}
    if unknown:
        raise ValueError(
            f"unknown tasks {sorted(unknown)} for {config.model_name}; have {[t.task_name for t in config.tasks]}"
        )
    return [t for t in config.tasks if t.task_name in wanted]


def main(argv: list[str] | None = None) -> int:
    # --disable-trace-capture is accepted for the common contract: evals send no warm-up sweep.
    return run_client("evals", "Run lm-eval tasks against the served model.", run, argv, server_required=True,
                      raise_on_signal=Terminated, add_arguments=add_baseline_arguments)


def run(inv: ClientInvocation) -> int:
    spec = inv.spec
    try:
        mode, wanted, limit = parse_workflow_args(inv.workflow_args)
        if spec.model_name not in EVAL_CONFIGS:
            raise ValueError(f"no eval config for model_name {spec.model_name!r}; models with evals: "
                             f"{sorted(EVAL_CONFIGS)}")
        config = EVAL_CONFIGS[spec.model_name]
        extra = passthrough_args(inv.workflow_args, WORKFLOW_ARG_KEYS)
        tasks = [apply_passthrough(t, extra) for t in select_tasks(config, wanted)]
    except (ValueError, TypeError, KeyError) as e:
        raise BadInput(str(e)) from None

    runner = TaskRunner(inv.run_dir, spec, config, inv.server_url, mode, limit)
    runner.passthrough = extra
    if extra:
        log(f"passed through to lm-eval: {' '.join(f'{k}={v}' for k, v in extra.items())}")
    runner.use_chat = all(t.model_class == LOCAL_CHAT_COMPLETIONS for t in tasks)
    runner.evals_dir.mkdir(parents=True, exist_ok=True)
    log(
        f"model {config.model_name} (served as {runner.model}) at {inv.server_url}; mode={mode}; "
        f"tasks={[t.task_name for t in tasks]}"
    )
    records: list[EvalRecord] = []
    try:
        for task in tasks:
            try:
                rec = runner.run_task(task)
            except (KeyboardInterrupt, Terminated):
                name = inv.stop.name or "SIGINT"
                rec = runner.not_run(task, f"interrupted by {name}; a rerun resumes it from its request cache")
                _keep(runner, records, task, rec)
                print(result_table(records), flush=True)
                log(f"interrupted ({name}); the records of {len(records)} task(s) are kept")
                return inv.stop.exit_code if inv.stop.requested else 128 + int(signal.SIGINT)
            _keep(runner, records, task, rec)
            _compare_with_baseline(runner, inv, task, rec)
    finally:
        runner.sessions.close()
    if runner.sessions.import_s:
        log(f"lm-eval imported in {', '.join(f'{s:.0f} s' for s in runner.sessions.import_s)} (one process per "
            f"dataset environment)")
    print(result_table(records), flush=True)
    waived = waived_tasks(spec)
    for r in records:
        if r.status != STATUS_PASSED and r.task in waived:
            log(f"task {r.task} {r.status} but is a known issue of this model: {waived[r.task]}")
    # An inconclusive task does not fail the step: the release verdict decides what undecided means.
    ok = all(r.status in (STATUS_PASSED, STATUS_INCONCLUSIVE) or r.task in waived for r in records)
    undecided = [r.task for r in records if r.status == STATUS_INCONCLUSIVE]
    if undecided:
        log(f"inconclusive (the 95% interval holds the target; more samples decide): {', '.join(undecided)}")
    log("all tasks passed (known issues waived)" if ok and any(r.task in waived for r in records)
        else "no task failed" if ok else "some tasks failed or errored")
    return 0 if ok else 1


def waived_tasks(spec: ModelSpec) -> dict[str, str]:
    """Tasks the spec's ``known_issues`` waive for evals (task -> reason), read as the release verdict
    reads them: a waived task is still run and recorded, but does not fail the step."""
    issues, _ = read_known_issues([dataclasses.asdict(k) for k in spec.known_issues])
    return {i.task: i.reason for i in issues if i.workflow == "evals"}


def _compare_with_baseline(runner: TaskRunner, inv: ClientInvocation, task: EvalTask, rec: EvalRecord) -> None:
    """Evals A/B: the task's items on the baseline server too, decided on the pairs (``evals.ab_evals``)."""
    options = inv.options
    url = str(getattr(options, "baseline_url", "") or "").rstrip("/")
    if not url:
        return
    from evals.ab_evals import compare_task

    asked = str(getattr(options, "baseline_label", "") or url)
    env = child_env(task, task.offline or runner.hub_offline())
    result = compare_task(runner, task, rec, url, asked, float(options.baseline_tolerance), env)
    log(f"{task.task_name}: A/B against {asked}: {result.detail()}")


class Terminated(Exception):
    """SIGINT/SIGTERM, raised in the main thread so the lm-eval worker is stopped and records are kept."""


def _keep(runner: TaskRunner, records: list[EvalRecord], task: EvalTask, rec: EvalRecord) -> None:
    rec.write(runner.evals_dir / task.task_name / "eval_record.json")
    records.append(rec)
    runner.write_outputs(records)
    log(f"{task.task_name}: {rec.status} value={fmt(rec.value)} passed={rec.passed}")


if __name__ == "__main__":
    raise SystemExit(main())
