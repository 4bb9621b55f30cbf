"""The one-item request that proves a media server can serve its model (readiness), stdlib only.

``/tt-liveness`` says the workers are warm; only a real request of the model's kind proves the
model answers. The inputs are made here (a small PNG, one second of silence, one sentence, a
one-step image) so the probe needs no data set and runs in the orchestrator's venv.
"""
from __future__ import annotations

import base64
import io
import math
import struct
import wave
import zlib

from media_clients.transport import Answer, MediaHttp
from records.media import CNN, EMBEDDING, IMAGE, SPEECH, VISION


def tiny_png(side: int = 32) -> bytes:
    """A gray gradient PNG, encoded with zlib (no imaging library)."""
    rows = b"".join(b"\x00" + bytes((x * 255 // side) for x in range(side)) for _ in range(side))

    def chunk(tag: bytes, payload: bytes) -> bytes:
        return struct.pack(">I", len(payload)) + tag + payload + struct.pack(">I", zlib.crc32(tag + payload))

    header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)  # 8-bit grayscale
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def tone_wav(seconds: float = 1.0, rate: int = 16000, amplitude: int = 8000) -> bytes:
    """A 440 Hz tone as 16-bit mono WAV; ``amplitude=0`` is silence."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"".join(struct.pack("<h", int(amplitude * math.sin(2 * math.pi * 440 * i / rate)))
                                 for i in range(int(seconds * rate))))
    return buffer.getvalue()


def one_item(http: MediaHttp, kind: str, model: str, timeout_s: float) -> Answer:
    """Send one request of ``kind``; the answer's ``ok`` says whether the model served it."""
    if kind == IMAGE:
        # The server's default step count: TT pipelines refuse fewer than their minimum.
        return http.post_json("/v1/images/generations", {"model": model, "prompt": "readiness probe", "seed": 0},
                              timeout_s=timeout_s)
    if kind == SPEECH:
        # Silence, not a tone: Whisper hears no speech in it and answers at once, while a tone makes it
        # repeat itself up to its token limit at every fallback temperature (a minute on a busy CPU, which
        # also taught the server's admission a minute per request, so it refused the first real load).
        return http.post_form("/v1/audio/transcriptions", {"model": model},
                              {"file": ("probe.wav", tone_wav(amplitude=0), "audio/wav")}, timeout_s=timeout_s)
    if kind == CNN:
        return http.post_json("/v1/cnn/search-image", {"model": model, "image": base64.b64encode(tiny_png()).decode(),
                                                       "top_k": 1}, timeout_s=timeout_s)
    if kind == EMBEDDING:
        return http.post_json("/v1/embeddings", {"model": model, "input": "readiness probe"}, timeout_s=timeout_s)
    if kind == VISION:
        url = "data:image/png;base64," + base64.b64encode(tiny_png()).decode()
        return http.post_json("/v1/chat/completions", {"model": model, "max_tokens": 1, "messages": [
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                         {"type": "text", "text": "readiness probe"}]}]}, timeout_s=timeout_s)
    raise ValueError(f"no one-item probe for kind {kind!r}")
