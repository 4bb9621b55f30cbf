"""Every media-server setting with a wrong type or range stops start-up with one line naming it.

The variables are read from the ``model_fields`` of ``Settings`` and of every component settings
class (speech, embeddings, text: ``all_settings.component_settings_classes()``), not from a copied list:
a setting added later is covered the day it is added, or this test fails until it is given bad values or listed as free
text with the reason. Bad values are derived from each field's type and bounds (a word for a number,
one past each bound, NaN and infinity, an unknown choice). Each case goes through ``create_app()``,
the function uvicorn calls, in one media-server process for all cases.
"""
from __future__ import annotations

import json
import os
import subprocess

from tests.tt_media_server.conftest import SERVER_DIR, media_python

# String settings whose values are checked, with values each check must refuse.
CHECKED_TEXT = {
    "model": ["nope", "../etc"], "device": ["nope", "n150; id"], "model_runner": ["nope", ""],
    "models": ["nope", "a=nope"], "device_ids": ["(0", "x", "(0),(0)", ""], "device_mesh_shape": ["0,1", "x", ""],
    "api_key": [""],
    "log_file": ["/nonexistent-folder/server.log", "."],
    "model_device": ["gpu", "cuda", "cuda:0", "mps", ""],
    "text_backend": ["nope", ""],
    "diarization_backend": ["nope", ""],
    "embedding_backend": ["tensorrt", "onnx,BAAI/bge-m3=nope"],
    "cnn_backend": ["tensorrt", "onnx,resnet-18=nope"],
}
# Free text by design, with why nothing can be wrong about its type.
FREE_TEXT = {
    "reset_device_command": "a shell command line the operator chooses (empty: no reset)",
    "model_weights_path": "read only by runners that need weights, which then name the path",
    "image_cpu_weights_path": "read only by the image-cpu runner, which refuses a folder that is not a pipeline",
    "image_cpu_hf_repo": "a Hugging Face repo name looked up in the local cache",
    "mock_hang_on": "a substring the mock runner matches in prompts",
    "mock_crash_on": "a substring the mock runner matches in prompts",
    "whisper_compute_type": "passed to CTranslate2 by the whisper-cpu runner, which names it when refused",
    "whisper_model_path": "read only by the whisper-cpu runner, which refuses a folder without a model",
    "embedding_model_path": "read only by the embedding-cpu runner, which refuses a folder without a model",
    "embedding_onnx_cache_dir": "a folder the embedding-cpu runner creates and writes its ONNX exports to",
    "cnn_onnx_cache_dir": "a folder the cnn-cpu runner creates and writes its ONNX exports to",
    "text_model_path": "read only by the text-slots runner's preflight, which refuses a folder without config.json",
    "text_model_id": "the name the text model is served under; any string is a name",
    "rerank_model_path": "read only by the rerank-cpu runner, which names the path and the files it lacks",
    "vision_model_path": "read only by the vision runners, which name the path and the files it lacks",
    "vision_model_id": "the name the vision model is served under; any string is a name",
    "hf_token": "a secret the Hugging Face Hub judges; the pyannote backend names a refusal when it loads",
    "pyannote_pipeline": "a Hub name or a local directory, read only by the pyannote backend, which names it "
                         "when it cannot load it",
}

# Documented names added for compatibility; listed so that moving one into a class this test does
# not read fails here instead of leaving it unchecked.
DOCUMENTED_NEW = {
    "tp2", "sd_3_5_base", "sd_3_5_fast", "is_galaxy", "trace_region_size", "log_file", "log_level",
    "worker_check_sleep_timeout", "worker_restart_limit_action", "new_device_delay_seconds",
    "default_sample_rate", "max_audio_bytes", "max_audio_size_bytes", "model_device", "enable_metrics",
    "max_concurrent", "max_text_chars", "warmup_batch_size", "warmup_steps", "enable_chat_batching",
    "chat_batch_window_ms", "chat_batch_max_size", "chat_max_prompt_tokens", "chat_max_new_tokens",
    "chat_batch_allow_vision", "max_new_tokens",
}

SCRIPT = r"""
import json, math, os, sys, typing
from media_server.app import create_app
from media_server.all_settings import component_settings_classes
from media_server.config import Settings

checked_text, free_text = json.loads(sys.argv[1]), json.loads(sys.argv[2])

def bad_values(name, field):
    kind = field.annotation
    bounds = {attr: getattr(meta, attr) for meta in field.metadata for attr in ("ge", "gt", "le", "lt")
              if getattr(meta, attr, None) is not None}
    if kind is bool:
        return ["maybe", "2"]
    if kind in (int, float):
        values = ["abc", "", "1e999999"] + (["1.5"] if kind is int else ["nan", "inf", "-inf"])
        if "ge" in bounds: values.append(str(bounds["ge"] - 1))
        if "gt" in bounds: values.append(str(bounds["gt"]))
        if "le" in bounds: values.append(str(bounds["le"] + 1))
        if "lt" in bounds: values.append(str(bounds["lt"]))
        return values
    if typing.get_origin(kind) is typing.Literal:
        return ["bogus", ""]
    if name in checked_text:
        return checked_text[name]
    if name in free_text:
        return []
    raise SystemExit(f"UNCLASSIFIED {name}")

results = []
fields = {}
for settings_cls in [Settings, *component_settings_classes()]:
    for name, field in settings_cls.model_fields.items():
        fields.setdefault(name, field)
for name, field in fields.items():
    for value in bad_values(name, field):
        saved = dict(os.environ)
        os.environ[name.upper()] = value
        try:
            create_app()
            results.append([name, value, "STARTED"])
        except SystemExit as exc:
            results.append([name, value, str(exc)])
        os.environ.clear(); os.environ.update(saved)
print(json.dumps(results))
"""


def test_every_setting_with_a_wrong_value_stops_start_up_naming_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MOCK_", "MODEL", "DEVICE", "API_KEY"))}
    env.update({"API_KEY": "k", "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)})
    result = subprocess.run([str(media_python()), "-c", SCRIPT, json.dumps(CHECKED_TEXT), json.dumps(FREE_TEXT)],
                            cwd=SERVER_DIR, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    results = json.loads(result.stdout.strip().splitlines()[-1])
    covered = {name for name, _, _ in results}
    assert covered >= set(CHECKED_TEXT) | DOCUMENTED_NEW and len(covered) >= 70, sorted(covered)
    wrong = []
    for name, value, line in results:
        ok = (line.startswith("tt-media-server: cannot start:") and "\n" not in line
              and name.upper() in line and len(line) < 2000)
        if not ok:
            wrong.append(f"{name.upper()}={value!r}: {line[:300]}")
    assert not wrong, "\n".join(wrong)
