"""``workload=agentic``: agent sessions, each turn sending the whole growing context, tool results included.

What a session is (why not plain multi_turn): an agent's conversation grows by more than the user's
messages. A turn either answers a user message or follows a tool call: the tool's result (often far longer
than what the user typed) is appended to the context, a think time passes (the tool running, or the user
reading), and the next request carries everything so far: the user messages, the server's own answers
(verbatim from its stream) and every tool result. So the prompt grows fast and in uneven steps, and a
server's prefix cache decides how much of it is prefilled again each turn.

Session file (JSONL, one session per line; ``sessions_file=PATH``, default the bundled
``examples/agentic_sessions.jsonl``, eight sessions of 3-5 turns drawn with tool results log-normally sized
around 160 tokens)::

    {"session": "s2", "osl": 24, "turns": [
        {"user_tokens": 48},
        {"tool": "read_file", "tool_result_tokens": 315, "think_s": 0.23},
        {"user_tokens": 40, "think_s": 0.8}]}

Each turn is one request: first its message is appended (``user_tokens`` of user text, or a ``tool``
result of ``tool_result_tokens``, cut from the local corpus), after ``think_s`` seconds (default 0) the
request asks for ``osl`` tokens (the session's, default the point's). ``sessions=N`` runs N sessions
(the file's, in order, repeated when it has fewer), ``max_concurrency`` of them at a time.

Figures (the point record's ``workload``): TTFT per turn index and per session, the prompt tokens of the
last turn and the tokens of a session (every prompt and answer), the tool calls made, and the server's
prefix-cache hit rate over the point (``contracts.server_state.prefix_cache_hit_rate``; null when the
server exposes no counters). Each request row carries ``session``, ``turn``, ``turns_planned`` and
``tool``, from which a requirements document's session targets are judged (``records.judge_requirements``).
A turn that fails ends its session (the next turn has no answer to carry): its remaining turns count as
not sent.
"""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

from contracts import prometheus as prom
from contracts.model_spec import ModelSpec
from contracts.server_state import prefix_cache_hit_rate
from benchmarking.client import RawTransport
from benchmarking.metrics import RequestRecord
from benchmarking.runner import STOP_SENDING_ON, new_event_loop
from benchmarking.workloads import Measured, WorkloadPoint, latency_stats, prompt_check
from benchmarking.workloads.corpus import Corpus
from benchmarking.workloads.multi_turn import _Conversations

BUNDLED = Path(__file__).with_name("examples") / "agentic_sessions.jsonl"
MAX_SESSIONS_FILE_BYTES = 8 * 1024 * 1024
_TURN_KEYS = {"user_tokens", "tool", "tool_result_tokens", "think_s"}


def read_sessions(path: str | Path) -> list[dict]:
    """The sessions of a session file, checked; ValueError naming the line on anything wrong."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"sessions_file {str(path)!r} is not a file")
    if path.stat().st_size > MAX_SESSIONS_FILE_BYTES:
        raise ValueError(f"sessions_file {path.name} is over {MAX_SESSIONS_FILE_BYTES} bytes")
    sessions = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"sessions_file {path.name} line {number}"
        try:
            session = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{where}: not JSON ({exc})") from None
        sessions.append(_checked_session(session, where))
    if not sessions:
        raise ValueError(f"sessions_file {path.name} holds no session")
    return sessions


def _whole(value, where: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{where} must be a whole number >= {minimum}, got {value!r}")
    return value


def _checked_session(session, where: str) -> dict:
    if not isinstance(session, dict) or not isinstance(session.get("turns"), list) or not session["turns"]:
        raise ValueError(f"{where}: a session is an object with a non-empty list of turns")
    turns = []
    for i, turn in enumerate(session["turns"]):
        at = f"{where} turn {i + 1}"
        if not isinstance(turn, dict) or set(turn) - _TURN_KEYS:
            raise ValueError(f"{at}: keys are {', '.join(sorted(_TURN_KEYS))}")
        if ("user_tokens" in turn) == ("tool_result_tokens" in turn):
            raise ValueError(f"{at}: give user_tokens or tool_result_tokens (one of them)")
        think = turn.get("think_s", 0)
        if isinstance(think, bool) or not isinstance(think, (int, float)) or not 0 <= think <= 600:
            raise ValueError(f"{at}: think_s must be seconds in 0..600")
        size = _whole(turn.get("user_tokens", turn.get("tool_result_tokens")), f"{at} tokens")
        turns.append({"tool": str(turn.get("tool") or "tool") if "tool_result_tokens" in turn else None,
                      "tokens": size, "think_s": float(think)})
    osl = session.get("osl")
    osl = None if osl is None else _whole(osl, f"{where} osl")
    return {"session": str(session.get("session") or where), "osl": osl, "turns": turns}


def points(spec: ModelSpec, bench) -> list[WorkloadPoint]:
    """One point: ``sessions`` sessions of the session file at the concurrency of ``points=`` (default 1)."""
    path = Path(bench.sessions_file) if bench.sessions_file else BUNDLED
    sessions = read_sessions(path)
    con = bench.points[0][2] if bench.points else 1
    osl = bench.points[0][1] if bench.points else 24
    return [session_point(sessions, bench.sessions, con, osl, "agentic", "" if path == BUNDLED else path.stem)]


def session_point(sessions: list[dict], count: int, concurrency: int, osl: int, name: str,
                  label: str = "") -> WorkloadPoint:
    """The point running ``count`` of ``sessions`` (repeated in order when the file has fewer)."""
    chosen = [sessions[i % len(sessions)] for i in range(count)]
    first = [s["turns"][0]["tokens"] for s in chosen]
    return WorkloadPoint(round(sum(first) / len(first)), osl, concurrency, count, source="agentic", workload="agentic",
                         data={"sessions": chosen, "name": name}, label=label)


class _Sessions(_Conversations):
    """multi_turn's runner with agent sessions: each turn appends a user message or a tool result."""

    async def conversation(self, c: int, slots: asyncio.Semaphore, transport: RawTransport) -> None:
        session = self.point.data["sessions"][c]
        osl = session["osl"] or self.point.osl
        async with slots:
            history: list[dict] = []
            for t, turn in enumerate(session["turns"]):
                if self.stop_reason:
                    return
                if t and turn["think_s"] > 0:
                    try:
                        await asyncio.wait_for(self.wake.wait(), turn["think_s"])
                    except asyncio.TimeoutError:
                        pass
                prompt = self.corpus.prompt(f"agentic:{self.ctx.bench.seed}:{c}:{t}", turn["tokens"])
                self.prompts.append(prompt)
                text = prompt.text if turn["tool"] is None else f"[{turn['tool']} result]\n{prompt.text}"
                history.append({"role": "user", "content": text})
                rec = RequestRecord(index=len(self.records), request_id=f"ag-{c}-{t}",
                                    prompt_len=sum(len(m["content"].split()) for m in history),
                                    requested_output_len=osl)
                rec.extra.update({"session": session["session"] + f"#{c}", "turn": t + 1,
                                  "turns_planned": len(session["turns"]), "tool": turn["tool"]})
                self.records.append(rec)
                await transport.send(rec, self._body(history, osl))
                if not rec.success:
                    if rec.error_class in STOP_SENDING_ON and transport.server_silent() and not self.stop_reason:
                        self.stop_reason = self.stopped_by = rec.error_class
                        self.wake.set()
                    return
                history.append({"role": "assistant", "content": rec.generated_text or ""})


def measure(ctx, point: WorkloadPoint, budget_s: float | None, pending_signal) -> Measured:
    cfg = ctx.client_config()
    cfg.keep_text = True  # the next turn carries the server's answer
    runner = _Sessions(cfg, ctx, point, Corpus(ctx.tokenizer))
    before = prom.fetch_metrics(ctx.base_url, ctx.api_key)
    loop = new_event_loop()
    try:
        run = loop.run_until_complete(runner.run(budget_s, pending_signal))
    finally:
        loop.close()
    after = prom.fetch_metrics(ctx.base_url, ctx.api_key) if before is not None else None
    planned = sum(len(s["turns"]) for s in point.data["sessions"])
    run.not_sent = planned - len(run.records)
    for r in run.records:  # the text was needed for the next turn, not for the request rows
        r.generated_text = None
    summary = {"kind": "agentic", "name": point.data["name"], "sessions": point.num_prompts,
               "endpoint": cfg.endpoint, "tool_calls": sum(1 for r in run.records if r.extra.get("tool")),
               "per_turn": _per_turn(run.records), "per_session": _per_session(run.records),
               "prefix_cache": prefix_cache_hit_rate(before, after)}
    tokens = [s["tokens"] for s in summary["per_session"] if s["tokens"] is not None]
    summary["tokens_per_session"] = round(sum(tokens) / len(tokens), 1) if tokens else None
    summary["sessions_passed"] = f"{sum(s['passed'] for s in summary['per_session'])}/{point.num_prompts}"
    return Measured(run=run, prompt_check=prompt_check(runner.prompts, ctx.tokenizer), summary=summary)


def _per_turn(records: list[RequestRecord]) -> list[dict]:
    out = []
    for t in sorted({r.extra["turn"] for r in records}):
        done = [r for r in records if r.extra["turn"] == t and r.success]
        inputs = [r.input_tokens for r in done if r.input_tokens is not None]
        out.append({"turn": t, "ttft": latency_stats([r.ttft for r in done if r.ttft is not None]),
                    "mean_input_tokens": round(sum(inputs) / len(inputs), 1) if inputs else None,
                    "failed": sum(1 for r in records if r.extra["turn"] == t and not r.success)})
    return out


def _per_session(records: list[RequestRecord]) -> list[dict]:
    sessions: dict[str, list[RequestRecord]] = {}
    for r in records:
        sessions.setdefault(r.extra["session"], []).append(r)
    out = []
    for name, turns in sessions.items():
        ttfts = [r.ttft * 1000.0 for r in turns if r.success and r.ttft is not None]
        counted = [(r.input_tokens or 0) + (r.output_tokens or 0) for r in turns if r.success]
        out.append({"session": name, "turns": len(turns), "planned": turns[0].extra["turns_planned"],
                    "passed": all(r.success for r in turns) and len(turns) == turns[0].extra["turns_planned"],
                    "mean_ttft_ms": round(sum(ttfts) / len(ttfts), 3) if ttfts else None,
                    "max_ttft_ms": round(max(ttfts), 3) if ttfts else None,
                    "last_prompt_tokens": turns[-1].input_tokens, "tokens": sum(counted) if counted else None})
    return out
