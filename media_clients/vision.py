"""The vision kind (chat with ``image_url`` parts): its API test cases and its consistency eval, stdlib only.

Why checks of counts and consistency and not of words: the catalog's CPU vision model is a FAKE
with random weights (tiny-random-qwen3-vl), so what can be judged is the plumbing: an image adds
image tokens to ``usage.prompt_tokens``, two images add twice one image's, a bigger image adds
more, greedy decoding repeats itself, streaming carries images too, and bad images or refused
URLs are 400s naming the part. The same checks hold for a real Qwen-VL model.
"""
from __future__ import annotations

import base64
import json
from typing import Any, Callable

from media_clients.probe import tiny_png
from media_clients.transport import Answer, MediaHttp
from media_clients.workloads import describe

ENDPOINT = "/v1/chat/completions"


class VisionCheckFailed(AssertionError):
    """A vision case's check did not hold (the tests client counts it as failed)."""


def data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


def chat_body(model: str, image_urls: list[str], text: str = "Describe the image.", max_tokens: int = 8,
              **fields: Any) -> dict:
    parts: list[dict] = [{"type": "image_url", "image_url": {"url": url}} for url in image_urls]
    parts.append({"type": "text", "text": text})
    return {"model": model, "messages": [{"role": "user", "content": parts}], "max_tokens": max_tokens,
            "temperature": 0, **fields}


def send(http: MediaHttp, body: dict) -> Answer:
    return http.post_json(ENDPOINT, body)


def usage_of(answer: Answer, what: str) -> dict:
    if answer.status != 200:
        raise VisionCheckFailed(f"{what}: expected HTTP 200, got {describe(answer)}")
    usage = answer.json().get("usage") or {}
    if not isinstance(usage.get("prompt_tokens"), int):
        raise VisionCheckFailed(f"{what}: no usage.prompt_tokens in {answer.text(200)}")
    return usage


def image_tokens(usage: dict) -> int:
    return int((usage.get("prompt_tokens_details") or {}).get("image_tokens") or 0)


def expect_400_naming(answer: Answer, part: str, what: str) -> None:
    if answer.status != 400:
        raise VisionCheckFailed(f"{what}: expected HTTP 400, got {describe(answer)}")
    message = str(((answer.json() or {}).get("error") or {}).get("message", ""))
    if part not in message:
        raise VisionCheckFailed(f"{what}: the 400 does not name {part}: {message[:200]!r}")


# ----------------------------------------------------------------------------- checks
def check_image_tokens_counted(http: MediaHttp, model: str) -> None:
    plain = usage_of(send(http, chat_body(model, [])), "text only")
    one = usage_of(send(http, chat_body(model, [data_url(tiny_png(64))])), "one image")
    if image_tokens(one) < 1 or one["prompt_tokens"] < plain["prompt_tokens"] + image_tokens(one):
        raise VisionCheckFailed(f"one image: prompt_tokens {one['prompt_tokens']} (image tokens {image_tokens(one)}) "
                                f"vs {plain['prompt_tokens']} without it: the image's tokens are not counted")


def check_two_images_twice_the_tokens(http: MediaHttp, model: str) -> None:
    one = usage_of(send(http, chat_body(model, [data_url(tiny_png(64))])), "one image")
    two = usage_of(send(http, chat_body(model, [data_url(tiny_png(64))] * 2)), "two images")
    if image_tokens(two) != 2 * image_tokens(one) or (two.get("prompt_tokens_details") or {}).get("images") != 2:
        raise VisionCheckFailed(f"two same images gave {image_tokens(two)} image tokens, one gave {image_tokens(one)}")


def check_bigger_image_more_tokens(http: MediaHttp, model: str) -> None:
    small = usage_of(send(http, chat_body(model, [data_url(tiny_png(64))])), "64 px image")
    big = usage_of(send(http, chat_body(model, [data_url(tiny_png(256))])), "256 px image")
    if image_tokens(big) <= image_tokens(small):
        raise VisionCheckFailed(f"256 px image: {image_tokens(big)} image tokens, not more than 64 px's "
                                f"{image_tokens(small)}")


def check_greedy_repeats(http: MediaHttp, model: str) -> None:
    body = chat_body(model, [data_url(tiny_png(64))], seed=0)
    texts = []
    for attempt in range(2):
        answer = send(http, body)
        usage_of(answer, f"greedy attempt {attempt + 1}")
        texts.append(answer.json()["choices"][0]["message"]["content"])
    if texts[0] != texts[1]:
        raise VisionCheckFailed(f"greedy decoding of one request gave two answers: {texts[0]!r} / {texts[1]!r}")


def check_streaming_with_image(http: MediaHttp, model: str) -> None:
    answer = send(http, chat_body(model, [data_url(tiny_png(64))], stream=True,
                                  stream_options={"include_usage": True}))
    if answer.status != 200:
        raise VisionCheckFailed(f"stream: expected HTTP 200, got {describe(answer)}")
    events = [line[6:] for line in answer.body.decode("utf-8", "replace").splitlines() if line.startswith("data: ")]
    if not events or events[-1] != "[DONE]":
        raise VisionCheckFailed(f"stream: does not end with data: [DONE] ({len(events)} events)")
    usage = json.loads(events[-2]).get("usage") or {}
    if image_tokens(usage) < 1:
        raise VisionCheckFailed(f"stream: the usage chunk counts no image tokens: {events[-2][:200]}")


# Refused for its address when the server fetches URLs, or because it fetches none: both are right.
ADDRESS_REFUSED = ("loopback/private/link-local", "ALLOW_REMOTE_IMAGES=0")


def _refused(url: str, words: str | tuple[str, ...]) -> Callable[[MediaHttp, str], None]:
    def case(http: MediaHttp, model: str) -> None:
        answer = send(http, chat_body(model, [url], max_tokens=2))
        expect_400_naming(answer, "messages[0].content[0].image_url", f"image_url {url[:40]}")
        message = answer.json()["error"]["message"]
        wanted = (words,) if isinstance(words, str) else words
        if words and not any(word in message for word in wanted):
            raise VisionCheckFailed(f"image_url {url[:40]}: the 400 does not say {words!r}: {message[:200]!r}")
    return case


def check_unknown_model_404(http: MediaHttp, model: str) -> None:
    answer = send(http, chat_body("no-such-model", [data_url(tiny_png(32))], max_tokens=2))
    if answer.status != 404:
        raise VisionCheckFailed(f"unknown model: expected HTTP 404, got {describe(answer)}")


#: (name, markers, check(http, model)) — the tests client wraps each as one case.
VISION_CASES: tuple[tuple[str, tuple[str, ...], Callable[[MediaHttp, str], None]], ...] = (
    ("vision/image_tokens_counted", ("param", "smoke"), check_image_tokens_counted),
    ("vision/two_images_twice_the_tokens", ("param",), check_two_images_twice_the_tokens),
    ("vision/stream_with_image", ("param", "smoke"), check_streaming_with_image),
    ("vision/bad_base64_400", ("error",), _refused("data:image/png;base64,@@not-base64@@", "base64")),
    ("vision/not_an_image_400", ("error",), _refused(
        "data:image/png;base64," + base64.b64encode(b"no image here").decode(), "not a decodable image")),
    ("vision/not_image_type_400", ("error",), _refused(
        "data:text/plain;base64," + base64.b64encode(b"hello").decode(), "image/*")),
    ("vision/loopback_url_400", ("error", "smoke"), _refused("http://127.0.0.1:1/cat.png", ADDRESS_REFUSED)),
    ("vision/private_url_400", ("error",), _refused("http://10.0.0.1/cat.png", ADDRESS_REFUSED)),
    ("vision/link_local_url_400", ("error",), _refused("http://169.254.169.254/latest/meta-data", ADDRESS_REFUSED)),
    ("vision/unsupported_scheme_400", ("error",), _refused("file:///etc/passwd", "")),
    ("vision/unknown_model_404", ("error",), check_unknown_model_404),
)

#: The consistency eval: every check must hold (random weights: words are never judged).
EVAL_CHECKS: tuple[tuple[str, Callable[[MediaHttp, str], None]], ...] = (
    ("image tokens counted in prompt_tokens", check_image_tokens_counted),
    ("two images -> twice the image tokens", check_two_images_twice_the_tokens),
    ("bigger image -> more image tokens", check_bigger_image_more_tokens),
    ("greedy decoding repeats itself", check_greedy_repeats),
    ("streaming with an image ends with usage and [DONE]", check_streaming_with_image),
)


def eval_checks(http: MediaHttp, model: str) -> list[dict]:
    """One item per consistency check: {"check", "passed", "error"}."""
    items = []
    for name, check in EVAL_CHECKS:
        try:
            check(http, model)
            items.append({"check": name, "passed": True, "error": None})
        except VisionCheckFailed as exc:
            items.append({"check": name, "passed": False, "error": str(exc)[:300]})
    return items
