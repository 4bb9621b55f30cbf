"""Result records and the one judge: the layer between the contracts and everything that measures.

Every client workflow (benchmarks, evals, tests, stress tests, media clients) writes its results
through a record here; the judge (``records.judge``) reads records and decides; the reports
package renders records. Nothing here imports a client, the reports or the orchestrator, and
everything is stdlib only (``tests/contracts/test_no_import_cycles.py`` and
``test_stdlib_only.py`` check both), because each client venv and the reports venv import it as is.

- ``bench``: one benchmark point (``tt-bench-point/1``)
- ``evals``: one accuracy task (``tt-eval-record/1``) and the accuracy check
- ``server_tests``: the API conformance run
- ``stress``: stress points, drift and capacity searches
- ``media``: one media benchmark point
- ``report``: the report record (``tt-report/1``): metadata, rows, sections, verdict
- ``judge``: pass/fail/inconclusive from the records above
"""
