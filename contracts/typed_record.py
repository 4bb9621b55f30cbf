"""The base of every result record: one stdlib dataclass per result kind, written to JSON and read
back through the same class.

Why a base: the result file is the API. Benchmarks, evals, tests, stress tests and the report each
write one record kind; every reader (the report builder, resume logic, tests) goes through the
same class, so a field is named, typed and described exactly once. The one-line description of a
field (``described(...)``) IS the legend a report prints; nothing else restates it.

Rules every record follows:
- ``SCHEMA`` names the kind and version (``"tt-bench-point/2"``); ``from_dict`` refuses another kind
  and reads older versions of the same kind when the subclass says how (``upgrade``).
- Keys a reader does not know are kept in ``extra`` and written back unchanged, so an older tool
  never drops what a newer one wrote.
- Nested records are declared with their class in ``field(metadata={"record": Cls})`` (or
  ``{"record_list": Cls}`` / ``{"record_map": Cls}``) and converted both ways.

Stdlib only: imported by client workflows in their own venvs.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, ClassVar, TypeVar

R = TypeVar("R", bound="TypedRecord")


class RecordError(ValueError):
    """A file is not a record of the expected kind; the message is one line for the user."""


def described(description: str, default: Any = dataclasses.MISSING, *, factory: Any = dataclasses.MISSING,
              unit: str | None = None, **metadata: Any) -> Any:
    """A dataclass field carrying its one-line description (and unit) for legends."""
    meta = {"description": description, **({"unit": unit} if unit else {}), **metadata}
    if factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=factory, metadata=meta)
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _encode(value: Any, meta: dict[str, Any]) -> Any:
    if isinstance(value, TypedRecord):
        return value.to_dict()
    if "record_list" in meta and value is not None:
        return [item.to_dict() for item in value]
    if "record_map" in meta and value is not None:
        return {key: item.to_dict() for key, item in value.items()}
    return value


def _decode(value: Any, meta: dict[str, Any]) -> Any:
    if value is None:
        return None
    if "record" in meta:
        return meta["record"].from_dict(value)
    if "record_list" in meta:
        return [meta["record_list"].from_dict(item) for item in value]
    if "record_map" in meta:
        return {key: meta["record_map"].from_dict(item) for key, item in value.items()}
    return value


@dataclasses.dataclass
class TypedRecord:
    """Base class; subclasses are dataclasses that set ``SCHEMA`` (or leave it empty for nested parts)."""

    SCHEMA: ClassVar[str] = ""

    def __post_init__(self) -> None:
        # Unknown keys from the file, written back unchanged by to_dict.
        if not hasattr(self, "extra"):
            object.__setattr__(self, "extra", {})

    # ----------------------------------------------------------------------------- dict round trip

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": self.SCHEMA} if self.SCHEMA else {}
        for f in dataclasses.fields(self):
            out[f.name] = _encode(getattr(self, f.name), dict(f.metadata))
        out.update(getattr(self, "extra", {}))
        return out

    @classmethod
    def from_dict(cls: type[R], data: dict[str, Any]) -> R:
        if not isinstance(data, dict):
            raise RecordError(f"{cls.__name__}: expected a JSON object, got {type(data).__name__}")
        data = dict(data)
        if cls.SCHEMA:
            kind, _, _ = cls.SCHEMA.partition("/")
            found = data.pop("schema", None)
            if not isinstance(found, str) or found.partition("/")[0] != kind:
                raise RecordError(f"{cls.__name__}: schema {found!r} is not a {kind!r} record")
            if found != cls.SCHEMA:
                data = cls.upgrade(found, data)
        known = {f.name: f for f in dataclasses.fields(cls)}
        kwargs = {name: _decode(data.pop(name), dict(known[name].metadata)) for name in list(data) if name in known}
        missing = [n for n, f in known.items() if n not in kwargs and f.default is dataclasses.MISSING
                   and f.default_factory is dataclasses.MISSING]
        if missing:
            raise RecordError(f"{cls.__name__}: missing field(s) {', '.join(missing)}")
        record = cls(**kwargs)
        object.__setattr__(record, "extra", data)
        return record

    @classmethod
    def upgrade(cls, found_schema: str, data: dict[str, Any]) -> dict[str, Any]:
        """Turn an older version of this kind into the current one; the default refuses."""
        raise RecordError(f"{cls.__name__}: cannot read schema {found_schema!r} (this tool reads {cls.SCHEMA!r})")

    # ----------------------------------------------------------------------------- files

    def write(self, path: Path) -> Path:
        """Write atomically (temp file + rename): a reader never sees half a record."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n")
        tmp.replace(path)
        return path

    @classmethod
    def read(cls: type[R], path: Path) -> R:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise RecordError(f"{path}: cannot read a {cls.__name__}: {exc}") from exc
        try:
            return cls.from_dict(data)
        except RecordError as exc:
            raise RecordError(f"{path}: {exc}") from exc

    # ----------------------------------------------------------------------------- legend

    @classmethod
    def legend(cls) -> dict[str, str]:
        """Field name -> its one-line description (with unit): the legend every renderer prints."""
        out = {}
        for f in dataclasses.fields(cls):
            if "description" in f.metadata:
                unit = f.metadata.get("unit")
                out[f.name] = f.metadata["description"] + (f" ({unit})" if unit else "")
        return out
