"""``MediaPoint``: the typed record of one media benchmark point (``tt-media-point/1``), stdlib only.

Written as ``RUN_DIR/benchmarks/media_point_{kind}_con-{c}.json`` by the media benchmarks client
and read back by the report (which judges ``figures`` against the spec's targets with the same
tier rules as LLM points). Each field's description is the report legend.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contracts.typed_record import TypedRecord, described
from records.bench import PointSampling
from records.reconciliation import Reconciliation

SCHEMA = "tt-media-point/1"

# Which client variant a model spec needs, from its ``model_type``. Why by ``model_type``: the
# engine says who serves the model, the kind says what a request looks like. The media server also
# serves text models, and those are measured like any LLM.
IMAGE, SPEECH, CNN, EMBEDDING, VISION = "image", "speech", "cnn", "embedding", "vision"
#: Kinds with a media client variant; any other model_type (LLM, text, ...) uses the LLM clients.
#: vision: chat with image_url parts (a vision-language model), measured by its images and image tokens.
MEDIA_KINDS = (IMAGE, SPEECH, CNN, EMBEDDING, VISION)
_ALIASES = {"audio": SPEECH, "asr": SPEECH, "classification": CNN, "embeddings": EMBEDDING, "images": IMAGE,
            "vlm": VISION, "image-text-to-text": VISION}


def kind_of(model_type: str | None) -> str | None:
    """The media kind of a spec's ``model_type`` (aliases such as audio -> speech), or None for LLM/text.
    Anything but a string (a whole spec) is a TypeError: it would otherwise read as "no media kind"."""
    if model_type is not None and not isinstance(model_type, str):
        raise TypeError(f"kind_of takes a model_type string, not {type(model_type).__name__}")
    kind = str(model_type or "").strip().lower()
    kind = _ALIASES.get(kind, kind)
    return kind if kind in MEDIA_KINDS else None


#: The headline figures a point may carry, by name; a target in the performance reference uses the same name.
FIGURE_LEGEND: dict[str, str] = {
    "images_per_s": "Images generated (image kind) or read (vision kind) per second over the point (completed "
                    "images / wall time).",
    "s_per_step": "Seconds per denoising step: mean end-to-end latency / num_inference_steps.",
    "rtf": "Real-time factor: mean over requests of processing time / audio duration (below 1 = faster "
           "than real time).",
    "audio_s_per_s": "Seconds of audio transcribed per wall-clock second over the point.",
    "items_per_s": "Items classified or embedded per second over the point (completed items / wall time).",
    "images_per_request": "Images sent per vision chat request (mean over completed requests).",
    "prompt_tokens_per_image": "Image tokens the model read per image: usage.prompt_tokens_details.image_tokens / "
                               "images, over completed vision requests.",
    "prompt_tokens_per_request": "usage.prompt_tokens per vision chat request (text and image tokens), mean.",
    "latency_p50_ms": "Median end-to-end request latency.",
    "latency_p95_ms": "95th percentile end-to-end request latency.",
}


def point_file_name(kind: str, max_concurrency: int) -> str:
    return f"media_point_{kind}_con-{max_concurrency}.json"


def point_key(kind: str, max_concurrency: int) -> str:
    """The point's name in the report and in its checks' names (``<metric> <kind>_con-<c> <tier>``)."""
    return f"{kind}_con-{max_concurrency}"


@dataclass
class MediaPoint(TypedRecord):
    """One load point against a media endpoint: what was sent, what came back, the headline figures."""

    SCHEMA = SCHEMA

    model_id: str = described("Model spec id of the run.")
    served_model_name: str = described("Model name sent in every request.")
    kind: str = described("Model kind: image, speech, cnn, embedding or vision.")
    endpoint: str = described("Endpoint the requests were sent to.")
    max_concurrency: int = described("Requests in flight at once.")
    num_requests: int = described("Requests of the point over all its rounds (warm-up excluded): those sent, "
                                  "plus not_sent when a signal stopped it.")
    items_per_request: int = described("Images, clips or inputs per request.", 1)
    params: dict[str, Any] = described("Workload parameters (num_inference_steps, image size, batch size ...).",
                             factory=dict)
    source: str = described("Why the point ran: perf_reference (has targets) or sweep.", "sweep")
    started: str = described("ISO 8601 UTC start of the measured requests.", "")
    ended: str = described("ISO 8601 UTC end of the measured requests.", "")
    duration_s: float | None = described("Wall time of the measured requests.", None, unit="s")
    completed: int = described("Requests answered 200 with a well-formed body.", 0)
    failed: int = described("Requests that failed (HTTP error, timeout, connection, bad body).", 0)
    not_sent: int = described("Requests never sent (the run was interrupted).", 0)
    failures_by_class: dict[str, int] = described(
        "Failed requests per class (http_429, http_5xx, timeout, bad_body ...).", factory=dict)
    error_rate: float | None = described("(failed + not_sent) / all requests of the point.", None)
    latency_mean_ms: float | None = described("Mean end-to-end latency of completed requests.", None, unit="ms")
    latency_p50_ms: float | None = described(FIGURE_LEGEND["latency_p50_ms"], None, unit="ms")
    latency_p95_ms: float | None = described(FIGURE_LEGEND["latency_p95_ms"], None, unit="ms")
    latency_p99_ms: float | None = described("99th percentile end-to-end request latency.", None, unit="ms")
    figures: dict[str, Any] = described("Headline figures of the kind (names as in the performance reference): "
                              + "; ".join(f"{k}: {v}" for k, v in FIGURE_LEGEND.items()), factory=dict)
    first_error: str | None = described("The first failure's message, for the report.", None)
    requests: list[Any] = described("Every sent request in completion order: request_id (the X-Request-ID the server "
                               "logs on each line of that request), ms (end-to-end latency), status (HTTP status, "
                               "null when none came), error_class (null when it succeeded), send_time_s (when it "
                               "was sent: the client's time.perf_counter, the clock of server_state.origin_perf_s), "
                               "units (work it carried in cost_unit: items, or seconds of audio); the report's 95% "
                               "intervals of the figures are made from these rows.", factory=list)
    interrupted: str | None = described("Signal that stopped the point early, if any.", None)
    server_state: dict[str, Any] | None = described(
        "The server's /metrics sampled about once a second during the point (contracts/server_state.py): "
        "t_s since the point started and queue_depth (requests waiting in the media server's queue) and "
        "mean_batch_size (requests per batch formed in each interval), as the server exposes them.", None)
    work_units: float | None = described("Units of work the point completed, in cost_unit: items (images, "
                                         "classified images, embedded inputs) or seconds of audio.", None)
    cost_unit: str = described("What one unit of work is: item, or audio_s (one second of audio).", "item")
    server_core_seconds: float | None = described(
        "CPU core-seconds the server spent over the point: user + system time of its process tree (/proc), "
        "or its container's cgroup cpu.stat; null when unknown (cost_note says why).", None, unit="core-s")
    core_seconds_per_unit: float | None = described(
        "server_core_seconds / work_units: CPU cost of one item, or of one second of audio.", None,
        unit="core-s")
    energy_joules: float | None = described("Host energy over the point from RAPL package counters "
                                            "(/sys/class/powercap); null where the host has none (cost_note).",
                                            None, unit="J")
    joules_per_unit: float | None = described("energy_joules / work_units.", None, unit="J")
    cost_note: str = described("What the cost figures measured (process tree, cgroup), or why one is n/a.", "")
    sampling: PointSampling | None = described(
        "Adaptive sample size of a perf-reference point (records/sampling.py): its minimum and sent requests, "
        "rounds, and why it stopped (decided, precision, sample_budget ...); null for a sweep point, which "
        "sends its fixed count in one round.", None, record=PointSampling)
    reconciliation: Reconciliation | None = described(
        "The media server's finished requests over the point (tt_media_server_requests_total, every model and "
        "status) against the point's completed and sent requests (records/reconciliation.py): clean, "
        "contaminated (another client's load), uncounted or not_reconciled; a point that is not clean decides no "
        "target.", None, record=Reconciliation)
