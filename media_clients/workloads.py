"""One workload per media kind: the request, what makes an answer well-formed, the figures.

Small classes behind ``WORKLOADS``; the benchmarks, evals, tests and readiness probe all build
their requests here, so a request of a kind is described once.
"""
from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from contracts.model_spec import ModelSpec
from media_clients import data
from media_clients.transport import Answer, MediaHttp
from records.media import CNN, EMBEDDING, IMAGE, SPEECH, VISION


@dataclass
class Sent:
    """One request's outcome as the load loop records it."""

    answer: Answer
    items: int = 1
    audio_seconds: float = 0.0
    error_class: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_class is None


def _bad_body(answer: Answer, why: str) -> tuple[str, str]:
    return "bad_body", f"{answer.url}: {why}: {answer.text(200)}"


def check(answer: Answer, validate: Callable[[Any], str | None]) -> tuple[str | None, str | None]:
    """(error class, message) of an answer: HTTP/transport failures first, then the body's shape."""
    if answer.error_class:
        return answer.error_class, f"{answer.url}: {answer.error or answer.text(200)}"
    if answer.status != 200:
        return "http_other", f"{answer.url}: HTTP {answer.status}"
    try:
        body = answer.json()
    except ValueError:
        return _bad_body(answer, "not JSON")
    why = validate(body)
    return (None, None) if why is None else _bad_body(answer, why)


@dataclass
class Workload:
    """What one kind sends and how its figures are computed."""

    kind: str
    endpoint: str
    params: dict = field(default_factory=dict)

    def send(self, http: MediaHttp, model: str, index: int) -> Sent:  # pragma: no cover - abstract
        raise NotImplementedError

    def figures(self, sent: list[Sent], duration_s: float, latencies_ms: list[float]) -> dict[str, float | None]:
        raise NotImplementedError


def _per_s(count: float, duration_s: float) -> float | None:
    return round(count / duration_s, 6) if duration_s > 0 and count else None


class ImageWorkload(Workload):
    def __init__(self, params: dict) -> None:
        super().__init__(IMAGE, "/v1/images/generations", {"num_inference_steps": int(params.get(
            "num_inference_steps", 4)), **{k: v for k, v in params.items() if k != "num_inference_steps"}})

    def body(self, model: str, index: int) -> dict:
        body = {"model": model, "prompt": data.IMAGE_PROMPTS[index % len(data.IMAGE_PROMPTS)],
                "num_inference_steps": self.params["num_inference_steps"], "seed": index}
        if self.params.get("size"):
            body["size"] = str(self.params["size"])
        return body

    def send(self, http: MediaHttp, model: str, index: int) -> Sent:
        answer = http.post_json(self.endpoint, self.body(model, index))
        cls, msg = check(answer, lambda b: None if isinstance(b.get("data"), list) and b["data"]
                         and all(isinstance(d.get("b64_json"), str) and d["b64_json"] for d in b["data"])
                         else "no data[].b64_json")
        if cls is None and not base64.b64decode(answer.json()["data"][0]["b64_json"]).startswith(b"\x89PNG"):
            cls, msg = "bad_body", f"{answer.url}: data[0] is not a PNG"
        return Sent(answer, 1, 0.0, cls, msg)

    def figures(self, sent, duration_s, latencies_ms):
        done = [s for s in sent if s.ok]
        steps = self.params["num_inference_steps"]
        mean_s = sum(latencies_ms) / len(latencies_ms) / 1000 if latencies_ms else None
        return {"images_per_s": _per_s(sum(s.items for s in done), duration_s),
                "s_per_step": round(mean_s / steps, 6) if mean_s is not None else None}


class SpeechWorkload(Workload):
    def __init__(self, params: dict) -> None:
        super().__init__(SPEECH, "/v1/audio/transcriptions", dict(params))
        self._clips: list[data.Clip] | None = None

    @property
    def clips(self) -> list[data.Clip]:
        if self._clips is None:
            self._clips = data.speech_clips()
        return self._clips

    def transcribe(self, http: MediaHttp, model: str, clip: data.Clip) -> Answer:
        return http.post_form(self.endpoint, {"model": model, "response_format": "json", "language": "en"},
                              {"file": (f"{clip.clip_id}.wav", clip.wav, "audio/wav")})

    def send(self, http: MediaHttp, model: str, index: int) -> Sent:
        clip = self.clips[index % len(self.clips)]
        answer = self.transcribe(http, model, clip)
        cls, msg = check(answer, lambda b: None if isinstance(b.get("text"), str) else "no text")
        return Sent(answer, 1, clip.seconds, cls, msg)

    def figures(self, sent, duration_s, latencies_ms):
        done = [s for s in sent if s.ok and s.audio_seconds > 0]
        rtfs = [s.answer.elapsed_s / s.audio_seconds for s in done]
        return {"rtf": round(sum(rtfs) / len(rtfs), 6) if rtfs else None,
                "audio_s_per_s": _per_s(sum(s.audio_seconds for s in done), duration_s)}


class CnnWorkload(Workload):
    def __init__(self, params: dict) -> None:
        super().__init__(CNN, "/v1/cnn/search-image", {"top_k": int(params.get("top_k", 5)), **params})
        self._photos: list[data.Photo] | None = None

    @property
    def photos(self) -> list[data.Photo]:
        if self._photos is None:
            self._photos = data.photos()
        return self._photos

    def classify(self, http: MediaHttp, model: str, photo: data.Photo, top_k: int | None = None) -> Answer:
        return http.post_json(self.endpoint, {"model": model, "image": base64.b64encode(photo.png).decode(),
                                              "top_k": top_k or self.params["top_k"]})

    def send(self, http: MediaHttp, model: str, index: int) -> Sent:
        answer = self.classify(http, model, self.photos[index % len(self.photos)])
        cls, msg = check(answer, lambda b: None if isinstance(b.get("image_data"), list) and b["image_data"]
                         and all("label" in d for d in b["image_data"]) else "no image_data[].label")
        return Sent(answer, 1, 0.0, cls, msg)

    def figures(self, sent, duration_s, latencies_ms):
        return {"items_per_s": _per_s(sum(s.items for s in sent if s.ok), duration_s)}


class EmbeddingWorkload(Workload):
    def __init__(self, params: dict) -> None:
        super().__init__(EMBEDDING, "/v1/embeddings", {"batch_items": int(params.get("batch_items", 8)), **params})
        self.salt = uuid.uuid4().hex[:8]  # per workload (= per point): no text repeats across points either

    def inputs(self, index: int) -> list[str]:
        """Distinct texts per point, request and item: a server-side embedding cache must not answer the load."""
        sentences = [s for triple in data.SENTENCE_TRIPLES for s in triple]
        n = self.params["batch_items"]
        return [f"{sentences[(index * n + i) % len(sentences)]} ({self.salt} request {index}, item {i})"
                for i in range(n)]

    def embed(self, http: MediaHttp, model: str, inputs: list[str]) -> Answer:
        return http.post_json(self.endpoint, {"model": model, "input": inputs})

    def send(self, http: MediaHttp, model: str, index: int) -> Sent:
        inputs = self.inputs(index)
        answer = self.embed(http, model, inputs)
        cls, msg = check(answer, lambda b: None if isinstance(b.get("data"), list) and len(b["data"]) == len(inputs)
                         and all(isinstance(d.get("embedding"), list) and d["embedding"] for d in b["data"])
                         else f"expected {len(inputs)} data[].embedding")
        return Sent(answer, len(inputs), 0.0, cls, msg)

    def figures(self, sent, duration_s, latencies_ms):
        return {"items_per_s": _per_s(sum(s.items for s in sent if s.ok), duration_s)}


class VisionWorkload(Workload):
    """Chat requests with ``images_per_request`` PNGs (``image_side`` px) as data: URLs; greedy, short answers."""

    def __init__(self, params: dict) -> None:
        super().__init__(VISION, "/v1/chat/completions",
                         {"images_per_request": int(params.get("images_per_request", 1)),
                          "image_side": int(params.get("image_side", 64)),
                          "max_tokens": int(params.get("max_tokens", 8)), **params})

    def body(self, model: str, index: int) -> dict:
        from media_clients.probe import tiny_png

        side = self.params["image_side"]
        url = "data:image/png;base64," + base64.b64encode(tiny_png(side)).decode()
        parts = [{"type": "image_url", "image_url": {"url": url}}] * self.params["images_per_request"]
        parts = parts + [{"type": "text", "text": f"Describe image set {index}."}]
        return {"model": model, "messages": [{"role": "user", "content": parts}],
                "max_tokens": self.params["max_tokens"], "temperature": 0}

    def send(self, http: MediaHttp, model: str, index: int) -> Sent:
        answer = http.post_json(self.endpoint, self.body(model, index))
        images = self.params["images_per_request"]
        cls, msg = check(answer, lambda b: None if b.get("choices") and isinstance(
            ((b.get("usage") or {}).get("prompt_tokens_details") or {}).get("image_tokens"), int)
            and b["usage"]["prompt_tokens_details"]["image_tokens"] > 0
            else "no usage.prompt_tokens_details.image_tokens")
        return Sent(answer, images, 0.0, cls, msg)

    def figures(self, sent, duration_s, latencies_ms):
        done = [s for s in sent if s.ok]
        usages = [s.answer.json()["usage"] for s in done]
        images = sum(s.items for s in done)
        image_tokens = sum(u["prompt_tokens_details"]["image_tokens"] for u in usages)
        return {"images_per_request": round(images / len(done), 6) if done else None,
                "prompt_tokens_per_image": round(image_tokens / images, 6) if images else None,
                "prompt_tokens_per_request": round(sum(u["prompt_tokens"] for u in usages) / len(done), 6)
                if done else None,
                "images_per_s": _per_s(images, duration_s)}


WORKLOADS: dict[str, type[Workload]] = {IMAGE: ImageWorkload, SPEECH: SpeechWorkload, CNN: CnnWorkload,
                                        EMBEDDING: EmbeddingWorkload, VISION: VisionWorkload}


def workload_for(kind: str, params: dict | None = None) -> Workload:
    return WORKLOADS[kind](dict(params or {}))


def spec_params(spec: ModelSpec) -> dict:
    """Workload defaults from the spec's server settings (steps and image size the server was given)."""
    env = spec.env_vars
    out: dict[str, Any] = {}
    if env.get("NUM_INFERENCE_STEPS"):
        out["num_inference_steps"] = int(env["NUM_INFERENCE_STEPS"])
    return out


def describe(answer: Answer) -> str:
    """One line for a failed probe or case."""
    if answer.status is None:
        return f"{answer.error_class}: {answer.error}"
    try:
        return f"HTTP {answer.status}: {json.dumps(answer.json())[:200]}"
    except ValueError:
        return f"HTTP {answer.status}: {answer.text(200)}"
