"""docs/architecture.md holds the contracts: every file or module it names in backticks exists.

A path is looked up from the repository root, then from the folders the text names paths relative to (the media
server's package and its folder, the top-level packages); ``package/module.Name`` (a class or function in a
module) needs ``package/module.py``. Schema ids (``tt-media-point/1``) and paths inside a run directory
(``RUN_DIR/...``, ``reports/report.json``) are not repository paths.
"""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "architecture.md"
BASES = (REPO, REPO / "tt-media-server", REPO / "tt-media-server" / "media_server", REPO / "workflows",
         REPO / "benchmarking")
#: Named relative to a run directory, not the repository.
RUN_DIR_FILES = {"reports/report.json"}


def _named_paths(text: str) -> list[str]:
    paths = []
    for token in re.findall(r"`([^`\s]+)`", text):
        token = token.rstrip(".,:;)")
        if "/" not in token or token.startswith(("http", "$", "~", "/", "-")) or re.search(r"[<>*{}=|\[\]()]", token):
            continue
        if re.match(r"^[A-Z_]+/", token) or re.fullmatch(r"tt-[a-z-]+/\d+", token) or token in ("n/a", "a/b"):
            continue
        paths.append(token.split(":")[0])
    return sorted(set(paths) - RUN_DIR_FILES)


def _exists(path: str) -> bool:
    candidates = [path]
    head, _, tail = path.rpartition("/")
    if "." in tail and not tail.endswith((".py", ".md", ".yaml", ".json", ".txt", ".toml", ".sh", ".j2", ".jsonl")):
        candidates.append(f"{head}/{tail.split('.')[0]}.py")  # package/module.Name
    return any((base / candidate).exists() for base in BASES for candidate in candidates)


def test_every_path_the_architecture_names_exists():
    named = _named_paths(DOC.read_text())
    assert len(named) > 50  # the check reads the document, not nothing
    missing = [path for path in named if not _exists(path)]
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"
