"""Write the run history's releases over time: DIR/history.json and DIR/history.html.

    python -m reports.run_history --output-dir DIR [--model M] [--device D]

``run.py --history`` runs this in the reports venv (which has psycopg for a PostgreSQL store). It reads
the history store (``history.store``: ``TT_HISTORY_URL``, else the SQLite file) and each listed run's
report.json (``history.timeline``); it writes nothing else and touches no run directory.

Exit codes: 0 written (also when no release matches: the page says so), 1 the store cannot be read,
2 bad arguments or an output directory that cannot be written.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

EXIT_OK, EXIT_STORE, EXIT_BAD_INPUT = 0, 1, 2
FILES = ("history.json", "history.html")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--output-dir", required=True, type=Path)
    p.add_argument("--model", default=None, help="only this model's releases (the model name)")
    p.add_argument("--device", default=None, help="only releases on this device")
    return p.parse_args(argv)


def write_history(output_dir: Path, model: str | None = None, device: str | None = None,
                  url: str | None = None) -> dict:
    """Read the store at ``url`` (default: the configured one) and write both files; returns the document."""
    from history.store import open_store
    from history.timeline import history_document
    from reports.history_page import render_history_html

    output_dir = output_dir.resolve()
    output_dir.mkdir(parents=True, exist_ok=True)
    with open_store(url) as store:
        doc = history_document(store, output_dir, model=model, device=device)
    (output_dir / "history.json").write_text(json.dumps(doc, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    (output_dir / "history.html").write_text(render_history_html(doc), encoding="utf-8")
    return doc


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(argv)
    except SystemExit as exc:
        return EXIT_BAD_INPUT if exc.code else EXIT_OK
    from history.store import HistoryError

    try:
        doc = write_history(args.output_dir, args.model, args.device)
    except HistoryError as exc:
        print(f"history: {exc}", file=sys.stderr)
        return EXIT_STORE
    except OSError as exc:
        print(f"history: cannot write to {args.output_dir}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for name in FILES:
        print(f"history: wrote {args.output_dir / name}", flush=True)
    print(f"history: {len(doc['runs'])} release(s) of {len(doc['specs'])} spec(s) from {doc['store']}", flush=True)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
