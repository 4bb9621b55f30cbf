"""tests/scheduling.py: how the suite is laid out over xdist workers and held to its time budget."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from tests import scheduling


class FakeItem(SimpleNamespace):
    """What the scheduler reads of a collected test: its node id, fixtures and markers."""

    def get_closest_marker(self, name: str):
        return name if name in self.markers else None


def item(nodeid: str, fixtures: tuple[str, ...] = (), markers: tuple[str, ...] = ()) -> FakeItem:
    return FakeItem(nodeid=nodeid, fixturenames=fixtures, markers=markers)


def test_tests_of_the_shared_server_are_one_group_and_the_rest_go_by_module():
    named = item("tests/a/test_x.py::test_one", fixtures=("tmp_path", "real_cpu_server"))
    marked = item("tests/b/test_y.py::test_two", markers=("real_cpu_server",))
    plain = item("tests/b/test_y.py::test_three[1-2]")
    assert scheduling.group_of(named) == scheduling.group_of(marked) == scheduling.VLLM_GROUP
    assert scheduling.group_of(plain) == "tests/b/test_y.py"
    assert not scheduling.needs_shared_server(None) and scheduling.needs_shared_server(marked)


def test_groups_run_longest_first_contiguous_and_in_collection_order_within():
    items = [item("tests/t_a.py::a1"), item("tests/t_b.py::b1"), item("tests/t_a.py::a2"),
             item("tests/t_c.py::c1", fixtures=("real_cpu_server",)), item("tests/t_b.py::b2")]
    durations = {"tests/t_a.py::a1": 1.0, "tests/t_a.py::a2": 2.0, "tests/t_b.py::b1": 10.0, "tests/t_c.py::c1": 5.0}
    ordered = [i.nodeid for i in scheduling.order_longest_first(items, durations, default_s=0.5)]
    assert ordered == ["tests/t_b.py::b1", "tests/t_b.py::b2", "tests/t_c.py::c1", "tests/t_a.py::a1",
                       "tests/t_a.py::a2"]


def test_unknown_or_unreadable_durations_are_no_durations(tmp_path):
    assert scheduling.load_durations(tmp_path / "missing.json") == {}
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert scheduling.load_durations(bad) == {}
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"t::a": 1.5, "t::b": "x"}))
    assert scheduling.load_durations(good) == {"t::a": 1.5}


def test_the_budget_fails_a_whole_run_whose_slow_tests_sum_past_it_and_an_unmarked_long_test():
    ledger = scheduling.TimeLedger()
    ledger.add("t.py::slow_one", 700.0, is_slow=True)
    ledger.add("t.py::slow_one", 5.0, is_slow=True)  # teardown adds to the same test
    ledger.add("t.py::quick", 1.0, is_slow=False)
    assert ledger.slow_total() == pytest.approx(705.0)
    assert scheduling.budget_problems(ledger, tests_run=1200, budget_s=800) == []
    over = scheduling.budget_problems(ledger, tests_run=1200, budget_s=700)
    assert len(over) == 1 and "705 s in all, over the budget of 700 s" in over[0]
    assert scheduling.budget_problems(ledger, tests_run=10, budget_s=700) == []  # a subset is not judged
    ledger.add("t.py::long_unmarked", 61.0, is_slow=False)
    (line,) = scheduling.budget_problems(ledger, tests_run=10, budget_s=700)
    assert "t.py::long_unmarked took 61 s" in line and "not marked slow" in line
    assert ledger.per_module() == [("t.py", pytest.approx(767.0), 3)]


def test_durations_are_written_for_the_next_run(tmp_path):
    ledger = scheduling.TimeLedger()
    ledger.add("t.py::b", 2.345, is_slow=False)
    ledger.add("t.py::a", 1.0, is_slow=True)
    path = tmp_path / "durations.json"
    scheduling.write_durations(path, ledger)
    assert json.loads(path.read_text()) == {"t.py::a": 1.0, "t.py::b": 2.35}
    assert scheduling.load_durations(path) == {"t.py::a": 1.0, "t.py::b": 2.35}


def _test_function(nodeid: str):
    """The test function a node id names (parameters dropped), imported from its module."""
    import importlib

    path, _, rest = nodeid.partition("::")
    module = importlib.import_module(path[:-3].replace("/", "."))
    target = module
    for name in rest.split("[", 1)[0].split("::"):
        target = getattr(target, name)
    return module, target


def test_every_test_measured_over_a_minute_is_marked_slow_and_says_why():
    """A test whose measured time (tests/durations.json) passes UNMARKED_LIMIT_S is marked slow and its
    docstring has a line starting 'Slow:' that says why it needs the time: the next capability pays for
    its own minutes in the open."""
    long_ones = {nodeid.partition("@")[0] for nodeid, seconds in scheduling.load_durations().items()
                 if seconds > scheduling.UNMARKED_LIMIT_S}
    assert long_ones, "tests/durations.json lists no long test: is it the measured file?"
    missing = []
    for nodeid in sorted(long_ones):
        try:
            module, function = _test_function(nodeid)
        except (ImportError, AttributeError):
            continue  # a test that no longer exists: the next --update-durations drops it
        marks = [m.name for m in getattr(function, "pytestmark", [])]
        module_marks = getattr(module, "pytestmark", [])
        module_marks = module_marks if isinstance(module_marks, list) else [module_marks]
        slow = "slow" in marks or "slow" in [m.name for m in module_marks]
        says_why = any(line.strip().startswith("Slow:") for line in (function.__doc__ or "").splitlines())
        if not (slow and says_why):
            missing.append(f"{nodeid} ({'no slow mark' if not slow else 'no Slow: line in its docstring'})")
    assert not missing, "long tests that do not say why:\n" + "\n".join(missing)


def test_the_timeline_has_a_line_per_phase_of_the_controllers_reports_only(tmp_path, monkeypatch):
    path = tmp_path / "timeline.jsonl"
    monkeypatch.setenv(scheduling.TIMELINE_ENV, str(path))
    monkeypatch.setattr(scheduling, "_LEDGER", scheduling.TimeLedger())
    worker_copy = SimpleNamespace(nodeid="t.py::a", when="setup", duration=0.5, keywords={}, start=10.0, stop=10.5)
    controller_copy = SimpleNamespace(nodeid="t.py::a", when="call", duration=2.0, keywords={"slow": 1},
                                      start=10.5, stop=12.5, node=SimpleNamespace(gateway=SimpleNamespace(id="gw1")))
    scheduling.pytest_runtest_logreport(worker_copy)      # a worker's own copy: no gateway, nothing written
    scheduling.pytest_runtest_logreport(controller_copy)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines == [{"nodeid": "t.py::a", "when": "call", "worker": "gw1", "start": 10.5, "stop": 12.5}]
