"""contracts/cpu_cost.py: a server tree's core-seconds include its children; energy is n/a with a reason."""
import subprocess
import sys

from contracts.cpu_cost import CostProbe, Cost, cgroup_cpu_seconds, process_tree_cpu_seconds, read_energy

BURN = "import time\nend = time.process_time() + 0.4\nwhile time.process_time() < end: pass\n"


def test_a_childs_cpu_counts_for_the_parent_tree():
    # The parent only waits; its child burns 0.4 s of CPU and is reaped, then the parent waits on stdin
    # (alive, so the probe can read it): its cutime holds the child's time.
    parent = subprocess.Popen([sys.executable, "-c",
                               f"import subprocess, sys; subprocess.run([sys.executable, '-c', {BURN!r}]); "
                               "print('done', flush=True); sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    probe = CostProbe(pid=parent.pid).start()
    try:
        assert parent.stdout.readline().strip() == "done"
        cost = probe.stop()
    finally:
        parent.stdin.close()
        parent.wait(60)
    assert cost.core_seconds is not None and cost.core_seconds >= 0.3, cost


def test_unknown_process_and_missing_counters_say_why(tmp_path):
    assert process_tree_cpu_seconds(2 ** 22 + 12345) is None
    cost = CostProbe().start().stop()
    assert cost.core_seconds is None and "not known" in cost.cpu_note
    (tmp_path / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n")
    assert cgroup_cpu_seconds(tmp_path / "cpu.stat") == 2.5
    readings, note = read_energy()
    assert (readings is None) == bool(note)
    assert Cost(2.0, None).per(4, 1000) == 500.0 and Cost(None, None).per(4) is None
