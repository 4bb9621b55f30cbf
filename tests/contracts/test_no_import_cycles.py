"""No module imports one that imports it back, and no package imports a layer above it.

Why: a cycle (``servers/external.py -> readiness -> servers/base``) means neither side can be
understood, tested or replaced alone, and import order starts to matter. The graph is read from
the source (AST), counting imports inside functions too: a lazy import hides a cycle from the
interpreter, not from the design. A sub-package (``workflows/servers/``) counts as one unit, so a
cycle through any of its modules is found. Top-level packages are checked as units too: module
``benchmarking.run_benchmarks -> reports.acceptance`` and ``reports.legend -> benchmarking.point_record``
made no module cycle, yet tied the two packages into one.

The layers (docs/architecture.md draws them): contracts, then records, then the client packages,
then reports, then workflows. ``LAYERS`` lists what each package may import.

The media server (``tt-media-server/``, imported as ``media_server`` with that folder on the path) is
a second source root, checked the same way: no cycle among its units, and ``MEDIA_SERVER_LAYERS``
orders them from the settings and error contracts at the bottom, through the kinds' code and the
runners, to the worker pool, the HTTP routes and the app on top, so each layer can be read and tested
with only the ones below it. From the repository it may import ``contracts/`` alone: it ships in its
own image with its own venv. Two of its modules load others by name, which the graph does not see:
the runner registry (``"module:Class"`` within ``runners/``, so torch and the TT stack are imported
only where a runner is served) and the app (its optional routers in ``api/``, a layer below it);
every import written in code counts, wherever it stands.
"""

from __future__ import annotations

import ast
from pathlib import Path

from contracts import REPO_ROOT

SKIP_DIRS = {"tests", ".workflow_venvs", "node_modules", ".git", "workflow_logs"}
#: Folders whose packages are imported by their top-level name: the repository (its root on the path)
#: and the media server (run from its own folder, so its package is ``media_server``).
SOURCE_ROOTS = (REPO_ROOT, REPO_ROOT / "tt-media-server")


def _packages() -> list[Path]:
    found = sorted(p.parent for root in SOURCE_ROOTS for p in root.glob("*/__init__.py")
                   if p.parent.name not in SKIP_DIRS)
    names = [package.name for package in found]
    assert len(names) == len(set(names)), f"two source roots hold a package of one name: {names}"
    return found


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in _packages():
        root = package.parent
        for path in package.rglob("*.py"):
            rel = path.relative_to(root).with_suffix("")
            if any(part in SKIP_DIRS or part.startswith(".") for part in rel.parts):
                continue
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            if all((root.joinpath(*parts[:i]) / "__init__.py").exists() for i in range(1, len(parts))):
                found[".".join(parts)] = path
    return found


def _unit(module: str, modules: dict[str, Path]) -> str:
    """A module of a sub-package belongs to that sub-package; top-level package modules stand alone."""
    parts = module.split(".")
    if len(parts) >= 3 or (len(parts) == 2 and modules[module].name == "__init__.py"):
        return ".".join(parts[:2])
    return module


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {_unit(m, modules): set() for m in modules}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                # `from pkg import sub` imports the module pkg.sub; `from pkg import name` reads pkg.
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                resolved = _resolve(target, modules)
                if resolved is not None:
                    src, dst = _unit(module, modules), _unit(resolved, modules)
                    if src != dst:
                        graph[src].add(dst)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_checker_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_servers_and_readiness_are_one_way():
    graph = import_graph()
    assert "workflows.servers" in graph["workflows.readiness"]
    assert "workflows.readiness" not in graph["workflows.servers"]


def test_no_module_imports_one_that_imports_it_back():
    assert cycles(import_graph()) == []


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph folded onto top-level packages."""
    packages: dict[str, set[str]] = {}
    for src, dsts in graph.items():
        top = src.split(".")[0]
        packages.setdefault(top, set()).update(d.split(".")[0] for d in dsts if d.split(".")[0] != top)
    return packages


CLIENTS = {"benchmarking", "evals", "stress_tests", "media_clients", "server_tests", "deploy"}
#: package -> the packages it may import. The client packages may not import each other except
#: stress_tests, which drives load with the benchmark's and the media clients' request code.
LAYERS = {
    "contracts": set(),
    "records": {"contracts"},
    **{client: {"contracts", "records"} for client in CLIENTS},
    "history": {"contracts", "records"},  # the run history indexes report records
    "reports": {"contracts", "records", "history"},
    "workflows": {"contracts", "records", "history"} | CLIENTS,
}
LAYERS["stress_tests"] |= {"benchmarking", "media_clients"}
# The media server's own folder: it shares contracts/ (the one percentile, the intervals) and nothing
# else; its JWT gateway stands alone.
LAYERS["media_server"] = {"contracts"}
LAYERS["gateway"] = set()


def test_the_package_checker_finds_a_package_cycle_made_of_one_way_modules():
    modules = {"a.x": {"b.y"}, "b.y": set(), "b.z": {"a.w"}, "a.w": set()}
    assert cycles(modules) == []
    assert cycles(package_graph(modules)) == [["a", "b"]]


def test_no_package_imports_one_that_imports_it_back():
    assert cycles(package_graph(import_graph())) == []


def test_each_package_imports_only_the_layers_below_it():
    packages = package_graph(import_graph())
    assert set(LAYERS) >= set(packages), f"a new package needs a place in LAYERS: {set(packages) - set(LAYERS)}"
    upward = {pkg: sorted(deps - LAYERS[pkg]) for pkg, deps in packages.items() if deps - LAYERS[pkg]}
    assert upward == {}


#: The media server's units (a sub-package is one unit), bottom layer first; a unit may import its own
#: layer and those below it, never one above. Why this order: settings and the error and request-id
#: contracts are what everything reads; the kinds' own code (audio, images, embeddings) knows nothing
#: of runners; the runners adapt it to the runner protocol; the worker processes, the per-model pools
#: and the scheduler run runners; the transcription fan-out works over the scheduler; the HTTP routes
#: call the scheduler; the app composes the routes and checks every settings class at start-up.
MEDIA_SERVER_LAYERS: list[set[str]] = [
    # contracts (``media_server`` is the package's empty __init__)
    {"media_server", "request_id", "errors", "metrics", "devices", "onnx_cache"},
    {"config"},  # the server's settings
    {"speech", "vision", "embeddings"},  # the kinds' own code and settings
    {"runners"},  # the runner protocol, registry, catalog and the runners
    {"worker_messages", "workers", "pool", "scheduler"},  # execution
    {"transcription"},  # work fanned out over the scheduler
    {"auth", "api"},  # HTTP
    {"all_settings", "app"},  # the composition root
]


def _media_server_layer(unit: str) -> int:
    name = unit.removeprefix("media_server.")
    layers = [i for i, layer in enumerate(MEDIA_SERVER_LAYERS) if name in layer]
    assert layers, f"a new media server unit needs a place in MEDIA_SERVER_LAYERS: {unit}"
    return layers[0]


def upward_media_server_imports(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """Each media server unit that imports a unit of a higher layer, with those units."""
    def in_server(unit: str) -> bool:
        return unit == "media_server" or unit.startswith("media_server.")

    upward = {src: sorted(dst for dst in dsts if in_server(dst) and _media_server_layer(dst) > _media_server_layer(src))
              for src, dsts in graph.items() if in_server(src)}
    return {src: dsts for src, dsts in upward.items() if dsts}


def test_the_layer_checker_finds_an_upward_import():
    graph = {"media_server.config": {"media_server.runners", "media_server.devices"},
             "media_server.api": {"media_server.scheduler"}, "benchmarking": {"media_server.api"}}
    assert upward_media_server_imports(graph) == {"media_server.config": ["media_server.runners"]}


def test_the_graph_covers_the_media_server():
    graph = import_graph()
    assert "media_server.runners" in graph["media_server.pool"]
    assert "media_server.scheduler" in graph["media_server.api"]


def test_each_media_server_unit_imports_only_its_layer_and_those_below():
    assert upward_media_server_imports(import_graph()) == {}
