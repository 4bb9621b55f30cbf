"""scripts/build_docker_images.py: plans from the catalog, the tag-only-after-smoke rule, and (with a
real Docker engine) the CPU images built from their Dockerfiles, each tagged only after a whole smoke
release through run.py --docker-server passed."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import load_script
from workflows.catalog import load_catalog

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "scripts" / "build_docker_images.py"


bdi = load_script(SCRIPT)


@pytest.fixture(scope="module")
def specs():
    return list(load_catalog().specs.values())


def test_every_spec_gets_a_recipe_or_an_upstream_note(specs):
    plans, notes = bdi.plan_builds(specs)
    planned = {s.model_id for p in plans for s in p.specs}
    noted = {n.split(":")[0] for n in notes}
    assert planned | noted == {s.model_id for s in specs} and not planned & noted
    for plan in plans:
        assert {s.docker_image for s in plan.specs} == {plan.tag}   # one plan per catalog tag
        assert (REPO_ROOT / plan.recipe.dockerfile).is_file(), plan.recipe.dockerfile
        for rel in plan.recipe.context:
            assert (REPO_ROOT / rel).exists(), rel
    assert all(n.endswith("(pulled, not built)") for n in notes)


def test_an_image_tag_is_never_shared_by_two_recipes(specs):
    """A media spec on the vLLM image would smoke-test (and ship) the wrong server."""
    vllm = next(s for s in specs if s.device_type.value == "cpu" and s.engine.value == "vllm")
    media = next(s for s in specs if s.device_type.value == "cpu" and s.engine.value == "media")
    with pytest.raises(bdi.BuildError, match="recipe"):
        bdi.plan_builds([vllm, dataclasses.replace(media, docker_image=vllm.docker_image)])
    for plan in bdi.plan_builds(specs)[0]:
        assert {bdi.recipe_for(s) for s in plan.specs} == {plan.recipe}, plan.tag


def test_the_smoke_spec_runs_without_a_model_hub(specs):
    """CI has no hub: each built image is smoke-tested with weights a package ships or the project makes."""
    for plan in bdi.plan_builds(specs)[0]:
        if plan.recipe.name.endswith("-cpu"):
            assert plan.smoke_spec.weights_source.get("kind") != "server_hub", plan.tag
    hub_first = [s for s in specs if s.weights_source.get("kind") == "server_hub" and s.engine.value == "media"
                 and s.device_type.value == "cpu"][:1]
    shipped = [s for s in specs if s.model_name == "efficientnet-lite0" and s.device_type.value == "cpu"]
    plan = bdi.BuildPlan(bdi.recipe_for(shipped[0]), shipped[0].docker_image, hub_first + shipped)
    assert plan.smoke_spec is shipped[0]


def test_dry_run_prints_tag_labels_and_commits_without_docker(capsys):
    env_without_docker = {"PATH": "/nonexistent"}
    assert bdi.main(["--model", "Llama-3.1-8B-Instruct", "--device", "t3k", "--dry-run"]) == 0
    out = capsys.readouterr().out
    spec = [s for s in load_catalog().specs.values() if s.model_name == "Llama-3.1-8B-Instruct"
            and s.device_type.value == "t3k" and s.device_model_spec.default_impl][0]
    assert f"image {spec.docker_image}" in out
    assert f'"TT_METAL_COMMIT": "{spec.tt_metal_commit}"' in out
    assert '"org.opencontainers.image.version": ' in out and "NOT BUILT HERE" in out
    assert env_without_docker  # nothing above needed a docker binary


def test_a_failed_smoke_test_never_tags_the_image(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(bdi, "ensure_base_image", lambda: ("base:1", "test"))
    monkeypatch.setattr(bdi, "serve_local_wheels", lambda: contextlib.nullcontext(""))
    monkeypatch.setattr(bdi, "build", lambda plan, base, links: 1.0)
    monkeypatch.setattr(bdi, "docker", lambda *args, **kw: calls.append(args))

    def failing_smoke(plan, run_dir):
        raise bdi.BuildError("server never became ready")

    monkeypatch.setattr(bdi, "smoke_test", failing_smoke)
    code = bdi.main(["--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--output-dir", str(tmp_path)])
    assert code == 1
    assert not any(args and args[0] == "tag" for args in calls)

    monkeypatch.setattr(bdi, "smoke_test", lambda plan, run_dir: "completion 'Paris'")
    assert bdi.main(["--model", "SmolLM2-135M-Instruct", "--device", "cpu", "--output-dir", str(tmp_path)]) == 0
    tags = [args for args in calls if args and args[0] == "tag"]
    assert len(tags) == 1 and tags[0][1].rpartition(":")[2].startswith("candidate-")


def test_the_smoke_test_is_a_whole_smoke_release_through_the_candidate(specs, tmp_path):
    plans, _ = bdi.plan_builds([s for s in specs if s.device_type.value == "cpu"])
    for plan in plans:
        cmd = bdi.smoke_command(plan, 18123, tmp_path / "run")
        joined = " ".join(cmd)
        assert "--workflow release" in joined
        # works, not fast
        assert cmd[cmd.index("--workflow-args") + 1] == "mode=smoke on_regression=warn perf_tiers=functional"
        assert "--docker-server" in cmd and f"--override-docker-image {plan.candidate}" in joined
        assert "--local-server" not in cmd and "--server-url" not in cmd


def test_a_smoke_release_past_its_deadline_is_stopped_and_named(tmp_path):
    script = "import time; print('waiting', flush=True); time.sleep(60)"
    started = time.monotonic()
    with pytest.raises(bdi.BuildError, match=r"no result within 1 s; last lines: waiting"):
        bdi._run_with_deadline([sys.executable, "-c", script], dict(os.environ), 1, "smoke release of x")
    assert time.monotonic() - started < 30  # SIGTERM ended it, not the sleep


def test_build_context_holds_only_what_the_dockerfile_copies(tmp_path):
    context = bdi.build_context(bdi.RECIPES["vllm-cpu"], tmp_path)
    files = sorted(str(p.relative_to(context)) for p in context.rglob("*") if p.is_file())
    assert files == ["VERSION", "build-ca.crt", "requirements/engine-vllm-cpu.nodeps.txt",
                     "requirements/engine-vllm-cpu.txt", "vllm-tt-metal/src/run_vllm_api_server.py",
                     "vllm-tt-metal/vllm.cpu.Dockerfile"]


def _docker_ready() -> bool:
    if not shutil.which("docker"):
        return False
    return subprocess.run(["docker", "version", "-f", "{{.Server.Version}}"], capture_output=True).returncode == 0


@pytest.mark.docker
@pytest.mark.integration
@pytest.mark.slow
def test_cpu_images_build_from_their_dockerfiles_and_pass_the_smoke_test(tmp_path):
    """Real engine: debootstrap base (cached), docker build, then a whole smoke release through each
    image (run.py --workflow release --docker-server --workflow-args mode=smoke), and only then the tag.

    Slow: two real image builds (the system layer shared through the build cache) and two whole smoke
    releases through them; on a fresh machine also the one-time debootstrap of the base rootfs. It is the
    suite's longest test, so the scheduler starts it first."""
    if not _docker_ready():
        if os.environ.get("REQUIRE_DOCKER") == "1":
            pytest.fail("REQUIRE_DOCKER=1 but no Docker engine is reachable")
        pytest.skip("no Docker engine reachable")
    env = {k: v for k, v in os.environ.items() if k != "TT_DOCKER_EXTRA_MOUNTS"}
    result = subprocess.run([sys.executable, str(SCRIPT), "--cpu-images", "--output-dir", str(tmp_path)],
                            capture_output=True, text=True, env=env, timeout=3600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    plans, _ = bdi.plan_builds([s for s in load_catalog().specs.values() if s.device_type.value == "cpu"])
    for plan in plans:
        assert f"tagged {plan.tag}" in output
        inspect = subprocess.run(["docker", "image", "inspect", "-f", "{{json .Config.Labels}}", plan.tag],
                                 capture_output=True, text=True)
        assert inspect.returncode == 0 and plan.recipe.name in inspect.stdout
        assert not image_exists(plan.candidate), f"{plan.candidate} should be renamed to {plan.tag}"
        manifests = list(tmp_path.glob(f"{plan.recipe.name}-*/manifest.json"))
        assert len(manifests) == 1, manifests
        manifest = json.loads(manifests[0].read_text())
        steps = {s["name"]: s["status"] for s in manifest["steps"]}
        assert manifest["workflow"] == "release" and manifest["status"] == "passed", steps
        assert {"evals", "benchmarks", "tests", "reports"} <= {n for n, st in steps.items() if st == "passed"}, steps
        cli_args = json.loads((manifests[0].parent / "cli_args.json").read_text())
        assert cli_args.get("docker_server"), "not through Docker"
        # Other tests' containers may run beside this one (xdist workers): only this image's must be gone.
        left = subprocess.run(["docker", "ps", "-aq", "--filter", f"ancestor={plan.tag}"], capture_output=True,
                              text=True).stdout.strip()
        assert not left, f"a smoke release left a container of {plan.tag} running: {left}"


def image_exists(tag: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0


def test_media_build_context_holds_the_server_and_its_dockerfile(tmp_path):
    """The media Dockerfile lives inside the directory it copies: both must land in the context."""
    context = bdi.build_context(bdi.RECIPES["media-cpu"], tmp_path)
    assert (context / "tt-media-server" / "media.cpu.Dockerfile").is_file()
    assert (context / "tt-media-server" / "main.py").is_file()
    assert (context / "requirements" / "media-server.txt").is_file()
    assert not list(context.rglob("__pycache__"))
