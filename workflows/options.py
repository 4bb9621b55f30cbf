"""run.py's options, each declared once: its flags, kind, default, help and which part of the tool owns it.

Why one table: the parser (``add_options``), ``run.py --help`` and the README's option list
(``markdown_table``, between the ``run.py options`` markers; a test keeps the README equal to it) are all
generated from it, so a flag cannot be added, renamed or re-documented in one place and not the others.
``python3 -m workflows.options`` rewrites the README's two generated blocks: these options, and the
``--workflow-args`` keys of ``contracts.workflow_keys`` (the tables the CLI checks keys against).
``owner`` names the part of the orchestrator that acts on the option, so a reader knows where to look.
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from contracts.model_spec import DeviceType, InferenceEngine
from contracts.workflow_args import COMMON_KEYS, WORKFLOW_ARGS, WorkflowType
from contracts.workflow_keys import COMPARE_ARGS, VERDICT_ARGS

WORKFLOWS = [w.value for w in WorkflowType]
DEVICES = [d.value for d in DeviceType]
AUTH_MODES = ("key", "jwt-gateway")
ENGINES = [e.value for e in InferenceEngine]
README_START = "<!-- run.py options: generated from workflows/options.py; do not edit by hand -->"
README_END = "<!-- end of run.py options -->"
KEYS_START = "<!-- workflow-args keys: generated from contracts/workflow_keys.py; do not edit by hand -->"
KEYS_END = "<!-- end of workflow-args keys -->"


@dataclass(frozen=True)
class Option:
    flags: tuple[str, ...]
    help: str
    owner: str  # selection, server, workflows, auth, output, catalog, host
    switch: bool = False  # present or not (store_true); otherwise it takes a value
    default: str | None = None
    default_env: str | None = None  # the default is this environment variable's value when it is set
    choices: tuple[str, ...] | None = None
    metavar: str | None = None

    @property
    def dest(self) -> str:
        return max(self.flags, key=len).lstrip("-").replace("-", "_")

    def parser_default(self) -> str | None:
        if self.default_env:
            return os.environ.get(self.default_env, self.default)
        return self.default

    def shown_default(self) -> str:
        if self.switch:
            return "off"
        if self.default_env:
            return f"${self.default_env} or {self.default}"
        return "" if self.default in (None, "") else str(self.default)


RUN_OPTIONS: tuple[Option, ...] = (
    Option(("--model",), "model name from the catalog (see --list)", "selection"),
    Option(("--workflow",), f"one of: {', '.join(WORKFLOWS)}", "selection"),
    Option(("--device",), f"one of: {', '.join(DEVICES)}", "selection"),
    Option(("--impl",), "model implementation (default: the catalog's default for the device)", "selection"),
    Option(("--engine",), f"inference engine filter: {', '.join(ENGINES)}", "selection"),
    Option(("--local-server",), "start the server as a process on this host", "server", switch=True),
    Option(("--docker-server",), "start the server in a Docker container", "server", switch=True),
    Option(("--fresh-server",), "with --local-server: start this run's own server even when a standby server of "
           "the same spec (left running by --workflow server) would be reused", "server", switch=True),
    Option(("--server-url",), "use an already running server at this base URL", "server"),
    Option(("--baseline-url",), "A/B: a running baseline server (same model) that this run's server is compared "
           "with, point by point in interleaved ABBA blocks with the same prompts (benchmarks, release); per metric "
           "the ratio's confidence interval against regression_tolerance decides: a regression exits 3, an undecided "
           "comparison 4", "server"),
    Option(("--baseline-vllm-args",), "A/B: start a second local server of the same spec with this JSON object "
           "laid over its vLLM args (null removes a key: '{\"speculative_config\": null}' is the spec without "
           "speculation), on another port, as the baseline (with --local-server; both are stopped at "
           "the end); decided as --baseline-url", "server", metavar="JSON"),
    Option(("--service-port",), "server port (default: $SERVICE_PORT or 8000)", "server", default="8000",
           default_env="SERVICE_PORT"),
    Option(("--bind-host",), "host address a Docker server publishes on", "server", default="127.0.0.1"),
    Option(("-it", "--interactive"), "with --docker-server --workflow server: a shell in the container "
           "(docker run -it), where you start the server", "server", switch=True),
    Option(("--workflow-args",), "'key=value ...' passed to the workflow (e.g. mode=smoke); evals pass other keys "
           "to lm-eval (batch_size=4 max_tokens=512), benchmarks as request body fields", "workflows", default=""),
    Option(("--disable-trace-capture",), "skip warm-up requests", "workflows", switch=True),
    Option(("--dev-mode",), "use the -dev- image variant", "server", switch=True),
    Option(("--override-docker-image",), "use this image instead of the spec's", "server"),
    Option(("--device-id",), "comma-separated Tenstorrent device ids, e.g. 0 or 0,1", "server"),
    Option(("--override-tt-config",), "JSON object merged key by key over the spec's TT config (null removes a key)",
           "catalog"),
    Option(("--spec-decode-metrics-url",), "the spec-decode counters of an external or multi-worker server: its "
           "/metrics URL(s), comma-separated, read before and after each benchmark point and summed over the workers "
           "(vllm:spec_decode_* or tt_spec_decode_*); the same as --workflow-args spec_decode_metrics_url=",
           "benchmarks", metavar="URL[,URL]"),
    Option(("--vllm-override-args",), "JSON object merged over the spec's vLLM args (null removes a key; e.g. "
           "'{\"speculative_config\": {\"method\": \"ngram\", \"num_speculative_tokens\": 3}}' speculates)",
           "catalog"),
    Option(("--reset-venvs",), "delete .workflow_venvs/ first", "host", switch=True),
    Option(("--model-spec-json",), "use this resolved ModelSpec JSON instead of the catalog", "catalog"),
    Option(("--print-docker-cmd",), "print the docker run command and exit", "server", switch=True),
    Option(("--no-auth",), "no bearer token; servers we launch do not enforce auth", "auth", switch=True),
    Option(("--auth",), "key (default): the server enforces the bearer key; jwt-gateway: a JWT-verifying gateway "
           "(own process) fronts the server we launch; clients send an HS256 JWT signed with JWT_SECRET (generated "
           "when unset)", "auth", default="key", choices=AUTH_MODES),
    Option(("--output-dir",), "run directory (default: workflow_logs/runs/<run_id>)", "output"),
    Option(("--compare-to",), "compare the results with a baseline run: the last run of the same spec on this host "
           "that ended with nothing failed (the default of release when one exists), or a run directory or a run "
           "id from the run history that finished on this host (else exit 2; --workflow-args compare_hosts=any "
           "for another host's); a regression beyond regression_tolerance fails the verdict (--workflow-args "
           "on_regression=warn only shows it)", "output", metavar="last|RUN_DIR|RUN_ID"),
    Option(("--ignore-verdict",), "write reports but exit 0 even when the release verdict is FAIL", "output",
           switch=True),
    Option(("--history",), "write DIR/history.html and DIR/history.json (--output-dir DIR): every release in the "
           "run history over time, each judged metric with its interval, the regression gate's marks and host "
           "changes; --model and --device narrow it; runs no workflow", "output", switch=True),
    Option(("--requirements", "--requirements-json"), "a requirements document (JSON or YAML, schema 2.x: README "
           "'Requirements'): the model, device, evals with reference scores, sweep points and agentic sessions with "
           "targets, each must or should; fills --model/--device/--workflow (release) and points=/tasks= when not "
           "given; each requirement is decided on its 95%% interval: a must not met exits 3, a must undecided 4",
           "selection", metavar="FILE"),
    Option(("--custom-weights",), "serve the weights in DIR (HF format) under their own name, inheriting --model's "
           "spec (engine, limits, eval config); the synthesised spec is the run's model_spec.json", "catalog",
           metavar="DIR"),
    Option(("--list",), "print the catalog and exit", "catalog", switch=True),
    Option(("--host-resources",), "print the Ray resources of this host as JSON for `ray start --resources` "
           "(one device resource per catalog device its Tenstorrent cards, GPUs and CPU can run, and one "
           "matrix_slot) and exit: release_matrix.py --executor ray runs each spec on a node offering its "
           "device", "host", switch=True),
    Option(("--format",), "with --list: 'table' (plain rows when piped) or 'json'", "catalog", default="table"),
)


def add_options(parser: argparse.ArgumentParser, options: tuple[Option, ...] = RUN_OPTIONS) -> None:
    """Declare every option of ``options`` on ``parser``."""
    for option in options:
        if option.switch:
            parser.add_argument(*option.flags, action="store_true", help=option.help)
            continue
        extra = {"choices": option.choices} if option.choices else {}
        if option.metavar:
            extra["metavar"] = option.metavar
        parser.add_argument(*option.flags, default=option.parser_default(), help=option.help, **extra)


def markdown_table(options: tuple[Option, ...] = RUN_OPTIONS) -> str:
    """The README's option list: one row per option (flags, default, owner, what it does)."""
    rows = ["| option | default | owner | what it does |", "|---|---|---|---|"]
    for option in options:
        flags = ", ".join(f"`{flag}`" + ("" if option.switch else f" {option.metavar or 'VALUE'}")
                          for flag in option.flags)
        shown = option.shown_default()
        default = f"`{shown}`" if shown and shown != "off" else shown
        text = option.help.replace("%%", "%").replace("|", "\\|")  # argparse's help escapes % as %%
        rows.append(f"| {flags} | {default} | {option.owner} | {text} |")
    return "\n".join(rows)


def readme_block() -> str:
    return f"{README_START}\n{markdown_table()}\n{README_END}"


def _keys_table(keys: dict[str, str]) -> list[str]:
    rows = ["| key | what it does |", "|---|---|"]
    rows += [f"| `{key}` | {text.replace('|', chr(92) + '|')} |" for key, text in keys.items()]
    return rows


def workflow_args_markdown() -> str:
    """The README's ``--workflow-args`` keys: one table per workflow, from the tables the CLI checks keys against
    (``contracts.workflow_keys``), so the documented keys are the accepted ones."""
    every_report = {**COMPARE_ARGS, **VERDICT_ARGS}
    lines = [f"Every workflow takes {', '.join(f'`{k}`' for k in sorted(COMMON_KEYS))}; every workflow whose run "
             "ends with a report (all but `server` and `deploy`) also takes:", "", *_keys_table(every_report)]
    for workflow, keys in WORKFLOW_ARGS.items():
        own = {k: v for k, v in keys.items() if k not in every_report and k not in COMMON_KEYS}
        if own:
            lines += ["", f"`--workflow {workflow.value}`:", "", *_keys_table(own)]
    lines += ["", "`--workflow release` takes the keys of every workflow it runs."]
    return "\n".join(lines)


def keys_readme_block() -> str:
    return f"{KEYS_START}\n{workflow_args_markdown()}\n{KEYS_END}"


def rewrite_readme(readme: str) -> str:
    """``readme`` with both generated blocks replaced by what the declarations say now."""
    for start, end, block in ((README_START, README_END, readme_block()),
                              (KEYS_START, KEYS_END, keys_readme_block())):
        head, tail = readme.index(start), readme.index(end) + len(end)
        readme = readme[:head] + block + readme[tail:]
    return readme


if __name__ == "__main__":  # python3 -m workflows.options: regenerate README.md's two generated blocks
    from contracts import REPO_ROOT

    path = REPO_ROOT / "README.md"
    path.write_text(rewrite_readme(path.read_text()))
    print(f"rewrote the generated option and key lists of {path}")
