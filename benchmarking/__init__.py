"""tt-inference-server benchmarks workflow: our streaming load generator, stub server and sweeps.

Importing the package stays stdlib-only so the orchestrator can read ``WORKFLOW_ARG_KEYS``
without the benchmarks venv.
"""
from __future__ import annotations

from benchmarking.bench_args import WORKFLOW_ARG_KEYS

__all__ = ["WORKFLOW_ARG_KEYS"]
