"""Helpers shared by every test package (import as ``from tests.helpers import ...``).

Plain functions and classes live here; fixtures live in ``tests/conftest.py``. One copy of each,
so a fix to how tests pick ports or start fake servers reaches every test at once.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import os
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

from contracts import REPO_ROOT
from contracts.model_spec import ModelSpec


CPU_SPEC_ID = "id_vllm-cpu_SmolLM2-135M-Instruct_cpu"
MEDIA_SPEC_ID = "id_tt-media_all-MiniLM-L6-v2_cpu"


@functools.lru_cache(maxsize=None)
def _catalog_spec(spec_id: str) -> dict:
    from workflows.catalog import load_catalog

    return load_catalog().specs[spec_id].to_dict()


def model_spec(spec_id: str = CPU_SPEC_ID, **changes) -> ModelSpec:
    """A catalog spec with ``changes`` applied; ``device_model_spec`` changes merge key by key and
    ``perf_reference`` entries may be plain dicts. Clients read every spec through ``ModelSpec``,
    so a test's spec is a whole one, never a dict of the few keys a test thought of."""
    data = copy.deepcopy(_catalog_spec(spec_id))
    dms = dict(changes.pop("device_model_spec", {}))
    data.update(changes)
    data["device_model_spec"].update(dms)
    return ModelSpec.from_dict(data)


def write_model_spec(path: Path, spec_id: str = CPU_SPEC_ID, **changes) -> Path:
    """``model_spec(...)`` written to ``path`` (what the orchestrator hands a client as --model-spec-json)."""
    return model_spec(spec_id, **changes).write(Path(path))


def load_script(path: Path):
    """A script under scripts/ imported as a module (scripts are not a package), registered in
    sys.modules under its file name so its dataclasses can find their module. Its directory goes on sys.path
    as running it by path would put it, so its ``import _repo`` (scripts/_repo.py) and sibling imports resolve."""
    directory = str(Path(path).resolve().parent)
    if directory not in sys.path:
        sys.path.append(directory)
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def verdict_exit_code(verdict: str) -> int:
    """The exit code run.py owes a release whose verdict is `verdict` (PASS 0, FAIL 3, INCONCLUSIVE 4)."""
    from workflows.pipeline import VERDICT_EXITS

    return 0 if verdict == "PASS" else {name: code for code, name in VERDICT_EXITS.items()}[verdict]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class FakeServerProcess:
    """One of the shipped fake servers in its own process, on a port the OS picks.

    ``module`` is ``benchmarking.stub_server`` (delay-programmed) or ``benchmarking.fault_server``
    (named faults); both print ``<NAME>_LISTENING <port>`` first, which is waited for here.
    """

    def __init__(self, module: str = "benchmarking.stub_server", *args: str) -> None:
        env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
        self.proc = subprocess.Popen([sys.executable, "-m", module, "--port", "0", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO_ROOT)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if "_LISTENING " not in line:
            self.stop()
            raise RuntimeError(f"{module} did not start: {line!r}")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def get(self, path: str) -> bytes:
        with urllib.request.urlopen(self.url + path, timeout=10) as resp:
            return resp.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def port_free(port: int) -> bool:
    """Whether 127.0.0.1:port can be bound now (a stopped server must have released its port)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def proc_stats() -> dict[int, list[str]]:
    """pid -> the fields of /proc/<pid>/stat after the command name (state, ppid, pgrp, ...), for every
    process that still exists; tests use it to prove no process outlived run.py."""
    stats = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        stats[int(entry.name)] = stat[stat.rindex(")") + 2:].split()
    return stats


def live_group_members(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that are not zombies (zombies only await their reaper)."""
    return [pid for pid, fields in proc_stats().items() if int(fields[2]) == pgid and fields[0] != "Z"]


def closed_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound, then released): connecting to it is refused at once."""
    return free_port()


# Secret-looking text the fuzz tests plant in inputs; it must never reach a console line or a file.
PLANTED_PASSWORD = "pl4nted-pa55word"


def hostile_text(rng, tmp_dir: Path) -> str | bytes:
    """One hostile argument value, drawn by ``rng`` (a seeded ``random.Random``).

    Covers what mistaken or malicious input looks like: empty and very long strings, control
    characters and NUL, shell metacharacters, ``..`` paths and paths into /proc, /sys and read-only
    places, bytes that are not UTF-8 (returned as ``bytes``), huge, negative and non-ASCII numbers,
    URLs of every scheme (with planted credentials), malformed JSON and YAML.
    """
    kinds = [
        lambda: rng.choice(["", " ", "  \t ", "-", "--", "-1", "--model"]),
        lambda: rng.choice("aé中🙂/;") * rng.choice([300, 5000, 9000]),
        lambda: rng.choice(["\x00", "a\x00b", "\x1b[31mred\x1b[0m", "line\nbreak", "\r", "\x7f", "\u202e", "\x85"]),
        lambda: rng.choice(["; rm -rf /", "$(id)", "`id`", "| cat /etc/passwd", "&& echo pwned", "'\"", "a b c",
                            "*", "~", "${HOME}", "!!", "x > /tmp/owned", "%s%s%n", "{}", "\\"]),
        lambda: rng.choice(["..", "../..", "../../etc/passwd", "/proc/nope", "/proc/self/status", "/proc/1/mem",
                            "/sys/kernel", "/", "/etc", "/etc/passwd", "/dev/null", "/dev/zero", "/dev/full",
                            str(tmp_dir / "missing" / ".." / ".." / "x"), str(tmp_dir), "relative/dir",
                            "/proc/self/fd/0", "/root/.ssh"]),
        lambda: rng.choice([b"\xff\xfe", b"caf\xe9", b"\xc3\x28", b"/tmp/\x80\x81", b"http://h/\xff"]),
        lambda: rng.choice(["0", "-1", "-0", "99999", "65536", "1e308", "nan", "inf", "-inf", "9" * 40, "0x1F",
                            "1_000", "٣", "²", "3.5", "+8000", "00080", "0,0", "0,,1", "-5,2", "1,1", "4294967296"]),
        lambda: rng.choice(["file:///etc/passwd", "ftp://h/x", "gopher://h", "data:text/plain,hi", "javascript:x",
                            "unix:///var/run/docker.sock", "ws://127.0.0.1:1", "http://", "http:///v1", "https://",
                            f"http://user:{PLANTED_PASSWORD}@127.0.0.1:1/v1",
                            f"https://{PLANTED_PASSWORD}@gw.example", "http://[::1]:99999", "http://h:0",
                            "http://h:-1", "http://[zz]:1", "http://h/a/../b", "http://h/?q=1", "http://h/#f",
                            "http://h /x", "HTTP://127.0.0.1:1/LLM/V1", "mailto:a@b", "localhost:1",
                            "127.0.0.1:1/llm/v1/", "http://" + "a" * 300 + ":1", "http://h%00/x"]),
        lambda: rng.choice(["{", "}", "[1, 2]", '{"a":', '"str"', "null", "1", "[" * 3000 + "]" * 3000,
                            '{"a": NaN}', '{"a": 1, "a": 2}', '{"port": -1}', "{'single': 1}",
                            "a: [b", "--- !!python/object/apply:os.system ['id']", "key: value", "- 1\n- 2"]),
        lambda: rng.choice(["mode=smoke", "mode=nope", "mode='x", "x=1", "=1", "mode", "mode=smoke mode=ci",
                            "limit=-5", "stall_timeout_s=nan", 'mode="smoke', "ignore_verdict=true; id"]),
    ]
    return rng.choice(kinds)()
