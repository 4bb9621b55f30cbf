"""What the Tenstorrent runners share: a lazy, one-line-failing import of the TT stack and the mesh.

Nothing here imports ttnn at module level: the server (and every non-TT runner) must work on a
host without tt-metal, and a TT runner chosen on such a host must stop the start-up with one line.
"""
from __future__ import annotations

import importlib
from typing import Any

from media_server.runners.base import RunnerUnavailable


def require_module(runner_name: str, module: str, what: str) -> Any:
    """Import `module` or raise RunnerUnavailable naming the runner, the module and why."""
    try:
        return importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - any import failure means the stack is unusable
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
        raise RunnerUnavailable(f"{runner_name} needs the Tenstorrent stack ({what}); import {module} "
                                f"failed ({reason}); on a CPU host use a *-cpu runner") from None


def open_mesh(runner_name: str, settings, device) -> Any:
    """Open this worker's device group as a mesh of DEVICE_MESH_SHAPE, reserving
    TRACE_REGION_SIZE bytes per device for traced execution (the SDXL/SD3.5 pipelines capture
    traces; without the region the capture fails on the device)."""
    ttnn = require_module(runner_name, "ttnn", "ttnn from tt-metal")
    rows, cols = settings.mesh_shape()
    if rows * cols == 1:
        return ttnn.open_device(device_id=device.device_ids[0],
                                trace_region_size=settings.trace_region_size)
    return ttnn.open_mesh_device(ttnn.MeshShape(rows, cols),
                                 physical_device_ids=list(device.device_ids),
                                 trace_region_size=settings.trace_region_size)


def close_mesh(mesh: Any) -> None:
    if mesh is None:
        return
    ttnn = importlib.import_module("ttnn")
    if hasattr(ttnn, "close_mesh_device") and hasattr(mesh, "get_num_devices"):
        ttnn.close_mesh_device(mesh)
    else:
        ttnn.close_device(mesh)
