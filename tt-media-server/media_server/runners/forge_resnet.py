"""ResNet-50 classification compiled for Tenstorrent devices by TT-Forge (`MODEL_RUNNER=forge`).

The original server's CNN path runs through Forge; this runner keeps that name. It needs the
`forge` package (tt-forge-fe) and torchvision; on a host without Forge the start-up stops with one
line naming the package, like the ttnn runners do for tt-metal.
"""
from __future__ import annotations

from typing import Any

from media_server.runners.base import BatchRunner
from media_server.runners.cnn_cpu import imagenet_labels, preprocess_batch, top_k
from media_server.runners.tt_common import require_module


class ForgeResNetRunner(BatchRunner):
    name, kind, model_id = "forge", "cnn", "resnet-50"

    @classmethod
    def preflight(cls, settings) -> None:
        require_module(cls.name, "forge", "the forge package of tt-forge-fe")

    def load(self) -> None:
        forge = require_module(self.name, "forge", "the forge package of tt-forge-fe")
        torch = require_module(self.name, "torch", "torch")
        torchvision = require_module(self.name, "torchvision", "torchvision")
        if self.settings.model_weights_path:
            model = torchvision.models.resnet50()
            model.load_state_dict(torch.load(self.settings.model_weights_path, map_location="cpu"))
        else:
            model = torchvision.models.resnet50(weights=torchvision.models.ResNet50_Weights.DEFAULT)
        model.eval()
        sample = torch.rand(self.settings.max_batch_size, 3, 224, 224)
        self.model = forge.compile(model, sample_inputs=[sample])
        self.labels = imagenet_labels()

    def run_batch(self, payloads: list[dict]) -> list[Any]:
        batch, errors = preprocess_batch(payloads, 224)
        logits = None
        if batch is not None:
            output = self.model(batch)
            logits = output[0] if isinstance(output, (list, tuple)) else output
        return top_k(logits, payloads, errors, self.labels)
