"""Server settings: UPPERCASE environment variables (or a `.env` file), validated at start-up.

Precedence: an explicit variable > the `MODEL` / `DEVICE` / mesh presets > the defaults below.
An invalid value stops the server with one line per problem naming the variable and its range.
"""
from __future__ import annotations

import dataclasses
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
}

# DEVICE presets: the device kind sets the device groups, mesh and reset command.
DEVICE_PRESETS: dict[str, dict[str, Any]] = {
    "cpu": {"device_ids": "(0)", "device_mesh_shape": "1,1", "reset_device_command": ""},
    "n150": {"device_ids": "(0)", "device_mesh_shape": "1,1"},
    "n300": {"device_ids": "(0,1)", "device_mesh_shape": "TP2"},
    "t3k": {"device_ids": "(0,1,2,3,4,5,6,7)", "device_mesh_shape": "SD_3_5_BASE"},
    "galaxy": {"device_ids": "(" + ",".join(str(i) for i in range(32)) + ")",
               "device_mesh_shape": "SD_3_5_FAST"},
}

# Mesh presets accepted by DEVICE_MESH_SHAPE besides "ROWS,COLS".
MESH_PRESETS: dict[str, tuple[int, int]] = {
    "TP2": (1, 2),          # tensor parallel over two chips (n300)
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
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "debug", "info", "warning", "error"] = "INFO"
    device_ids: str = Field("(0)", description="Device groups, one worker each")
    device_mesh_shape: str = Field("1,1", description="ROWS,COLS or TP2 | SD_3_5_BASE | SD_3_5_FAST")
    max_queue_size: int = Field(64, ge=1, le=100_000)
    max_batch_size: int = Field(1, ge=1, le=256)
    max_batch_delay_time_ms: float = Field(2.0, ge=0, le=10_000)
    default_inference_timeout_seconds: float = Field(60.0, gt=0, le=86_400)
    max_worker_restart_count: int = Field(5, ge=0, le=1000)
    worker_start_timeout_seconds: float = Field(600.0, gt=0, le=86_400)
    new_device_delay_seconds: float = Field(0.0, ge=0, le=3600)
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
        for preset_table, key in ((DEVICE_PRESETS, "device"), (MODEL_PRESETS, "model")):
            name = str(given.get(key, "") or "")
            if not name:
                continue
            if name not in preset_table:
                raise ValueError(f"{key.upper()}={name}: not a known preset; valid: "
                                 + ", ".join(sorted(preset_table)))
            merged.update(preset_table[name])
        merged.update(given)
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


def _describe_range(field_name: str) -> str:
    field = Settings.model_fields.get(field_name)
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
    if low or high:
        low_text = f"{'>' if low and low[0] == 'gt' else ''}{low[1] if low else ''}"
        high_text = f"{'<' if high and high[0] == 'lt' else ''}{high[1] if high else ''}"
        return f"must be {annotation} in {low_text}..{high_text}"
    literal = getattr(field.annotation, "__args__", None)
    if literal and all(isinstance(a, str) for a in literal):
        return "must be one of " + ", ".join(dict.fromkeys(a.lower() for a in literal))
    return f"must be {annotation}"


def load_settings(**overrides: Any) -> Settings:
    """Settings from env/.env (plus overrides); ConfigError names each bad variable and its range."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            loc = [str(p) for p in error.get("loc", ()) if p != "__root__"]
            if loc:
                name = loc[0]
                value = error.get("input")
                lines.append(f"{name.upper()}={value!r}: {_describe_range(name)}")
            else:
                lines.append(str(error.get("msg", "")).removeprefix("Value error, "))
        raise ConfigError("invalid settings: " + "; ".join(lines)) from None
