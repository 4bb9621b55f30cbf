"""Server settings: UPPERCASE environment variables (or a `.env` file), validated at start-up.

Precedence: an explicit variable > the `MODEL` / `DEVICE` / mesh presets > the defaults below.
An invalid value stops the server with one line per problem naming the variable and its range.
"""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_API_KEY = "your-secret-key"

# MODEL presets: a model name sets the runner (and what that runner needs) in one variable.
MODEL_PRESETS: dict[str, dict[str, Any]] = {
    "stable-diffusion-xl-base-1.0": {"model_runner": "tt-sdxl", "min_inference_steps": 12,
                                     "max_inference_steps": 50, "num_inference_steps": 20},
    "stable-diffusion-3.5-large": {"model_runner": "tt-sd3.5", "min_inference_steps": 12,
                                   "max_inference_steps": 50, "num_inference_steps": 28},
    "resnet-50": {"model_runner": "tt-resnet", "max_batch_size": 16},
    "resnet-18": {"model_runner": "cnn-resnet-cpu"},
    "efficientnet-lite0": {"model_runner": "cnn-cpu", "max_batch_size": 8},
    "tiny-diffusion-cpu": {"model_runner": "image-cpu", "image_cpu_weights_path": "tiny-random",
                           "image_size": 64, "num_inference_steps": 4},
    "whisper-tiny.en": {"model_runner": "whisper-cpu"},
    "all-MiniLM-L6-v2": {"model_runner": "embedding-cpu", "max_batch_size": 4},
    # FAKE vision model: random weights in the real Qwen3-VL architecture (runners/vision_hf.py).
    "tiny-random-qwen3-vl": {"model_runner": "tiny-random-qwen3-vl"},
}

# DEVICE presets: the device kind sets the device groups, mesh and reset command.
DEVICE_PRESETS: dict[str, dict[str, Any]] = {
    # No pause between CPU workers: NEW_DEVICE_DELAY_SECONDS exists to let a TT device settle.
    "cpu": {"device_ids": "(0)", "device_mesh_shape": "1,1", "reset_device_command": "",
            "new_device_delay_seconds": 0.0, "is_galaxy": False},
    "n150": {"device_ids": "(0)", "device_mesh_shape": "1,1", "is_galaxy": False},
    "n300": {"device_ids": "(0,1)", "device_mesh_shape": "TP2", "is_galaxy": False},
    "t3k": {"device_ids": "(0,1,2,3,4,5,6,7)", "device_mesh_shape": "SD_3_5_BASE", "is_galaxy": False},
    "galaxy": {"device_ids": "(" + ",".join(str(i) for i in range(32)) + ")",
               "device_mesh_shape": "SD_3_5_FAST", "is_galaxy": True},
}

# (MODEL, DEVICE) pairs: a model that runs on one chip is served data-parallel, one worker per chip of the device
# (SDXL on a t3k: eight 1x1 workers, not one 2x4 mesh); a model that needs a mesh (SD3.5) keeps the device's mesh.
ONE_CHIP_MODELS = frozenset({"stable-diffusion-xl-base-1.0", "resnet-50"})


def _pair_preset(model: str, device: str) -> dict[str, Any]:
    """What the (MODEL, DEVICE) pair changes over the two presets applied one after the other."""
    if model not in ONE_CHIP_MODELS or device not in DEVICE_PRESETS:
        return {}
    chips = [d for group in parse_device_ids(DEVICE_PRESETS[device]["device_ids"]) for d in group.device_ids]
    return {"device_ids": ",".join(f"({chip})" for chip in chips), "device_mesh_shape": "1,1"}


# Mesh presets accepted by DEVICE_MESH_SHAPE besides "ROWS,COLS"; each is also a boolean
# variable of its own (`TP2=true`, `SD_3_5_BASE=true`, `SD_3_5_FAST=true`), as documented.
MESH_PRESETS: dict[str, tuple[int, int]] = {
    "TP2": (2, 1),          # SDXL tensor parallel over two chips (n300), documented as (2,1)
    "SD_3_5_BASE": (2, 4),  # SD3.5 on an 8-chip mesh (t3k)
    "SD_3_5_FAST": (4, 8),  # SD3.5 on a 32-chip mesh (galaxy)
}


@dataclasses.dataclass(frozen=True)
class DeviceGroup:
    """The devices one worker process owns.

    index: position in DEVICE_IDS (the worker's number).
    device_ids: device numbers of this group, e.g. (0, 1).
    """

    index: int
    device_ids: tuple[int, ...]

    @property
    def label(self) -> str:
        return "(" + ",".join(str(d) for d in self.device_ids) + ")"


class ConfigError(ValueError):
    """Invalid settings; str() is one line per problem, naming the variable and its range."""


def parse_device_ids(text: str) -> list[DeviceGroup]:
    """`"(0),(1)"` or `"(0,1),(2,3)"` (or `"0,1"` meaning one device per group) -> device groups."""
    text = text.strip()
    if not text:
        raise ValueError("empty")
    if "(" not in text:
        groups = [[part] for part in text.split(",")]
    else:
        if not re.fullmatch(r"\(\s*\d+(\s*,\s*\d+)*\s*\)(\s*,\s*\(\s*\d+(\s*,\s*\d+)*\s*\))*", text):
            raise ValueError("expected groups like (0),(1) or (0,1),(2,3)")
        groups = [g.split(",") for g in re.findall(r"\(([^)]*)\)", text)]
    result = []
    seen: set[int] = set()
    for index, group in enumerate(groups):
        ids = tuple(int(part.strip()) for part in group)
        if seen.intersection(ids):
            raise ValueError(f"device {sorted(seen.intersection(ids))[0]} appears in two groups")
        seen.update(ids)
        result.append(DeviceGroup(index, ids))
    return result


def parse_mesh_shape(text: str) -> tuple[int, int]:
    """`"1,2"` or a preset name (TP2, SD_3_5_BASE, SD_3_5_FAST) -> (rows, cols)."""
    text = text.strip()
    if text.upper() in MESH_PRESETS:
        return MESH_PRESETS[text.upper()]
    match = re.fullmatch(r"\(?\s*(\d+)\s*[,x]\s*(\d+)\s*\)?", text)
    if not match or int(match.group(1)) < 1 or int(match.group(2)) < 1:
        raise ValueError("expected ROWS,COLS (each >= 1) or one of " + ", ".join(MESH_PRESETS))
    return int(match.group(1)), int(match.group(2))


MESH_FLAGS = ("tp2", "sd_3_5_base", "sd_3_5_fast")
_TRUE_WORDS = {"1", "true", "yes", "on", "t", "y"}
_FALSE_WORDS = {"0", "false", "no", "off", "f", "n"}


def _flag(value: Any) -> bool | None:
    """A boolean variable's value as pydantic reads it; None when it is no boolean word (the
    field's own validation then names it)."""
    text = str(value).strip().lower()
    return True if text in _TRUE_WORDS else False if text in _FALSE_WORDS else None


def _as_int(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def _model_device_preset(given: dict[str, Any]) -> str:
    """MODEL_DEVICE (the small-model server's name) -> a DEVICE preset name ("" for auto, cuda, mps).

    cuda/mps are accepted only when torch sees the device (devices.py); the device-aware runners
    (vision, embeddings, rerank) use it, the CPU-only ones say cpu in /v1/models.
    """
    if "model_device" not in given:
        return ""
    value = str(given["model_device"]).strip().lower()
    if value == "auto":
        return ""
    if value == "cpu":
        device = str(given.get("device", "") or "")
        if device and device != "cpu":
            raise ValueError(f"MODEL_DEVICE=cpu contradicts DEVICE={device}; set one of them")
        return "cpu"
    if value in ("cuda", "mps") or re.fullmatch(r"cuda:\d+", value):
        from media_server.devices import resolve

        resolve(value)  # DeviceUnavailable (a ValueError) names the device torch does not see
        return ""
    raise ValueError(f"MODEL_DEVICE={value!r}: must be one of auto, cpu, mps, cuda, cuda:<idx>")


def _apply_mesh_flag(given: dict[str, Any], merged: dict[str, Any]) -> None:
    """TP2=true / SD_3_5_BASE=true / SD_3_5_FAST=true set the mesh (and, unless DEVICE_IDS is
    given, the device groups), over the DEVICE preset's mesh: the flag is the more specific ask
    (on a galaxy, SD_3_5_BASE=true runs four 2x4 workers instead of one 4x8)."""
    on = [name for name in MESH_FLAGS if name in given and _flag(given[name])]
    if not on:
        return
    if len(on) > 1:
        raise ValueError(", ".join(f"{name.upper()}=true" for name in on)
                         + ": set at most one of TP2, SD_3_5_BASE, SD_3_5_FAST")
    preset = on[0].upper()
    rows, cols = MESH_PRESETS[preset]
    if "device_mesh_shape" in given:
        try:
            shape = parse_mesh_shape(str(given["device_mesh_shape"]))
        except ValueError:
            return  # the consistency check names DEVICE_MESH_SHAPE
        if shape != (rows, cols):
            raise ValueError(f"{preset}=true means a {rows}x{cols} mesh but DEVICE_MESH_SHAPE="
                             f"{given['device_mesh_shape']}; set one of them")
        return
    merged["device_mesh_shape"] = preset
    if "device_ids" in given:
        return
    size = rows * cols
    if "device_ids" not in merged:
        merged["device_ids"] = "(" + ",".join(str(i) for i in range(size)) + ")"
        return
    devices = [d for group in parse_device_ids(merged["device_ids"]) for d in group.device_ids]
    if len(devices) % size:
        raise ValueError(f"{preset}=true needs groups of {size} devices; DEVICE={given.get('device')} "
                         f"has {len(devices)}")
    merged["device_ids"] = ",".join("(" + ",".join(map(str, devices[i:i + size])) + ")"
                                    for i in range(0, len(devices), size))


def _mesh_from_device_groups(given: dict[str, Any], merged: dict[str, Any]) -> None:
    """DEVICE_IDS alone (``(0,1),(2,3)``: groups of one size, no DEVICE_MESH_SHAPE nor mesh flag given) sets the
    mesh each worker opens from the groups: the documented preset of that many chips (2: TP2's 2x1, 8: 2x4,
    32: 4x8), else 1xN. A mesh the groups already fit (or single devices) is left as it is."""
    if "device_ids" not in given or "device_mesh_shape" in given or any(_flag(given.get(f)) for f in MESH_FLAGS):
        return
    try:
        groups = parse_device_ids(str(given["device_ids"]))
        rows, cols = parse_mesh_shape(str(merged.get("device_mesh_shape", "1,1")))
    except ValueError:
        return  # the consistency check names what is wrong
    sizes = {len(group.device_ids) for group in groups}
    if len(sizes) != 1 or sizes == {1} or sizes == {rows * cols}:
        return
    size = sizes.pop()
    by_size = {r * c: f"{r},{c}" for r, c in MESH_PRESETS.values()}
    merged["device_mesh_shape"] = by_size.get(size, f"1,{size}")


def _apply_aliases(given: dict[str, Any], merged: dict[str, Any]) -> None:
    """The small-model server's names mapped onto this server's settings.

    Both names given with different values is refused: either reading would surprise someone.
    """
    concurrent = _as_int(given.get("max_concurrent", ""))
    if concurrent and concurrent > 0:
        if "max_batch_size" in given and _as_int(given["max_batch_size"]) != concurrent:
            raise ValueError(f"MAX_CONCURRENT={concurrent} and MAX_BATCH_SIZE={given['max_batch_size']}"
                             " both set the requests one worker runs at once; set one of them")
        merged["max_batch_size"] = concurrent
    if "warmup_steps" in given and _as_int(given["warmup_steps"]) == 0:
        if "enable_warmup" in given and _flag(given["enable_warmup"]):
            raise ValueError("WARMUP_STEPS=0 contradicts ENABLE_WARMUP=1; set one of them")
        merged["enable_warmup"] = False


def _log_file_problem(path: str) -> str:
    folder = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.isdir(path):
        return "is a folder; name a file"
    if not os.path.isdir(folder):
        return f"folder {folder} does not exist"
    if not os.access(folder, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        return "not writable"
    return ""


class Settings(BaseSettings):
    """Every knob of the server. Field names are the variables, upper-cased."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", case_sensitive=False,
                                      protected_namespaces=())

    model: str = Field("", description="Preset name that sets MODEL_RUNNER and its needs")
    device: str = Field("", description="Device preset: cpu, n150, n300, t3k, galaxy")
    model_runner: str = Field("mock", description="Runner registry name (runners/registry.py)")
    models: str = Field("", description="Comma list of runners to serve at once "
                                        "(name or id=name); empty = MODEL_RUNNER only")
    environment: Literal["development", "production", "test"] = "development"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL",
                       "debug", "info", "warning", "error", "critical"] = "INFO"
    log_file: str = Field("", description="Also write the server's log lines to this file (its folder must exist)")
    device_ids: str = Field("(0)", description="Device groups, one worker each")
    device_mesh_shape: str = Field("1,1", description="ROWS,COLS or TP2 | SD_3_5_BASE | SD_3_5_FAST")
    tp2: bool = Field(False, description="SDXL tensor parallel over 2 devices: mesh (2,1)")
    sd_3_5_base: bool = Field(False, description="SD3.5 on a 2x4 mesh (8 devices per worker)")
    sd_3_5_fast: bool = Field(False, description="SD3.5 on a 4x8 mesh (32 devices per worker)")
    is_galaxy: bool = Field(True, description="Galaxy hardware; exported to TT workers as IS_GALAXY "
                                              "(DEVICE presets set it; CPU runners ignore it)")
    trace_region_size: int = Field(34_541_598, ge=0, le=2**34, description="Bytes reserved on each TT "
                                   "device for traced execution (passed to ttnn when the mesh opens)")
    max_queue_size: int = Field(64, ge=1, le=100_000)
    max_batch_size: int = Field(1, ge=1, le=256)
    max_batch_delay_time_ms: float = Field(2.0, ge=0, le=10_000)
    default_inference_timeout_seconds: float = Field(60.0, gt=0, le=86_400)
    max_worker_restart_count: int = Field(5, ge=0, le=1000)
    worker_restart_limit_action: Literal["fail", "reset", "FAIL", "RESET"] = Field(
        "fail", description="Past MAX_WORKER_RESTART_COUNT restarts: fail = mark the worker failed; "
                            "reset = run RESET_DEVICE_COMMAND and keep restarting")
    worker_check_sleep_timeout: float = Field(30.0, gt=0, le=86_400, description="Seconds between "
                                              "worker liveness checks (a backstop: a dead worker's "
                                              "pipe closing is noticed at once)")
    worker_start_timeout_seconds: float = Field(600.0, gt=0, le=86_400)
    new_device_delay_seconds: float = Field(30.0, ge=0, le=3600, description="Pause before starting "
                                            "the next device group's worker (DEVICE=cpu: 0)")
    reset_device_command: str = "tt-smi -r"
    reset_device_sleep_time: float = Field(5.0, ge=0, le=3600)
    api_key: str = DEFAULT_API_KEY
    no_auth: bool = False
    model_weights_path: str = ""
    cpu_threads_per_worker: int = Field(0, ge=0, le=1024, description="torch/OpenMP threads per worker "
                                        "(0: library default); oversubscribed cores slow CPU runners")
    image_cpu_weights_path: str = Field("", description="image-cpu: diffusers folder (else MODEL_WEIGHTS_PATH)")
    image_cpu_hf_repo: str = Field("stabilityai/sd-turbo", description="image-cpu: repo looked up in the HF cache")
    enable_warmup: bool = Field(True, description="Runners run one warm-up inference before reporting ready")
    enable_metrics: bool = Field(True, description="Serve GET /metrics (0: 404)")
    # The small-model OpenAI server's names, mapped onto the settings above (see _apply_aliases).
    model_device: str = Field("auto", description="auto (CUDA, then MPS, then CPU) | cpu (also the DEVICE=cpu "
                                                  "preset) | cuda | cuda:<idx> | mps (only when torch sees it)")
    max_concurrent: int = Field(0, ge=0, le=256, description="Requests one worker runs at once: sets "
                                "MAX_BATCH_SIZE when that is not given (0: not given)")
    max_text_chars: int = Field(0, ge=0, le=100_000_000, description="Longest text input (embeddings "
                                "input, chat prompt) in characters; 0: only MAX_PAYLOAD_BYTES limits it")
    warmup_steps: int = Field(1, ge=0, le=1000, description="Warm-up inferences per worker; 0 = "
                              "ENABLE_WARMUP=0 (the runners run one)")
    warmup_batch_size: int = Field(1, ge=1, le=256, description="Accepted; the warm-up runs one input")
    # Limits.
    max_payload_bytes: int = Field(20 * 1024 * 1024, ge=1024, le=2**31)
    max_images_per_request: int = Field(4, ge=1, le=64)
    min_inference_steps: int = Field(1, ge=1, le=1000)
    max_inference_steps: int = Field(50, ge=1, le=1000)
    num_inference_steps: int = Field(20, ge=1, le=1000)
    max_image_dimension: int = Field(4096, ge=8, le=16384)
    image_size: int = Field(512, ge=8, le=16384, description="Generated image side in pixels")
    cnn_top_k: int = Field(3, ge=1, le=1000)
    # Mock runner knobs.
    mock_devices_count: int = Field(5, ge=1, le=64)
    mock_load_delay_seconds: float = Field(0.0, ge=0, le=3600)
    mock_inference_delay_ms: float = Field(0.0, ge=0, le=3_600_000)
    mock_fail_every: int = Field(0, ge=0, le=1_000_000, description="Every Nth batch raises (0: never)")
    mock_hang_on: str = Field("", description="Inputs whose prompt contains this text hang")
    mock_crash_on: str = Field("", description="Inputs whose prompt contains this text kill the worker")
    mock_stream_chunks: int = Field(8, ge=1, le=100_000)

    @model_validator(mode="before")
    @classmethod
    def _apply_presets(cls, values: Any) -> Any:
        if not isinstance(values, dict):
            return values
        given = {k.lower(): v for k, v in values.items()}
        merged: dict[str, Any] = {}
        device_name = _model_device_preset(given)
        if device_name:
            given.setdefault("device", device_name)
        for preset_table, key in ((DEVICE_PRESETS, "device"), (MODEL_PRESETS, "model")):
            name = str(given.get(key, "") or "")
            if not name:
                continue
            if name not in preset_table:
                raise ValueError(f"{key.upper()}={name}: not a known preset; valid: "
                                 + ", ".join(sorted(preset_table)))
            merged.update(preset_table[name])
        merged.update(_pair_preset(str(given.get("model", "") or ""), str(given.get("device", "") or "")))
        _apply_mesh_flag(given, merged)
        merged.update(given)
        _mesh_from_device_groups(given, merged)
        _apply_aliases(given, merged)
        return merged

    @model_validator(mode="after")
    def _check_consistency(self) -> "Settings":
        problems = []
        try:
            groups = parse_device_ids(self.device_ids)
        except ValueError as exc:
            problems.append(f"DEVICE_IDS={self.device_ids!r}: {exc}")
            groups = []
        try:
            rows, cols = parse_mesh_shape(self.device_mesh_shape)
        except ValueError as exc:
            problems.append(f"DEVICE_MESH_SHAPE={self.device_mesh_shape!r}: {exc}")
            rows = cols = 0
        if groups and rows and any(len(g.device_ids) not in (1, rows * cols) for g in groups):
            problems.append(f"DEVICE_IDS={self.device_ids!r}: each group must hold 1 or "
                            f"{rows * cols} devices for DEVICE_MESH_SHAPE={self.device_mesh_shape}")
        if self.min_inference_steps > self.max_inference_steps:
            problems.append(f"MIN_INFERENCE_STEPS={self.min_inference_steps} exceeds "
                            f"MAX_INFERENCE_STEPS={self.max_inference_steps}")
        if not self.min_inference_steps <= self.num_inference_steps <= self.max_inference_steps:
            problems.append(f"NUM_INFERENCE_STEPS={self.num_inference_steps}: must be in "
                            f"{self.min_inference_steps}..{self.max_inference_steps}")
        if self.environment == "production" and not self.no_auth and self.api_key == DEFAULT_API_KEY:
            problems.append("API_KEY: the default key is refused when ENVIRONMENT=production; "
                            "set API_KEY to a secret")
        if self.log_file:
            problem = _log_file_problem(self.log_file)
            if problem:
                problems.append(f"LOG_FILE={self.log_file!r}: {problem}")
        if not self.no_auth and not self.api_key:
            problems.append("API_KEY: empty; set a key or NO_AUTH=1")
        entries = self.model_entries()
        if not entries:
            problems.append("MODEL_RUNNER: empty; name a runner (or list several in MODELS)")
        elif any(not runner for _, runner in entries):
            problems.append(f"MODELS={self.models!r}: every entry names a runner (name or id=name)")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    # Derived views.
    @property
    def reset_on_restart_limit(self) -> bool:
        return self.worker_restart_limit_action.lower() == "reset"

    def device_groups(self) -> list[DeviceGroup]:
        return parse_device_ids(self.device_ids)

    def mesh_shape(self) -> tuple[int, int]:
        return parse_mesh_shape(self.device_mesh_shape)

    def model_entries(self) -> list[tuple[str, str]]:
        """[(model_id or "", runner name)] from MODELS, else [("", MODEL_RUNNER)]."""
        entries = []
        for item in (self.models or self.model_runner).split(","):
            item = item.strip()
            if not item:
                continue
            model_id, _, runner = item.rpartition("=")
            entries.append((model_id.strip(), runner.strip()))
        return entries


def _describe_range(field_name: str, settings_cls: type[BaseSettings] | None = None) -> str:
    field = (settings_cls or Settings).model_fields.get(field_name)
    if field is None:
        return ""
    low = high = None
    for meta in field.metadata:
        for attr in ("ge", "gt"):
            if getattr(meta, attr, None) is not None:
                low = (attr, getattr(meta, attr))
        for attr in ("le", "lt"):
            if getattr(meta, attr, None) is not None:
                high = (attr, getattr(meta, attr))
    annotation = getattr(field.annotation, "__name__", str(field.annotation))
    if low and high and low == ("ge", high[1]) and high[0] == "le":
        return f"must be {low[1]}" + (f" ({field.description})" if field.description else "")
    if low or high:
        low_text = f"{'>' if low and low[0] == 'gt' else ''}{low[1] if low else ''}"
        high_text = f"{'<' if high and high[0] == 'lt' else ''}{high[1] if high else ''}"
        return f"must be {annotation} in {low_text}..{high_text}"
    literal = getattr(field.annotation, "__args__", None)
    if literal and all(isinstance(a, str) for a in literal):
        return "must be one of " + ", ".join(dict.fromkeys(a.lower() for a in literal))
    pattern = next((getattr(m, "pattern", None) for m in field.metadata if getattr(m, "pattern", None)), None)
    if pattern:
        return f"must match {pattern}"
    return f"must be {annotation}"


def validation_lines(exc: ValidationError, settings_cls: type[BaseSettings]) -> list[str]:
    """One 'NAME=value: must be ...' per problem (or the validator's own sentence)."""
    lines = []
    for error in exc.errors():
        loc = [str(p) for p in error.get("loc", ()) if p != "__root__"]
        if loc:
            name = loc[0]
            value = error.get("input")
            lines.append(f"{name.upper()}={value!r}: {_describe_range(name, settings_cls)}")
        else:
            lines.append(str(error.get("msg", "")).removeprefix("Value error, "))
    return lines


def load_settings(**overrides: Any) -> Settings:
    """Settings from env/.env (plus overrides); ConfigError names each bad variable and its range."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise ConfigError("invalid settings: " + "; ".join(validation_lines(exc, Settings))) from None
