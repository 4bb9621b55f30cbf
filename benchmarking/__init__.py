"""tt-inference-server benchmarks workflow: our streaming load generator, stub server and sweeps.

Its ``--workflow-args`` keys are declared in ``contracts.workflow_keys`` (``BENCHMARK_ARGS``).
"""
