"""The server's own words for why it failed: the last exception line of its log.

Why: when an engine dies or starts answering 500 in the middle of a run, the client steps only see
the symptom (a closed connection, ``http_5xx``, an eval that stopped). The cause is in the server's
log (process or container), often a traceback hundreds of lines up. The run's closing lines quote
that one line with the log's path, so the user reads ``InvalidCxxCompiler: No working C++ compiler
found`` instead of "the server exited (code 0)".

Stdlib only. Log lines carry prefixes (vLLM's ``(EngineCore_DP0 pid=7) ERROR 11-22 21:50:01
[core.py:710] ``, the media server's ``2026-11-22 21:50:01,123 worker-0 ERROR ``); they are stripped
before a line is matched, so the quoted line is the exception itself.
"""

from __future__ import annotations

import re
from pathlib import Path

SCAN_BYTES = 4 << 20  # the end of a long log is where the failure is; access logs can be large

_PREFIXES = (
    re.compile(r"^\([\w.-]+ pid=\d+\)\s*"),                                        # vLLM process tag
    re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+\[[^\]]*\]\s*"),
    re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?\s+[\w.-]+\s+(?:ERROR|CRITICAL)\s+"),
    re.compile(r"^(?:ERROR|CRITICAL):\s+"),                                          # uvicorn
)
# A traceback's last line: a dotted class name ending like an exception, then ': message' or nothing.
_EXCEPTION = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Fault|Failure|Timeout|Exhausted)"
    r"(?::\s+\S.*)?$")
# A server that refuses to start says so in one line of its own.
_CANNOT_START = re.compile(r"^[\w.-]+: cannot start: \S.*$")
# Lines that only point elsewhere ("see the stack trace above") or report the shutdown, not its cause.
_DEFERRING = re.compile(r"EngineDeadError|CancelledError|KeyboardInterrupt|SystemExit|GeneratorExit"
                        r"|see (?:the )?stack trace|root cause", re.IGNORECASE)
MAX_LINE_CHARS = 300


def _content(line: str) -> str:
    text = line.strip()
    for prefix in _PREFIXES:
        text = prefix.sub("", text, count=1)
    return text.strip()


def error_lines(text: str) -> list[str]:
    """Every exception (or cannot-start) line of a log, prefixes stripped, in order."""
    found = []
    for line in text.splitlines():
        content = _content(line)
        if _EXCEPTION.match(content) or _CANNOT_START.match(content):
            found.append(content)
    return found


def last_error(text: str) -> str | None:
    """The line that says why: the last exception that is not only a pointer to an earlier one."""
    found = error_lines(text)
    if not found:
        return None
    causes = [line for line in found if not _DEFERRING.search(line)]
    line = (causes or found)[-1]
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS - 3] + "..."


def _read_end(path: Path) -> str:
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(0, size - SCAN_BYTES))
        return fh.read().decode("utf-8", "replace")


def last_error_in(path: Path | None) -> str | None:
    """``last_error`` of a log file; None when the file is missing, unreadable or has no error."""
    if path is None:
        return None
    try:
        return last_error(_read_end(Path(path)))
    except OSError:
        return None


def quote_server_error(path: Path | None) -> str | None:
    """One closing line: 'server error: <the line> (log: <path>)'; None when the log names none."""
    line = last_error_in(path)
    return f"server error: {line} (log: {path})" if line else None
