"""Mock runners: no model, controllable timing and faults, for scheduler tests and overhead benchmarks.

Knobs (settings): MOCK_LOAD_DELAY_SECONDS (warm-up), MOCK_INFERENCE_DELAY_MS (per batch),
MOCK_FAIL_EVERY (every Nth batch raises), MOCK_HANG_ON / MOCK_CRASH_ON (a prompt containing that
text hangs the worker forever / kills the worker process), MOCK_DEVICES_COUNT (how many devices the
fake host has: DEVICE_IDS naming a higher id fails at start-up, as a missing device would).
Outputs are fakes and say so: a flat grey PNG per image, a fixed label list for classification.
"""
from __future__ import annotations

import hashlib
import io
import os
import time
from typing import Any, Iterator

from media_server.runners.base import BatchRunner, GeneratorStreamingRunner, RunnerUnavailable


def _check_devices(settings) -> None:
    for group in settings.device_groups():
        for device_id in group.device_ids:
            if device_id >= settings.mock_devices_count:
                raise RunnerUnavailable(
                    f"device {device_id} (DEVICE_IDS={settings.device_ids}) does not exist: the mock "
                    f"host has MOCK_DEVICES_COUNT={settings.mock_devices_count} devices")


class _MockFaults:
    """Shared fault behaviour: hang, crash, fail every Nth batch, fixed delay."""

    settings: Any

    def _apply_faults(self, payloads: list[dict]) -> None:
        self._batches = getattr(self, "_batches", 0) + 1
        for payload in payloads:
            prompt = str(payload.get("prompt", ""))
            if self.settings.mock_crash_on and self.settings.mock_crash_on in prompt:
                os._exit(17)  # a device fault that takes the process down
            if self.settings.mock_hang_on and self.settings.mock_hang_on in prompt:
                while True:
                    time.sleep(3600)
        if self.settings.mock_fail_every and self._batches % self.settings.mock_fail_every == 0:
            raise RuntimeError(f"mock failure on batch {self._batches} (MOCK_FAIL_EVERY="
                               f"{self.settings.mock_fail_every})")
        if self.settings.mock_inference_delay_ms:
            time.sleep(self.settings.mock_inference_delay_ms / 1000)


class MockImageRunner(_MockFaults, BatchRunner):
    """Fake image generation: returns flat grey PNGs (a fake, not a model)."""

    name, kind, model_id = "mock", "image", "mock-image"

    @classmethod
    def preflight(cls, settings) -> None:
        _check_devices(settings)

    def load(self) -> None:
        time.sleep(self.settings.mock_load_delay_seconds)
        self._png = _grey_png(8)

    def run_batch(self, payloads: list[dict]) -> list[Any]:
        self._apply_faults(payloads)
        return [[self._png] * int(p.get("number_of_images", 1)) for p in payloads]


class MockCnnRunner(_MockFaults, BatchRunner):
    """Fake classification: a label list chosen by the input's hash (a fake, not a model)."""

    name, kind, model_id = "mock-cnn", "cnn", "mock-cnn"
    LABELS = ("mock-label-a", "mock-label-b", "mock-label-c", "mock-label-d", "mock-label-e")

    @classmethod
    def preflight(cls, settings) -> None:
        _check_devices(settings)

    def load(self) -> None:
        time.sleep(self.settings.mock_load_delay_seconds)

    def run_batch(self, payloads: list[dict]) -> list[Any]:
        self._apply_faults(payloads)
        results = []
        for payload in payloads:
            start = hashlib.sha256(payload.get("image", b"")).digest()[0] % len(self.LABELS)
            top_k = int(payload.get("top_k", 3))
            labels = [self.LABELS[(start + i) % len(self.LABELS)] for i in range(top_k)]
            results.append([{"label": label, "score": round(1.0 / (i + 2), 4), "class_index": i}
                            for i, label in enumerate(labels)])
        return results


class MockStreamRunner(_MockFaults, GeneratorStreamingRunner):
    """Fake streaming: MOCK_STREAM_CHUNKS chunks "chunk-i", MOCK_INFERENCE_DELAY_MS per step."""

    name, kind, model_id = "mock-stream", "text", "mock-stream"

    @classmethod
    def preflight(cls, settings) -> None:
        _check_devices(settings)

    def load(self) -> None:
        time.sleep(self.settings.mock_load_delay_seconds)

    def start(self, payload: dict) -> Iterator[str]:
        chunks = int(payload.get("chunks", self.settings.mock_stream_chunks))
        for index in range(chunks):
            yield f"chunk-{index}"
        return {"chunks": chunks}

    def step(self):
        if self.has_work():
            self._apply_faults([{}])
        return super().step()

    def add(self, request_id: str, payload: Any) -> None:
        self._apply_faults_on_add(payload)
        super().add(request_id, payload)

    def _apply_faults_on_add(self, payload: dict) -> None:
        prompt = str(payload.get("prompt", ""))
        if self.settings.mock_crash_on and self.settings.mock_crash_on in prompt:
            os._exit(17)
        if self.settings.mock_hang_on and self.settings.mock_hang_on in prompt:
            while True:
                time.sleep(3600)


def _grey_png(side: int) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (side, side), (128, 128, 128)).save(buffer, format="PNG")
    return buffer.getvalue()
