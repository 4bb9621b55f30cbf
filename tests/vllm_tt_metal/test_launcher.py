"""The in-image launcher: argv building, env export, API key handling, and a real in-process start.

The subprocess test puts a *fake* ``vllm`` package first on PYTHONPATH (named as such): it records
``sys.argv`` and whether VLLM_API_KEY reached it, which proves the launcher runs the OpenAI server
module in-process via runpy and keeps the key out of argv. The real engine is exercised by
tests/workflows/servers/test_local.py and test_docker_server.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = REPO / "vllm-tt-metal" / "src" / "run_vllm_api_server.py"


@pytest.fixture(scope="module")
def launcher():
    spec = importlib.util.spec_from_file_location("launcher_under_test", LAUNCHER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_imports_nothing_from_the_project():
    source = LAUNCHER.read_text()
    for forbidden in ("from workflows", "import workflows", "from benchmarking", "from evals", "import yaml",
                      "import requests"):
        assert forbidden not in source


def test_to_cli_args_booleans_lists_dicts(launcher):
    argv = launcher.to_cli_args({"max_model_len": 2048, "enforce_eager": True, "disable_log_stats": False,
                                 "seed": None, "allowed_origins": ["a", "b"], "override_tt_config": {"x": 1}})
    assert argv == ["--max-model-len", "2048", "--enforce-eager", "--allowed-origins", "a", "b",
                    "--override-tt-config", '{"x": 1}']


def test_build_argv_env_overrides_spec(launcher):
    spec = {"model_name": "M", "hf_model_repo": "org/M", "served_model_name": "M-served",
            "device_model_spec": {"vllm_args": {"model": "/spec/path", "port": 7000, "dtype": "float32",
                                                "api_key": "spec-key-123"}}}
    env = {"MODEL_WEIGHTS_PATH": "/weights", "SERVICE_PORT": "8123", "SERVICE_HOST": "127.0.0.1"}
    argv = launcher.build_argv(spec, env)
    assert argv == ["--model", "/weights", "--served-model-name", "M-served", "--host", "127.0.0.1",
                    "--port", "8123", "--dtype", "float32"]
    assert env["VLLM_API_KEY"] == "spec-key-123"  # moved out of argv
    argv = launcher.build_argv({"hf_model_repo": "org/M", "vllm_args": {"port": 7000}}, {})
    assert argv[argv.index("--host") + 1] == "0.0.0.0" and argv[argv.index("--port") + 1] == "7000"
    assert argv[argv.index("--model") + 1] == "org/M"


def test_env_vars_exported_caller_wins(launcher):
    env = {"KEEP": "caller"}
    launcher.export_env_vars({"env_vars": {"A": 1, "KEEP": "spec"},
                              "device_model_spec": {"env_vars": {"B": "2", "A": "0"}}}, env)
    assert env == {"KEEP": "caller", "A": "1", "B": "2"}


def test_api_key_modes(launcher):
    env = {"JWT_SECRET": "topsecret-abc"}
    assert "JWT" in launcher.configure_api_key(env)
    assert env["VLLM_API_KEY"] == launcher.jwt_hs256("topsecret-abc")
    env = {"VLLM_API_KEY": "k-123456", "NO_AUTH": "1"}
    assert "disabled" in launcher.configure_api_key(env) and "VLLM_API_KEY" not in env
    assert "DISABLED" in launcher.configure_api_key({})


def test_tt_models_registered_only_with_tt_stack(launcher):
    assert launcher.tt_stack_available() is False  # no ttnn on this machine
    assert launcher.register_tt_models() == 0


FAKE_API_SERVER = """
import json, os, sys
print("FAKE vllm api_server", flush=True)
with open(os.environ["FAKE_VLLM_RECORD"], "w") as fh:
    json.dump({"argv": sys.argv, "name": __name__, "has_key": os.environ.get("VLLM_API_KEY"),
               "spec_env": os.environ.get("SPEC_ONLY_VAR")}, fh)
"""


def test_runs_openai_server_module_in_process_with_key_in_env_only(tmp_path):
    pkg = tmp_path / "fakes" / "vllm" / "entrypoints" / "openai"
    pkg.mkdir(parents=True)
    for d in (pkg.parents[1], pkg.parent, pkg):
        (d / "__init__.py").write_text("")
    (pkg / "api_server.py").write_text(FAKE_API_SERVER)
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps({"model_name": "M", "served_model_name": "M", "env_vars": {"SPEC_ONLY_VAR": "yes"},
                                     "device_model_spec": {"vllm_args": {"enforce_eager": True}}}))
    record = tmp_path / "record.json"
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "fakes"), TT_MODEL_SPEC_JSON_PATH=str(spec_path),
               MODEL_WEIGHTS_PATH="/w", SERVICE_PORT="9999", VLLM_API_KEY="super-secret-key-42",
               FAKE_VLLM_RECORD=str(record))
    proc = subprocess.run([sys.executable, str(LAUNCHER)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(record.read_text())
    assert got["name"] == "__main__" and got["has_key"] == "super-secret-key-42" and got["spec_env"] == "yes"
    assert got["argv"][1:] == ["--model", "/w", "--served-model-name", "M", "--host", "0.0.0.0", "--port", "9999",
                               "--enforce-eager"]
    assert "super-secret-key-42" not in proc.stdout + proc.stderr


def test_missing_spec_is_one_clear_error(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TT_MODEL_SPEC_JSON_PATH"}
    proc = subprocess.run([sys.executable, str(LAUNCHER)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "TT_MODEL_SPEC_JSON_PATH is not set" in proc.stderr


def test_bytecode_cache_is_enabled_for_the_engine(launcher, monkeypatch):
    """PYTHONDONTWRITEBYTECODE would make every engine process compile ~20k modules at each start."""
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    env = {"PYTHONDONTWRITEBYTECODE": "1"}
    assert launcher.enable_bytecode_cache(env) is True
    assert "PYTHONDONTWRITEBYTECODE" not in env and sys.dont_write_bytecode is False  # children inherit env
    assert launcher.enable_bytecode_cache({}) is False


def test_bytecode_cache_reaches_the_served_module(tmp_path):
    pkg = tmp_path / "fakes" / "vllm" / "entrypoints" / "openai"
    pkg.mkdir(parents=True)
    for d in (pkg.parents[1], pkg.parent, pkg):
        (d / "__init__.py").write_text("")
    (pkg / "api_server.py").write_text(
        "import json, os, sys\n"
        "json.dump({'dont_write': sys.dont_write_bytecode, 'env': os.environ.get('PYTHONDONTWRITEBYTECODE')},"
        " open(os.environ['FAKE_VLLM_RECORD'], 'w'))\n")
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps({"model_name": "M", "served_model_name": "M"}))
    record = tmp_path / "record.json"
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "fakes"), TT_MODEL_SPEC_JSON_PATH=str(spec_path),
               MODEL_WEIGHTS_PATH="/w", FAKE_VLLM_RECORD=str(record), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([sys.executable, str(LAUNCHER)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(record.read_text()) == {"dont_write": False, "env": None}
    assert list((pkg / "__pycache__").glob("api_server.*.pyc"))  # it was written


FAKE_CPU_PLATFORM = """
import os

class CpuPlatform:
    @classmethod
    def check_and_update_config(cls, vllm_config):
        vllm_config["checked_by"] = cls.__name__
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"  # what vLLM's CPU platform does
"""


def _fake_vllm_with_cpu_platform(root):
    (root / "vllm" / "platforms").mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text("")
    (root / "vllm" / "platforms" / "__init__.py").write_text("")
    (root / "vllm" / "platforms" / "cpu.py").write_text(FAKE_CPU_PLATFORM)


def test_engine_core_fork_is_applied_after_the_platform_check(launcher, tmp_path, monkeypatch):
    """TT_VLLM_ENGINE_START=fork: the platform's own check still runs, then spawn becomes fork."""
    _fake_vllm_with_cpu_platform(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        monkeypatch.delitem(sys.modules, name)
    env = {}
    assert launcher.fork_engine_core(env) is False  # off unless asked for
    env = {"TT_VLLM_ENGINE_START": "fork"}
    assert launcher.fork_engine_core(env) is True
    assert int(env["OMP_NUM_THREADS"]) == max(1, len(os.sched_getaffinity(0)) - 1)  # set before torch loads
    from vllm.platforms.cpu import CpuPlatform

    config = {}
    monkeypatch.setenv("VLLM_WORKER_MULTIPROC_METHOD", "fork")
    CpuPlatform.check_and_update_config(config)
    assert config == {"checked_by": "CpuPlatform"} and env["VLLM_WORKER_MULTIPROC_METHOD"] == "fork"
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        sys.modules.pop(name)  # the fake must not outlive the test


def test_fork_threads_keep_the_callers_choice(launcher):
    assert launcher.fork_threads({"OMP_NUM_THREADS": "3"}) == 3
    env = {}
    assert launcher.fork_threads(env) >= 1 and env["OMP_NUM_THREADS"] == str(launcher.fork_threads(env))


def test_engine_core_fork_without_vllm_is_a_logged_no_op(launcher, monkeypatch, capsys):
    for name in ("vllm", "vllm.platforms", "vllm.platforms.cpu"):
        monkeypatch.setitem(sys.modules, name, None)  # import -> ImportError
    assert launcher.fork_engine_core({"TT_VLLM_ENGINE_START": "fork"}) is False
    assert "ignored" in capsys.readouterr().out
