"""The run history: every finished run's report indexed by spec identity and host fingerprint.

Why it exists: a release on its own has no memory; the history is what a regression gate compares
with (``--compare-to last``) and what the release matrix turns into a support table. The run
directory stays the source of truth: the history is an index of it, rebuilt from a run directory
by ``run.py --workflow reports --output-dir RUN_DIR``.

Layering: above ``records/`` (it indexes typed report records), below ``reports/`` (which writes to it).
"""
