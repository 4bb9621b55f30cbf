"""How the suite is laid out over pytest-xdist workers, and the time it is allowed to take.

Why a plugin: on 2 cores half of the suite's wall time is waiting (for a server to be ready, a stall
timeout to pass, a container to stop), so tests run side by side in a few xdist workers
(``scripts/run_tests.py`` passes ``-n`` and ``--dist loadgroup``, scheduled by this module's groups).
What must not be split is kept together, and the longest work starts first:

- every test that uses the one real vLLM CPU server (``real_cpu_server``) is one group, so the server
  starts once, in one worker, and is stopped as soon as its last test ends (an idle vLLM CPU engine
  still takes a share of a core);
- Docker tests run side by side like the others: each builds and removes only its own images (its own
  tags) and checks only its own containers;
- every other test is grouped with its module, so a module-scoped server starts once.

Groups are ordered longest first (the classic longest-processing-time rule), from the measured
durations in ``tests/durations.json`` (``python3 scripts/run_tests.py --update-durations`` rewrites it
from a whole run); a test not listed there counts as a short one.

Time is made visible and held to a budget: the terminal summary prints the total per test module and
the sum of the ``slow`` tests' wall times, and the run fails when that sum passes ``SLOW_BUDGET_S``
(set from measurement) or when a test over ``UNMARKED_LIMIT_S`` is not marked ``slow``, so the next
capability pays for its own minutes. Every ``slow`` test says in its docstring why it needs the time.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

#: Where the real_cpu_server fixture leaves the function that stops its server early.
SHARED_SERVER_RELEASE = pytest.StashKey[Callable[[], None]]()
DURATIONS_FILE = Path(__file__).resolve().parent / "durations.json"
SHARED_SERVER_FIXTURE = "real_cpu_server"
VLLM_GROUP = "real-vllm-cpu-server"
#: The sum of every collected ``slow`` test's wall time (setup, call and teardown) a whole run may take.
#: Measured on 2 cores: 2084 s (`.ci/run`, 3 workers, coverage, warm caches) and 3025 s (the README's command
#: on a fresh clone and machine, 3 workers: the one-time debootstrap, model conversion and venvs land in
#: slow tests). The margin covers a busier CI host, not a new slow test: a capability that needs minutes
#: makes room for them first.
SLOW_BUDGET_S = 3600.0
#: A test that takes longer than this must be marked ``slow`` (and say why in its docstring).
UNMARKED_LIMIT_S = 60.0
#: The budget is judged only on a run that collected (nearly) the whole suite: a subset sums less.
WHOLE_RUN_MIN_TESTS = 1000


def needs_shared_server(item: pytest.Item | None) -> bool:
    """Whether a test uses the session's real vLLM server: it names the fixture, or it is marked
    ``real_cpu_server`` because a fixture of its asks for the server by name (``getfixturevalue``)."""
    if item is None:
        return False
    named = SHARED_SERVER_FIXTURE in getattr(item, "fixturenames", ())
    return named or item.get_closest_marker("real_cpu_server") is not None


def group_of(item: pytest.Item) -> str:
    """The xdist group a test runs in (see the module docstring)."""
    if needs_shared_server(item):
        return VLLM_GROUP
    return item.nodeid.split("::", 1)[0]


def load_durations(path: Path = DURATIONS_FILE) -> dict[str, float]:
    """nodeid -> measured seconds; an unreadable file is no durations (the order is then collection order)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items() if isinstance(v, (int, float))}


def order_longest_first(items: list[pytest.Item], durations: dict[str, float], default_s: float = 0.5) -> list:
    """Items regrouped so each group is contiguous, groups ordered by measured total time, longest first
    (ties keep collection order); within a group, collection order."""
    groups: dict[str, list[pytest.Item]] = defaultdict(list)
    for item in items:
        groups[group_of(item)].append(item)
    cost = {name: sum(durations.get(i.nodeid, default_s) for i in members) for name, members in groups.items()}
    order = sorted(groups, key=lambda name: -cost[name])  # sorted() is stable: ties keep first-seen order
    return [item for name in order for item in groups[name]]


#: Where the workers leave nodeid -> group for the controller's scheduler (set by the controller).
GROUPS_FILE_ENV = "TT_TEST_GROUPS_FILE"


def pytest_configure(config: pytest.Config) -> None:
    """In the xdist controller: a file the workers fill with each test's group, read by the scheduler.
    (xdist's own ``loadgroup`` writes the group into the node id, which pytest 9 no longer lets it do.)"""
    if hasattr(config, "workerinput") or not config.pluginmanager.hasplugin("xdist"):
        return
    if not getattr(config.option, "numprocesses", None):
        return
    os.environ[GROUPS_FILE_ENV] = str(Path(tempfile.gettempdir()) / f"tt-test-groups-{os.getpid()}.json")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items[:] = order_longest_first(items, load_durations())
    groups = {item.nodeid: group_of(item) for item in items}
    path = os.environ.get(GROUPS_FILE_ENV)
    if path and hasattr(config, "workerinput"):  # every worker collects the same; the file is replaced whole
        tmp = Path(f"{path}.{config.workerinput['workerid']}")
        tmp.write_text(json.dumps(groups))
        tmp.replace(path)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadgroup`` scheduling by this module's groups: each group is one unit of work, in the
    order the workers collected them (longest first)."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        _groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:
                try:
                    self._groups = json.loads(Path(os.environ[GROUPS_FILE_ENV]).read_text())
                except (KeyError, OSError, ValueError):
                    self._groups = {}
            return self._groups.get(nodeid) or nodeid.split("::", 1)[0]

    return GroupScheduling(config, log)


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the shared vLLM server once no test after this one (in this process) needs it."""
    if not needs_shared_server(item) or needs_shared_server(nextitem):
        return
    release = item.config.stash.get(SHARED_SERVER_RELEASE, None)
    if release is not None:
        release()


@dataclass
class TimeLedger:
    """Wall seconds per test (setup + call + teardown), whether it is marked slow, per module."""

    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    slow: set[str] = field(default_factory=set)

    def add(self, nodeid: str, seconds: float, is_slow: bool) -> None:
        self.seconds[nodeid] += seconds
        if is_slow:
            self.slow.add(nodeid)

    def per_module(self) -> list[tuple[str, float, int]]:
        totals: dict[str, list] = defaultdict(lambda: [0.0, 0])
        for nodeid, seconds in self.seconds.items():
            entry = totals[nodeid.split("::", 1)[0]]
            entry[0] += seconds
            entry[1] += 1
        return sorted(((m, s, n) for m, (s, n) in totals.items()), key=lambda row: -row[1])

    def slow_total(self) -> float:
        return sum(self.seconds[n] for n in self.slow)

    def unmarked_over(self, limit_s: float) -> list[tuple[str, float]]:
        return sorted(((n, s) for n, s in self.seconds.items() if s > limit_s and n not in self.slow),
                      key=lambda row: -row[1])


def budget_problems(ledger: TimeLedger, tests_run: int, budget_s: float = SLOW_BUDGET_S,
                    unmarked_limit_s: float = UNMARKED_LIMIT_S) -> list[str]:
    """What breaks the time budget, one line each (empty: within it)."""
    problems = [f"{nodeid} took {seconds:.0f} s (over {unmarked_limit_s:.0f} s) but is not marked slow"
                for nodeid, seconds in ledger.unmarked_over(unmarked_limit_s)]
    if tests_run >= WHOLE_RUN_MIN_TESTS and ledger.slow_total() > budget_s:
        problems.append(f"the slow tests took {ledger.slow_total():.0f} s in all, over the budget of "
                        f"{budget_s:.0f} s (tests/scheduling.py SLOW_BUDGET_S): make room before adding minutes")
    return problems


_LEDGER = TimeLedger()


#: Where a run leaves its timeline, when set: one JSON line per test phase (node id, phase, xdist worker, start
#: and stop in epoch seconds), to see which tests ran side by side and set them against the host's CPU use.
TIMELINE_ENV = "TT_TEST_TIMELINE"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Under xdist this runs in the controller too, with every worker's reports.
    _LEDGER.add(report.nodeid, report.duration, "slow" in report.keywords)
    timeline = os.environ.get(TIMELINE_ENV)
    gateway = getattr(getattr(report, "node", None), "gateway", None)  # set on the controller's copy only
    if timeline and gateway is not None:
        line = {"nodeid": report.nodeid, "when": report.when, "worker": gateway.id,
                "start": getattr(report, "start", 0.0), "stop": getattr(report, "stop", 0.0)}
        with open(timeline, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")


_PROBLEMS = pytest.StashKey[list]()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run over its time budget fails (after every test passed: the budget is one more check)."""
    if hasattr(session.config, "workerinput"):
        return
    problems = budget_problems(_LEDGER, len(_LEDGER.seconds))
    session.config.stash[_PROBLEMS] = problems
    if problems and session.exitstatus == 0 and os.environ.get("TT_TEST_TIME_BUDGET", "1") != "0":
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or not _LEDGER.seconds:
        return
    write = terminalreporter.write_line
    terminalreporter.section("time per test module (wall s: setup + call + teardown, summed over its tests)")
    for module, seconds, count in _LEDGER.per_module()[:40]:
        write(f"{seconds:8.1f} s  {count:4d} tests  {module}")
    write(f"slow tests: {len(_LEDGER.slow)}, {_LEDGER.slow_total():.0f} s in all (budget {SLOW_BUDGET_S:.0f} s)")
    for line in config.stash.get(_PROBLEMS, []):
        write(f"TIME BUDGET: {line}", red=True)


def write_durations(path: Path, ledger: TimeLedger) -> None:
    """The measured seconds of this run as the next runs' scheduling input (sorted, rounded)."""
    data = {nodeid: round(seconds, 2) for nodeid, seconds in sorted(ledger.seconds.items())}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n")
    tmp.replace(path)


def pytest_unconfigure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    groups_file = os.environ.pop(GROUPS_FILE_ENV, None)
    if groups_file:
        Path(groups_file).unlink(missing_ok=True)
    if os.environ.get("TT_TEST_UPDATE_DURATIONS") and _LEDGER.seconds:
        write_durations(DURATIONS_FILE, _LEDGER)
