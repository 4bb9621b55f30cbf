"""Which API features an engine does not offer, and why (stdlib only).

A conformance case that needs a feature the engine cannot support is skipped with the reason
from this table, never failed: a missing feature is a fact about the engine, a wrong answer is a
defect. Anything not listed here is expected to work. Engines are the ``engine`` field of the
model spec; ``TT_TEST_UNSUPPORTED=feature[,feature]`` adds features for one run (a server
attached with --server-url whose engine is unknown, say).
"""
from __future__ import annotations

FEATURES = ("completions", "chat", "stream", "n", "seed", "logprobs", "echo", "ignore_eos", "min_tokens",
            "stop", "auth")

# engine -> {feature: why it is not offered}
UNSUPPORTED: dict[str, dict[str, str]] = {
    "vllm": {},
    "media": {  # tt-media-server's text routes refuse these with 400 by design
        "echo": "the media server's text routes refuse echo",
        "n": "the media server's text routes serve one choice per request (n=1)",
        "logprobs": "the media server's text routes do not compute logprobs",
    },
}


def unsupported(engine: str | None, extra: str | None = None) -> dict[str, str]:
    """feature -> reason for this engine, plus features named in ``extra`` (comma separated)."""
    out = dict(UNSUPPORTED.get(engine or "", {}))
    for name in filter(None, (x.strip() for x in (extra or "").split(","))):
        out.setdefault(name, "declared unsupported for this run (TT_TEST_UNSUPPORTED)")
    return out
