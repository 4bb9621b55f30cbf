"""The run directory and manifest contract."""

from __future__ import annotations

import json
import re

from contracts.run_dir import Manifest, RunDirectory, RunStatus, StepStatus, collect_outputs, make_run_id


def test_run_id_format() -> None:
    run_id = make_run_id("id_vllm-cpu_SmolLM2-135M-Instruct_cpu", "release")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_id_vllm-cpu_SmolLM2-135M-Instruct_cpu_release", run_id)


def test_manifest_steps_and_redaction(tmp_path) -> None:
    manifest = Manifest(run_id="r1", model_id="m", workflow="benchmarks")
    run_dir = RunDirectory(tmp_path / "run", manifest, redact=lambda t: t.replace("s3cret-value", "***"))
    step = run_dir.start_step("benchmarks")
    (run_dir.path / "benchmarks").mkdir()
    (run_dir.path / "benchmarks" / "point.json").write_text("{}")
    (run_dir.path / "benchmarks" / "outputs.json").write_text(
        json.dumps({"outputs": ["benchmarks/point.json", "benchmarks/missing.json"]}))
    run_dir.end_step(step, "passed", "ok", collect_outputs(run_dir.path, "benchmarks"))
    run_dir.record_step("tests", StepStatus.SKIPPED, "not implemented yet")
    run_dir.log("token s3cret-value \x1b[31mred\x1b[0m")
    run_dir.finish("passed")
    run_dir.close()
    data = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert {k: data[k] for k in ("run_id", "model_id", "workflow", "status")} == \
        {"run_id": "r1", "model_id": "m", "workflow": "benchmarks", "status": "passed"}
    bench, tests = data["steps"]
    assert bench["name"] == "benchmarks" and bench["status"] == "passed"
    assert bench["outputs"] == ["benchmarks/point.json"] and bench["started"] and bench["ended"]
    assert tests == {**tests, "name": "tests", "status": "skipped", "outputs": []}
    log = (tmp_path / "run" / "run.log").read_text()
    assert "s3cret-value" not in log and "token *** red" in log
    assert Manifest.read(tmp_path / "run" / "manifest.json").step("benchmarks").outputs == ["benchmarks/point.json"]


def test_interrupted_step_is_marked_failed(tmp_path) -> None:
    run_dir = RunDirectory(tmp_path, Manifest(run_id="r", model_id="m", workflow="evals"))
    run_dir.start_step("evals")
    run_dir.finish("interrupted")
    data = json.loads((tmp_path / "manifest.json").read_text())
    assert data["status"] == "interrupted"
    assert data["steps"][0]["status"] == "failed" and data["steps"][0]["detail"] == "interrupted"


def test_statuses_are_enums_in_memory_and_plain_strings_on_disk(tmp_path) -> None:
    run_dir = RunDirectory(tmp_path, Manifest(run_id="r", model_id="m", workflow="evals"))
    step = run_dir.start_step("evals")
    assert step.status is StepStatus.RUNNING
    run_dir.end_step(step, StepStatus.PASSED, "ok")
    run_dir.finish(RunStatus.PASSED)
    text = (tmp_path / "manifest.json").read_text()
    assert '"status": "passed"' in text and "StepStatus" not in text
    again = Manifest.read(tmp_path / "manifest.json")
    assert again.status is RunStatus.PASSED and again.step("evals").status is StepStatus.PASSED
    try:
        run_dir.end_step(step, "finished")  # type: ignore[arg-type]
    except ValueError as exc:
        assert "finished" in str(exc)
    else:
        raise AssertionError("an unknown step status was accepted")


def test_each_step_records_how_busy_the_hosts_cpus_were(tmp_path) -> None:
    """PSI "some total" read before and after a step: the share of its wall time some task waited for a CPU."""
    import time

    from contracts.run_dir import PSI_CPU, cpu_pressure_us

    sample = tmp_path / "cpu"
    sample.write_text("some avg10=97.41 avg60=98.47 avg300=92.18 total=8723818701\n"
                      "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    assert cpu_pressure_us(sample) == 8723818701
    assert cpu_pressure_us(tmp_path / "none") is None
    run_dir = RunDirectory(tmp_path / "run", Manifest(run_id="r1", model_id="m", workflow="benchmarks"))
    step = run_dir.start_step("benchmarks")
    time.sleep(0.2)
    run_dir.end_step(step, "passed")
    recorded = Manifest.read(tmp_path / "run" / "manifest.json").step("benchmarks").cpu_pressure
    if cpu_pressure_us(PSI_CPU) is None:
        assert recorded is None  # the host cannot say: never a made-up number
    else:
        assert recorded is not None and 0.0 <= recorded <= 1.0


def test_two_steps_open_at_once_from_two_threads(tmp_path) -> None:
    """A release runs evals and tests side by side: each starts and ends its own step in a thread of its
    own. Every manifest write stays whole (unlocked, two writers shared the temporary file and one
    os.replace found it gone), and each step keeps its own times."""
    import threading

    run_dir = RunDirectory(tmp_path / "run", Manifest(run_id="r", model_id="m", workflow="release"))
    both_open, errors = threading.Barrier(2), []

    def step(name: str) -> None:
        try:
            for i in range(60):
                record = run_dir.start_step(name)
                if i == 0:
                    both_open.wait(timeout=5)  # both steps are running now
                    assert {s.name: s.status for s in Manifest.read(run_dir.manifest_path).steps} == \
                        {"evals": StepStatus.RUNNING, "tests": StepStatus.RUNNING}
                    both_open.wait(timeout=5)  # both have looked before either ends its step
                run_dir.log(f"{name} {i}", name)
                run_dir.end_step(record, StepStatus.PASSED, f"round {i}")
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(repr(exc))

    threads = [threading.Thread(target=step, args=(name,)) for name in ("evals", "tests")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    steps = {s.name: s for s in Manifest.read(run_dir.manifest_path).steps}
    assert {n: (s.status, s.detail) for n, s in steps.items()} == \
        {"evals": (StepStatus.PASSED, "round 59"), "tests": (StepStatus.PASSED, "round 59")}
    assert all(s.started <= s.ended for s in steps.values())
    run_dir.close()
