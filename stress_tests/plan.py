"""Which stress points a run measures: mode expansion and the context limit (stdlib only).

single    one point (input_size, output_size, max_concurrent, num_prompts; small defaults per size)
multiple  ISL {1.0, 0.75, 0.5, 0.25, 0.1} x max context, OSL {128, 2048}, concurrency {1, 2, max/2,
          max}, each with one wave of requests (num_prompts = concurrency)
custom    the cross product of custom_isl_values (fractions of max context when <= 1, else tokens),
          custom_osl_values and custom_concurrency_values; a missing list takes single's value
endurance one point at max_concurrent (default: the spec's max concurrency) looped for endurance_s

A point whose isl + osl does not fit the context is rescaled, both lengths in proportion, so the
server is asked for what it can serve rather than failing with 400; the point says it was rescaled.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from contracts.model_spec import ModelSpec
from stress_tests.args import StressArgs

ISL_FRACTIONS = (1.0, 0.75, 0.5, 0.25, 0.1)
OSL_SET = (128, 2048)
# Tokens kept free of the context for special tokens the server adds around a prompt.
CONTEXT_RESERVE = 8
SINGLE_DEFAULTS = {"smoke": (128, 32), "ci": (512, 128), "full": (None, 2048)}  # (isl, osl); None: half context


@dataclass(frozen=True)
class StressPoint:
    isl: int
    osl: int
    concurrency: int
    num_prompts: int
    mode: str
    duration_s: float | None = None      # endurance: send until this much time has passed
    requested_isl: int | None = None     # before the context limit (None: not rescaled)
    requested_osl: int | None = None

    @property
    def rescaled(self) -> bool:
        return self.requested_isl is not None

    @property
    def name(self) -> str:
        tail = f"_dur-{self.duration_s:g}s" if self.duration_s else f"_n-{self.num_prompts}"
        return f"{self.mode}_isl-{self.isl}_osl-{self.osl}_con-{self.concurrency}{tail}"


def enforce_context_limit(isl: int, osl: int, max_context: int) -> tuple[int, int, bool]:
    """(isl, osl, rescaled): both scaled by max_context / (isl + osl) when they do not fit.

    Floors the input and gives the output what is left, so isl + osl == max_context exactly after
    a rescale and each stays >= 1.
    """
    if max_context < 2:
        raise ValueError(f"max_context {max_context} leaves no room for a prompt and an answer")
    if isl + osl <= max_context:
        return isl, osl, False
    factor = max_context / (isl + osl)
    new_isl = min(max(1, math.floor(isl * factor)), max_context - 1)
    return new_isl, max_context - new_isl, True


def _spec_limits(spec: ModelSpec) -> tuple[int, int]:
    dms = spec.device_model_spec
    return int(dms.max_context or 8192), int(dms.max_concurrency or 1)


def _point(isl: int, osl: int, con: int, n: int, mode: str, usable: int, duration: float | None = None) -> StressPoint:
    new_isl, new_osl, rescaled = enforce_context_limit(isl, osl, usable)
    return StressPoint(new_isl, new_osl, con, n, mode, duration,
                       isl if rescaled else None, osl if rescaled else None)


def _isl_tokens(value: float, max_context: int) -> int:
    return max(1, round(value * max_context)) if value <= 1.0 else int(value)


def expand(args: StressArgs, spec: ModelSpec) -> list[StressPoint]:
    """Every load point of the run's load modes (capacity search plans its own levels)."""
    spec_context, spec_con = _spec_limits(spec)
    max_context = args.max_context or spec_context
    usable = max(2, max_context - CONTEXT_RESERVE)
    max_con = args.max_concurrent or spec_con
    d_isl, d_osl = SINGLE_DEFAULTS[args.size]
    isl = args.input_size or d_isl or max_context // 2
    osl = args.output_size or d_osl
    con = args.max_concurrent or 1
    n_single = args.num_prompts or max(con, 2)
    points: list[StressPoint] = []
    for mode in args.run_modes:
        if mode == "single":
            points.append(_point(isl, osl, con, n_single, mode, usable))
        elif mode == "multiple":
            cons = sorted({1, 2, max(1, spec_con // 2), spec_con} if not args.max_concurrent else
                          {1, 2, max(1, max_con // 2), max_con})
            for frac in ISL_FRACTIONS:
                for o in OSL_SET:
                    for c in cons:
                        points.append(_point(_isl_tokens(frac, max_context), o, c, args.num_prompts or c, mode, usable))
        elif mode == "custom":
            isls = [_isl_tokens(v, max_context) for v in args.custom_isl] or [isl]
            for i in isls:
                for o in args.custom_osl or [osl]:
                    for c in args.custom_concurrency or [con]:
                        points.append(_point(i, o, c, args.num_prompts or c, mode, usable))
        elif mode == "endurance":
            c = args.max_concurrent or spec_con
            points.append(_point(isl, osl, c, 0, mode, usable, duration=args.endurance_s))
    unique: dict[str, StressPoint] = {}
    for p in points:  # a rescale can map two requested points onto one
        unique.setdefault(p.name, p)
    return list(unique.values())
