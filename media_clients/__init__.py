"""Client workflows for media models (images, speech, CNNs, embeddings) served by tt-media-server.

The orchestrator picks these entry points instead of the LLM ones when the model spec's
``model_type`` is a media kind (``kinds.py``); a ``text`` model served by the media server uses
the LLM workflows. Each entry point follows the client-workflow contract of
docs/architecture.md and writes typed records: ``MediaPoint`` for benchmarks, the eval record
(``tt-eval-record/1``) for evals and the tests record (``tt-tests-record/1``) for tests, so the
report reads them like any other.
"""
