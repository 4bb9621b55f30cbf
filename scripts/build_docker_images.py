#!/usr/bin/env python3
"""Build the server images the catalog names, smoke-test each, and only then give it its real tag.

    python3 scripts/build_docker_images.py --model SmolLM2-135M-Instruct --device cpu [--dry-run]
    python3 scripts/build_docker_images.py --cpu-images            # every buildable CPU image
    python3 scripts/build_docker_images.py --model Llama-3.1-8B-Instruct --device t3k --dry-run

Why the image is first built under a candidate tag: a tag is a promise that the image serves
everything the workflows send. The candidate goes through a whole ``run.py --workflow release
--workflow-args mode=smoke`` (``--docker-server --override-docker-image``: the same launch a user
gets, with nothing bind-mounted from the host but the weights and the spec): evals (logprobs and
echo), benchmarks (streaming), the API tests (chat, tokenize, ...), stress tests, reports. Only a
release that exits 0 gets the image its real tag, exactly as the catalog derives it. A failed smoke
release leaves the real tag untouched and exits 1, quoting run.py's closing lines (which name the
server's own error).

Offline by design: the base image is a Debian rootfs made with debootstrap from the machine's
configured Debian package source, imported once and cached as a tarball; Python packages come
from the package index (the build uses the host's network) plus the local wheel directories pip
is configured with (served to the build over loopback, so no wheel is baked into a layer).
Dockerfiles take ``BASE_IMAGE``, so the same files build on Ubuntu images where registries exist.

Stdlib only; needs ``docker`` (DOCKER_HOST may point at a private engine) and, for a cold base,
``debootstrap``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import http.server
import json
import os
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
import _repo  # noqa: E402,F401  (the repository importable: scripts/_repo.py)

from contracts.model_spec import DeviceType, InferenceEngine, ModelSpec, project_version  # noqa: E402

LABEL = "org.tenstorrent.tt-inference-server"
BASE_IMAGE = "tt-inference-server/base-debian:bookworm"
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates", "libgomp1", "libnuma1", "tini")
# A smoke release is 1.5-3 min on 2 cores once the client venvs exist; building them cold takes longer.
SMOKE_TIMEOUT_S = 1500
# The smoke release decides whether the image works, not how fast the host is: a speed regression
# against an earlier run on this host (the release's default comparison) is shown in its report but does
# not stop the tag, and of the spec's performance targets only the functional tier (a working server) is
# required; the higher tiers are measured and shown. Smoke samples are small and an image build shares
# the host with whatever else runs (a COMPLETE spec's t/s/u target failed on a host loaded by other jobs).
SMOKE_WORKFLOW_ARGS = "mode=smoke on_regression=warn perf_tiers=functional"
SMOKE_TAIL_LINES = 40
SMOKE_FAILURE_LINES = 12


@dataclass(frozen=True)
class ImageRecipe:
    """One Dockerfile variant: what goes into its build context and whether it builds here."""

    name: str
    dockerfile: str                          # relative to the repo root
    context: tuple[str, ...]                 # repo paths copied into the build context
    buildable_offline: bool                  # False: needs registries or hardware this tool cannot assume
    note: str = ""


RECIPES: dict[str, ImageRecipe] = {r.name: r for r in (
    ImageRecipe("vllm-cpu", "vllm-tt-metal/vllm.cpu.Dockerfile",
                ("requirements/engine-vllm-cpu.txt", "requirements/engine-vllm-cpu.nodeps.txt",
                 "vllm-tt-metal/src/run_vllm_api_server.py"), True),
    ImageRecipe("media-cpu", "tt-media-server/media.cpu.Dockerfile",
                ("requirements/media-server.txt", "tt-media-server"), True),
    ImageRecipe("vllm-tt-metal", "vllm-tt-metal/vllm.tt-metal.Dockerfile",
                ("vllm-tt-metal/src/run_vllm_api_server.py",), False,
                "builds tt-metal and the TT vLLM fork from source at the spec's commits (needs GitHub)"),
    ImageRecipe("media-tt-metal", "tt-media-server/media.tt-metal.Dockerfile",
                ("requirements/media-server.txt", "tt-media-server"), False,
                "builds tt-metal at the spec's commit (needs GitHub)"),
)}


def recipe_for(spec: ModelSpec) -> ImageRecipe | None:
    """The recipe that builds a spec's image; None for upstream images that are pulled, not built."""
    media = spec.engine is InferenceEngine.MEDIA
    if spec.device_type is DeviceType.GPU:
        return None
    if spec.device_type is DeviceType.CPU:
        return RECIPES["media-cpu" if media else "vllm-cpu"]
    return RECIPES["media-tt-metal" if media else "vllm-tt-metal"]


@dataclass
class BuildPlan:
    recipe: ImageRecipe
    tag: str                                  # exactly as the catalog derives it
    specs: list[ModelSpec] = field(default_factory=list)

    @property
    def candidate(self) -> str:
        repo, _, version = self.tag.rpartition(":")
        return f"{repo}:candidate-{version}"

    @property
    def smoke_spec(self) -> ModelSpec:
        """The first spec whose weights exist without a model hub (shipped in a package, generated or
        packed with the launcher): a smoke release must be able to run on a machine with no hub access."""
        for spec in self.specs:
            if spec.weights_source.get("kind") != "server_hub":
                return spec
        return self.specs[0]

    def build_args(self, base_image: str) -> dict[str, str]:
        args = {"BASE_IMAGE": base_image}
        spec = self.smoke_spec
        if spec.tt_metal_commit:
            args["TT_METAL_COMMIT"] = spec.tt_metal_commit
        if spec.vllm_commit:
            args["VLLM_COMMIT"] = spec.vllm_commit
        return args

    def labels(self) -> dict[str, str]:
        spec = self.smoke_spec
        return {"org.opencontainers.image.version": project_version(),
                "org.opencontainers.image.title": self.tag.rpartition(":")[0].rsplit("/", 1)[-1],
                f"{LABEL}.recipe": self.recipe.name, f"{LABEL}.spec-version": spec.version,
                f"{LABEL}.tt-metal-commit": spec.tt_metal_commit or "",
                f"{LABEL}.vllm-commit": spec.vllm_commit or "",
                f"{LABEL}.model-ids": ",".join(sorted(s.model_id for s in self.specs))}

    def describe(self, base_image: str) -> str:
        lines = [f"image {self.tag}", f"  recipe      {self.recipe.name} ({self.recipe.dockerfile})",
                 f"  built as    {self.candidate}, tagged {self.tag} only after the smoke test passes",
                 f"  build args  {json.dumps(self.build_args(base_image))}",
                 f"  labels      {json.dumps(self.labels())}",
                 f"  serves      {', '.join(s.model_id for s in self.specs)}",
                 f"  smoke test  run.py --model {self.smoke_spec.model_name} --device "
                 f"{self.smoke_spec.device_type.value} --impl {self.smoke_spec.impl.impl_name} --workflow release "
                 f"--docker-server --override-docker-image {self.candidate} --workflow-args '{SMOKE_WORKFLOW_ARGS}'"
                 f" (must exit 0)"]
        if not self.recipe.buildable_offline:
            lines.append(f"  NOT BUILT HERE: {self.recipe.note}")
        return "\n".join(lines)


class BuildError(RuntimeError):
    """One line for the user; exit code 1."""


def log(message: str) -> None:
    print(f"[build_docker_images] {message}", flush=True)


# ----------------------------------------------------------------------------- planning


def plan_builds(specs: list[ModelSpec]) -> tuple[list[BuildPlan], list[str]]:
    """One plan per distinct image tag, and one note per spec whose image is not built by us."""
    plans: dict[str, BuildPlan] = {}
    notes = []
    for spec in specs:
        recipe = recipe_for(spec)
        if recipe is None:
            notes.append(f"{spec.model_id}: {spec.docker_image} is an upstream image (pulled, not built)")
            continue
        plan = plans.setdefault(spec.docker_image, BuildPlan(recipe, spec.docker_image))
        if plan.recipe is not recipe:
            raise BuildError(f"{spec.model_id} names image {spec.docker_image}, which {plan.specs[0].model_id} "
                             f"builds with recipe {plan.recipe.name}, but it needs {recipe.name}")
        plan.specs.append(spec)
    return list(plans.values()), notes


def select_specs(args: argparse.Namespace) -> list[ModelSpec]:
    from workflows.catalog import load_catalog

    specs = list(load_catalog().specs.values())
    if args.cpu_images:
        chosen = [s for s in specs if s.device_type is DeviceType.CPU]
    else:
        chosen = [s for s in specs if s.model_name == args.model and s.device_type.value == args.device
                  and (s.impl.impl_name == args.impl if args.impl else s.device_model_spec.default_impl)]
    if not chosen:
        raise SystemExit("build_docker_images: no catalog spec matches (see `python3 run.py --list`)")
    return chosen


# ----------------------------------------------------------------------------- docker helpers


def docker(*args: str, check: bool = True, capture: bool = True,
           env: dict | None = None) -> subprocess.CompletedProcess:
    result = subprocess.run(["docker", *args], capture_output=capture, text=True, env=env)
    if check and result.returncode != 0:
        detail = (result.stderr or "").strip().splitlines()[-1:] if capture else ""
        raise BuildError(f"docker {' '.join(args[:2])} failed (exit {result.returncode}): {detail}")
    return result


def image_exists(tag: str) -> bool:
    return docker("image", "inspect", tag, check=False).returncode == 0


def cache_dir() -> Path:
    root = Path(os.environ.get("TT_IMAGE_CACHE", Path.home() / ".cache" / "tt-inference-server" / "images"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def debian_mirror() -> str:
    """The first Debian archive the machine's apt is configured with (deb822 or one-line format)."""
    sources = [Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list")]
    for path in sources:
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            line = line.strip()
            if line.startswith("URIs:") and "security" not in line:
                return line.split()[1]
            if line.startswith("deb ") and "security" not in line:
                return line.split()[1]
    return "http://deb.debian.org/debian"


def ensure_base_image() -> tuple[str, str]:
    """(image, how it was obtained): imported from the cached rootfs tarball, built once by debootstrap."""
    if image_exists(BASE_IMAGE):
        return BASE_IMAGE, "already in the engine"
    tarball = cache_dir() / f"debian-bookworm-{'-'.join(BASE_PACKAGES)}.tar"
    how = "imported from the cached rootfs"
    if not tarball.exists():
        if not shutil.which("debootstrap"):
            raise BuildError("debootstrap is not installed (apt-get install debootstrap) and no cached base rootfs "
                             "exists")
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="tt-rootfs-") as tmp:
            rootfs = Path(tmp) / "rootfs"
            mirror = debian_mirror()
            log(f"debootstrap bookworm from {mirror} (one time, about 2 minutes)")
            cmd = ["debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", "bookworm",
                   str(rootfs), mirror]
            result = subprocess.run(cmd, capture_output=True, text=True)
            if result.returncode != 0:
                raise BuildError(f"debootstrap failed: {result.stdout.strip().splitlines()[-1:]}")
            shutil.rmtree(rootfs / "var" / "cache" / "apt" / "archives", ignore_errors=True)
            partial = tarball.with_suffix(".partial")
            subprocess.run(["tar", "-C", str(rootfs), "-cf", str(partial), "."], check=True)
            partial.replace(tarball)
        how = f"debootstrapped in {time.monotonic() - started:.0f} s, then imported"
    with open(tarball, "rb") as fh:
        result = subprocess.run(["docker", "import", "-c", 'CMD ["/bin/bash"]', "-", BASE_IMAGE], stdin=fh,
                                capture_output=True, text=True)
    if result.returncode != 0:
        raise BuildError(f"docker import of {tarball} failed: {result.stderr.strip()}")
    return BASE_IMAGE, how


class _QuietFileHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:  # the build log says what was fetched
        pass


@contextlib.contextmanager
def serve_local_wheels():
    """Serve pip's local wheel directories over loopback; yields the find-links URLs (maybe none)."""
    from workflows.venvs import torch_cpu_source_args

    source = torch_cpu_source_args()
    if source[0] != "--find-links":
        yield ""
        return
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(_QuietFileHandler, directory=source[1]))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def build_context(recipe: ImageRecipe, into: Path) -> Path:
    """A small build context with only what the Dockerfile copies (the repo holds GBs of venvs)."""
    for rel in (recipe.dockerfile, *recipe.context):
        src = REPO_ROOT / rel
        dst = into / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, dirs_exist_ok=True,  # the Dockerfile may live inside it
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".env", "benchmarks"))
        else:
            shutil.copy2(src, dst)
    (into / "VERSION").write_text(project_version() + "\n")
    # The build's pip and uv trust what this host trusts (a TLS-intercepting proxy's CA included).
    shutil.copy2(host_ca_bundle(), into / "build-ca.crt")
    return into


def host_ca_bundle() -> Path:
    """The CA bundle this host's Python clients use: $SSL_CERT_FILE, pip's `cert`, else the system one."""
    for candidate in (os.environ.get("SSL_CERT_FILE"), os.environ.get("PIP_CERT"), _pip_config_value("cert"),
                      "/etc/ssl/certs/ca-certificates.crt"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise BuildError("no CA bundle found for the build (set SSL_CERT_FILE)")


def _pip_config_value(key: str) -> str | None:
    import configparser

    for path in (Path("/etc/pip.conf"), Path("/etc/xdg/pip/pip.conf"), Path.home() / ".config/pip/pip.conf"):
        parser = configparser.ConfigParser()
        try:
            parser.read(path)
        except configparser.Error:
            continue
        if parser.has_option("global", key):
            return parser.get("global", key)
    return None


def build(plan: BuildPlan, base_image: str, find_links: str) -> float:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"tt-build-{plan.recipe.name}-") as tmp:
        context = build_context(plan.recipe, Path(tmp))
        cmd = ["build", "--force-rm", "--network", "host", "-f", str(context / plan.recipe.dockerfile),
               "-t", plan.candidate]
        for key, value in {**plan.build_args(base_image), "WHEELS_URL": find_links}.items():
            cmd += ["--build-arg", f"{key}={value}"]
        for key, value in plan.labels().items():
            cmd += ["--label", f"{key}={value}"]
        cmd.append(str(context))
        log(f"docker {shlex.join(cmd[:6])} ... (log: {cache_dir() / (plan.recipe.name + '.build.log')})")
        log_path = cache_dir() / f"{plan.recipe.name}.build.log"
        with open(log_path, "w") as fh:
            # The legacy builder: Debian's engine has no buildx; it runs RUN steps on the host network.
            code = subprocess.call(["docker", *cmd], stdout=fh, stderr=subprocess.STDOUT,
                                   env={**os.environ, "DOCKER_BUILDKIT": "0"})
        if code != 0:
            tail = log_path.read_text().strip().splitlines()[-5:]
            raise BuildError(f"docker build of {plan.candidate} failed (exit {code}); last lines: {' | '.join(tail)}")
    return time.monotonic() - started


# ----------------------------------------------------------------------------- smoke test


def smoke_command(plan: BuildPlan, port: int, run_dir: Path) -> list[str]:
    """run.py's whole release in smoke size through the candidate, launched as a user launches it."""
    spec = plan.smoke_spec
    return [sys.executable, str(REPO_ROOT / "run.py"), "--model", spec.model_name, "--device", spec.device_type.value,
            "--impl", spec.impl.impl_name, "--workflow", "release", "--docker-server",
            "--override-docker-image", plan.candidate, "--service-port", str(port),
            "--workflow-args", SMOKE_WORKFLOW_ARGS, "--output-dir", str(run_dir)]


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _remove_containers(port: int) -> None:
    """A container a killed run.py could not remove, found by its published port."""
    ids = docker("ps", "-aq", "--filter", f"label={LABEL}", "--filter", f"publish={port}", check=False).stdout.split()
    if ids:
        docker("rm", "-f", *ids, check=False)


def _run_with_deadline(cmd: list[str], env: dict, deadline_s: float, what: str) -> tuple[int, list[str]]:
    """Run ``cmd``, echo its lines, return (exit code, last lines). At the deadline run.py gets SIGTERM
    (it stops its client, renders the report and removes the container), SIGKILL 120 s later."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, bufsize=1)
    timed_out = threading.Event()

    def expire() -> None:
        timed_out.set()
        log(f"{what}: no result within {deadline_s:.0f} s; stopping run.py (SIGTERM)")
        proc.terminate()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            log(f"{what}: run.py still running 120 s after SIGTERM; killing it")
            proc.kill()

    timer = threading.Timer(deadline_s, expire)
    timer.daemon = True
    timer.start()
    last: collections.deque[str] = collections.deque(maxlen=SMOKE_TAIL_LINES)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            last.append(line)
            print(f"  | {line}", flush=True)
        code = proc.wait()
    finally:
        timer.cancel()
    if timed_out.is_set():
        raise BuildError(f"{what}: no result within {deadline_s:.0f} s; last lines: {' | '.join(last)}")
    return code, list(last)


def smoke_test(plan: BuildPlan, run_dir: Path) -> str:
    """A whole smoke-sized release (evals, benchmarks, tests, stress tests, reports) through the candidate.

    Why a release, not one request: an engine compiles and loads things on first use (inductor
    kernels for logprobs, tokenizer routes, streaming), so an image that answers one completion can
    still fail the first eval. Only a release exercises every request kind the workflows send.
    """
    port, api_key = _free_port(), secrets.token_urlsafe(24)
    cmd = smoke_command(plan, port, run_dir)
    env = {**os.environ, "VLLM_API_KEY": api_key, "API_KEY": api_key}
    env.pop("TT_DOCKER_EXTRA_MOUNTS", None)  # everything must come from the image
    log(f"smoke release: {shlex.join(cmd[1:])}")
    started = time.monotonic()
    try:
        code, last = _run_with_deadline(cmd, env, SMOKE_TIMEOUT_S, f"smoke release of {plan.candidate}")
    finally:
        _remove_containers(port)
    if code != 0:
        raise BuildError(f"smoke release: run.py exited {code}: {' | '.join(last[-SMOKE_FAILURE_LINES:])}")
    return f"release {SMOKE_WORKFLOW_ARGS} passed in {time.monotonic() - started:.0f} s: {_passed_steps(run_dir)}"


def _passed_steps(run_dir: Path) -> str:
    try:
        steps = json.loads((run_dir / "manifest.json").read_text())["steps"]
    except (OSError, ValueError, KeyError):
        return "(no manifest)"
    return ", ".join(f"{s['name']} {s['status']}" for s in steps if s.get("name") not in ("teardown",))


# ----------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", help="model name as in `run.py --list`")
    which.add_argument("--cpu-images", action="store_true", help="every image the CPU specs name")
    p.add_argument("--device", default="cpu")
    p.add_argument("--impl", default=None, help="default: the device's default impl")
    p.add_argument("--dry-run", action="store_true", help="print the plan; build nothing")
    p.add_argument("--skip-smoke-test", action="store_true",
                   help="build the candidate only; without a smoke test it is never given the real tag")
    p.add_argument("--output-dir", type=Path, default=None,
                   help="where the smoke releases' run directories go (one new directory per image)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    plans, notes = plan_builds(select_specs(args))
    for note in notes:
        log(note)
    if args.dry_run:
        for plan in plans:
            print(plan.describe(BASE_IMAGE))
        return 0
    runs_root = args.output_dir or Path(tempfile.mkdtemp(prefix="tt-image-smoke-"))
    failures = []
    for plan in plans:
        if not plan.recipe.buildable_offline:
            log(f"skipping {plan.tag}: {plan.recipe.note}")
            continue
        try:
            base, how = ensure_base_image()
            log(f"base image {base}: {how}")
            with serve_local_wheels() as find_links:
                seconds = build(plan, base, find_links)
            log(f"built {plan.candidate} in {seconds:.0f} s")
            if args.skip_smoke_test:
                log(f"smoke test skipped: {plan.tag} NOT tagged")
                continue
            answer = smoke_test(plan, runs_root / f"{plan.recipe.name}-{time.strftime('%Y%m%d-%H%M%S')}")
            docker("tag", plan.candidate, plan.tag)
            docker("rmi", plan.candidate, check=False)  # only the candidate name goes; the image stays
            log(f"smoke test passed ({answer}); tagged {plan.tag}")
        except BuildError as exc:
            failures.append(f"{plan.tag}: {exc} (the candidate, if built, is kept as {plan.candidate} to debug)")
            log(f"FAILED {plan.tag}: {exc}")
    if failures:
        log(f"{len(failures)} image(s) failed; their real tags were not touched:")
        for line in failures:
            log(f"  {line}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
