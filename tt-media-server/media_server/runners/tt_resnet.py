"""ResNet-50 classification on Tenstorrent devices through tt-metal's ttnn ResNet demo model."""
from __future__ import annotations

from typing import Any

from media_server.runners.base import BatchRunner
from media_server.runners.cnn_cpu import imagenet_labels, preprocess_batch, top_k
from media_server.runners.tt_common import close_mesh, open_mesh, require_module


class TTResNetRunner(BatchRunner):
    name, kind, model_id = "tt-resnet", "cnn", "resnet-50"
    MODEL_MODULE = "models.demos.ttnn_resnet.tt.ttnn_functional_resnet50"

    @classmethod
    def preflight(cls, settings) -> None:
        require_module(cls.name, "ttnn", "ttnn from tt-metal")
        require_module(cls.name, cls.MODEL_MODULE, "tt-metal's models package on PYTHONPATH")

    def load(self) -> None:
        self.mesh = open_mesh(self.name, self.settings, self.device)
        module = require_module(self.name, self.MODEL_MODULE, "tt-metal's models package")
        self.model = module.create_model(self.mesh, batch_size=self.settings.max_batch_size,
                                         weights_path=self.settings.model_weights_path or None)
        self.labels = imagenet_labels()

    def run_batch(self, payloads: list[dict]) -> list[Any]:
        batch, errors = preprocess_batch(payloads, 224)
        logits = self.model(batch) if batch is not None else None
        return top_k(logits, payloads, errors, self.labels)

    def close(self) -> None:
        close_mesh(getattr(self, "mesh", None))

