"""The fleet side of the release matrix without a cluster: the Ray resources a host offers (Tenstorrent cards by
type and count, GPUs, the CPU), the makespan model behind ``--plan`` (checked against the exhaustive optimum
on random instances), the run directory's trip home and the dead attempt's manifest."""
from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
from types import SimpleNamespace

import pytest

from contracts import REPO_ROOT
from workflows.matrix_fleet import (
    ASSUMED_S,
    SLOT,
    history_durations,
    host_resources,
    makespan,
    missing_resource,
    parse_fleet,
    render_plan,
    spec_times,
    tenstorrent_cards,
)
from workflows.matrix_collector import mark_interrupted, pack, unpack


@pytest.mark.parametrize("cards, gpus, devices", [
    ({}, 0, {"cpu"}),
    ({}, 2, {"cpu", "gpu"}),
    ({"n150": 1}, 0, {"cpu", "n150"}),
    ({"n300": 4}, 0, {"cpu", "t3k", "n300", "n150"}),
    ({"p150": 4}, 0, {"cpu", "p150x4", "p150"}),
    ({"galaxy": 1}, 0, {"cpu", "galaxy"}),
])
def test_a_host_offers_every_catalog_device_its_cards_run_and_one_slot(cards, gpus, devices) -> None:
    resources, notes = host_resources(cards, gpus)
    assert resources == {**{f"device_{d}": 1.0 for d in devices}, SLOT: 1.0} and notes == []


def test_a_card_count_the_catalog_has_no_device_for_is_said() -> None:
    resources, notes = host_resources({"n150": 2}, 0)
    assert "device_n150" in resources and "device_n150x4" not in resources
    assert notes == ["2 n150 cards: offered as n150 (the catalog's largest that fits)"]


def test_a_spec_names_what_no_node_offers_it() -> None:
    cpu_host, bare = {"device_cpu": 1.0, SLOT: 1.0}, {"device_n150": 1.0}
    assert missing_resource("cpu", [bare, cpu_host]) is None
    assert missing_resource("n150", [bare, cpu_host]) == f"{SLOT} on a node offering device_n150"
    assert missing_resource("t3k", [bare, cpu_host]) == "device_t3k"
    assert missing_resource("cpu", []) == "device_cpu"


def test_cards_are_read_from_the_drivers_sysfs(tmp_path) -> None:
    dev, sysfs = tmp_path / "dev", tmp_path / "sys"
    for i, kind in enumerate(["n300", "n300", "P150A", "mystery"]):
        (dev / str(i)).mkdir(parents=True)
        (sysfs / f"tenstorrent!{i}").mkdir(parents=True)
        (sysfs / f"tenstorrent!{i}" / "tt_card_type").write_text(kind + "\n")
    (dev / "9").mkdir()
    cards, unknown = tenstorrent_cards(sysfs, dev)
    assert cards == {"n300": 2, "p150": 1}
    assert [u.split(":")[0] for u in unknown] == ["/dev/tenstorrent/3", "/dev/tenstorrent/9"]


def test_run_py_prints_the_resources_json_for_ray_start() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TT_INFERENCE_ORCHESTRATOR"}
    done = subprocess.run([sys.executable, str(REPO_ROOT / "run.py"), "--host-resources"], capture_output=True,
                          text=True, timeout=120, cwd=REPO_ROOT, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    resources = json.loads(done.stdout.strip().splitlines()[-1])
    assert resources["device_cpu"] == 1.0 and resources[SLOT] == 1.0


def _optimum(times: list[float], hosts: int) -> float:
    best = float("inf")
    for assignment in itertools.product(range(hosts), repeat=len(times)):
        loads = [0.0] * hosts
        for t, h in zip(times, assignment):
            loads[h] += t
        best = min(best, max(loads))
    return best


def test_the_makespan_is_within_its_bound_of_the_optimum_on_random_instances() -> None:
    """Simulation against the exhaustive optimum: longest-first list scheduling is never better than the
    optimum and never worse than 4/3 of it (Graham's bound), on 300 random small fleets."""
    rng = random.Random(54)
    worst = 1.0
    for _ in range(300):
        hosts = rng.randint(1, 3)
        times = [rng.uniform(1, 100) for _ in range(rng.randint(1, 7))]
        got, best = makespan(times, hosts), _optimum(times, hosts)
        assert best - 1e-9 <= got <= best * 4 / 3 + 1e-9
        assert got >= max(max(times), sum(times) / hosts) - 1e-9
        worst = max(worst, got / best)
    assert worst < 4 / 3


def _spec(model: str, device: str, impl: str = "impl"):
    return SimpleNamespace(model_name=model, device_type=SimpleNamespace(value=device),
                           impl=SimpleNamespace(impl_name=impl))


def test_the_plan_uses_measured_times_where_the_history_has_them() -> None:
    entry = lambda model, start, end, status="passed": SimpleNamespace(  # noqa: E731
        model=model, device="n150", impl="impl", workflow="release", run_status=status,
        started=f"2026-01-01T00:{start}:00+00:00", ended=f"2026-01-01T00:{end}:00+00:00")
    durations = history_durations([entry("a", "00", "10"), entry("a", "00", "30"), entry("a", "00", "20"),
                                   entry("a", "00", "50", "interrupted"), entry("b", "00", "05")], "release")
    assert durations == {"a n150 impl": [600.0, 1800.0, 1200.0], "b n150 impl": [300.0]}
    specs = [_spec("a", "n150"), _spec("b", "n150"), _spec("c", "n150"), _spec("d", "t3k")]
    times = spec_times(specs, durations, "ci")
    assert [(t.seconds, t.measured) for t in times] == [(1200.0, 3), (300.0, 1), (ASSUMED_S["ci"], 0),
                                                        (ASSUMED_S["ci"], 0)]
    text = render_plan("nightly", "ci", times, parse_fleet("n150=2", ["n150", "t3k"]))
    assert "2 with measured times" in text and "2 assumed at 4 min each" in text
    n150 = next(line for line in text.splitlines() if line.startswith("n150"))
    assert n150.split()[1:] == ["3", "29", "min", "2", "20", "min"], n150  # 1200 | 300 + 240
    assert "tier on 3 host(s): 20 min" in text


@pytest.mark.parametrize("text", ["0", "n150=0", "p999=2", "n150=two", "-1"])
def test_a_fleet_that_is_not_one_is_refused(text) -> None:
    with pytest.raises(ValueError, match="--plan"):
        parse_fleet(text, ["n150", "t3k"])


def test_plan_prints_the_nightly_makespan_without_running(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TT_INFERENCE_ORCHESTRATOR"}
    script = str(REPO_ROOT / "scripts" / "release_matrix.py")
    done = subprocess.run([sys.executable, script, "--tier", "nightly", "--plan", "4", "--history-url",
                           f"sqlite:///{tmp_path / 'h.sqlite3'}"], capture_output=True, text=True, timeout=120,
                          cwd=REPO_ROOT, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    from workflows.catalog import load_catalog
    from workflows.release_matrix import load_matrix, tier_specs

    count = len(tier_specs(load_matrix().tiers["nightly"], load_catalog()))
    assert f"plan: tier nightly, mode ci: {count} spec(s)" in done.stdout and "tier on " in done.stdout, done.stdout
    bad = subprocess.run([sys.executable, script, "--tier", "nightly", "--plan", "n150=0"], capture_output=True,
                         text=True, timeout=120, cwd=REPO_ROOT, env=env)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--plan" in bad.stderr, bad.stderr


def test_a_run_directory_travels_whole_and_replaces_the_older_snapshot(tmp_path) -> None:
    run = tmp_path / "node" / "run1"
    (run / "reports").mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"status": "running", "steps": [
        {"name": "benchmarks", "status": "running"}, {"name": "start_server", "status": "passed"}]}))
    (run / "reports" / "report.json").write_text("{}")
    home = tmp_path / "home" / "run1"
    home.mkdir(parents=True)
    (home / "stale.txt").write_text("from an older snapshot")
    unpack(pack(run), home)
    assert sorted(p.relative_to(home).as_posix() for p in home.rglob("*") if p.is_file()) == [
        "manifest.json", "reports/report.json"]
    mark_interrupted(home, "attempt 1 on worker-b interrupted: the node died")
    manifest = json.loads((home / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["ended"]
    assert manifest["steps"][0] == {**manifest["steps"][0], "status": "failed",
                                    "detail": "attempt 1 on worker-b interrupted: the node died"}
    assert manifest["steps"][1]["status"] == "passed"
