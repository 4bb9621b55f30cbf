"""Why did an lm-eval task fail? One stable line from its log, for the record and the console.

lm-eval's own last line is a poor summary: with requests in flight, whichever coroutine fails
last decides it (``ClientResponseError: 500``, ``Can not write request body``, ``Session is
closed``), so the same fault read differently from run to run. Causes are therefore tried from the
most specific to the least, and each is worded without counts or timings:
1. the server is gone (checked by the caller after the failure): ``cannot connect to <url>``;
2. a dataset could not be loaded: it is named;
3. the server answered HTTP errors: the statuses and the endpoint path are named (not the port,
   which differs between runs);
4. the connection broke: the kind of break is named;
5. otherwise the final exception line of the log.

Stdlib only.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from evals.eval_spec import EvalTask

# Matched on the final exception line only: the traceback also shows the raising source line.
_DATASET_RE = re.compile(
    r"^\w*(?:Error|Exception): (?:Couldn't reach '([^']+)'|Couldn't find [^']*'([^']+)')", re.MULTILINE
)
_EXC_RE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Refused|Exit)\w*): (.+)$")
# lm-eval's warning for a failed API request, and aiohttp's ClientResponseError text.
_HTTP_RE = re.compile(r"Status code: (\d{3})\b|ClientResponseError\W+(\d{3}), message=|\bstatus=(\d{3})\b")
_CONNECTION_ERRORS = ("ClientConnectorError", "ServerDisconnectedError", "ClientOSError", "ClientPayloadError",
                      "ConnectionResetError", "ConnectionRefusedError", "RemoteDisconnected")
_TIMEOUT_ERRORS = ("ServerTimeoutError", "asyncio.TimeoutError", "TimeoutError", "ReadTimeout")


def http_statuses(log_text: str) -> list[int]:
    """Distinct HTTP error statuses (>= 400) the log says the server answered, ascending."""
    codes = {int(next(g for g in m.groups() if g)) for m in _HTTP_RE.finditer(log_text)}
    return sorted(c for c in codes if c >= 400)


def dataset_error(task: EvalTask, log_text: str, offline: bool) -> str | None:
    found = list(_DATASET_RE.finditer(log_text))
    if not found:
        return None
    m = found[-1]
    name = m.group(1) or m.group(2)
    how = " (HF hub offline: HF_DATASETS_OFFLINE=1)" if offline else ""
    return f"dataset {name} cannot be reached{how}; task {task.task_name} not run"


def last_exception(log_text: str, rc: int) -> str:
    for line in reversed(log_text.splitlines()):
        m = _EXC_RE.match(line.strip())
        if m:
            return f"lm-eval exited {rc}: {m.group(1)}: {m.group(2)[:300]}"
    tail = [ln.strip() for ln in log_text.splitlines() if ln.strip()]
    return f"lm-eval exited {rc}: {tail[-1][:300] if tail else 'no output'}"


def summarize_failure(
    task: EvalTask,
    log_text: str,
    rc: int,
    *,
    offline: bool,
    endpoint: str,
    server_gone: str | None = None,
) -> str:
    """One line for a task whose lm-eval run failed; see the module docstring for the order."""
    if server_gone:
        return f"{server_gone}; the server stopped answering during task {task.task_name}"
    dataset = dataset_error(task, log_text, offline)
    if dataset:
        return dataset
    codes = http_statuses(log_text)
    if codes:
        statuses = ", ".join(f"HTTP {c}" for c in codes)
        return (f"server answered {statuses} to lm-eval's {urlsplit(endpoint).path or endpoint} requests; "
                f"task {task.task_name} gave up after {task.max_retries} attempts per request")
    broken = [name for name in _CONNECTION_ERRORS if name in log_text]
    if broken:
        return f"connection to {endpoint} broken during task {task.task_name} ({broken[0]})"
    if any(name in log_text for name in _TIMEOUT_ERRORS):
        return f"no answer from {endpoint} within {task.timeout_s} s during task {task.task_name}"
    return last_exception(log_text, rc)
