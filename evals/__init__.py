"""Evals client workflow: lm-eval against the served endpoint (see evals/README.md)."""
