"""Status changes written into the catalog's YAML text, one line at a time.

Why text edits and not a re-dump of the YAML: a release's catalog change is reviewed as a diff, and a
re-dump would reorder keys, drop every comment and reflow the flow mappings, burying the one line that
matters. The YAML is parsed only to find where things are (``yaml.compose`` keeps each node's position);
the change is then a replaced scalar or one inserted line.

Where a spec's status lives (``workflows.catalog``): the template's ``status:`` applies to every
(weights, device) pair of the template, and a device entry's own ``status:`` overrides it. A template
of one weights repository and one device entry gets its ``status:`` replaced; otherwise the device
entry gets (or changes) its own ``status:``. A device entry governs the spec of every weights
repository of its template, so its change is written only when each of them gets the same status in
the same release; otherwise it is refused (one line): it would change specs the evidence did not
speak for.

Versions (the rule): a release that changes the catalog bumps the project ``VERSION`` (patch), and
every template whose status changed gets ``version:`` set to that new release, so a spec's version
names the release that last changed it; a template without ``version:`` follows ``VERSION``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from contracts.model_spec import ModelSpec


class CatalogEditError(ValueError):
    """The change cannot be written as a line-level edit; the message names the spec and why."""


@dataclass
class _Found:
    path: Path
    template: Any   # yaml MappingNode of the template
    entry: Any         # yaml MappingNode of the device entry
    repos: list[str]   # the weights repositories the template expands

    @property
    def weights(self) -> int:
        return len(self.repos)


def _value(mapping: Any, key: str) -> tuple[Any, Any] | None:
    """(key node, value node) of ``key`` in a composed mapping, or None."""
    for k, v in mapping.value:
        if getattr(k, "value", None) == key:
            return k, v
    return None


def locate(specs_dir: Path, spec: ModelSpec) -> _Found:
    """The template and device entry the spec is expanded from (the last match wins, as in the catalog)."""
    found = None
    for path in sorted(Path(specs_dir).glob("*.yaml")):
        if path.name == "impls.yaml":
            continue
        root = yaml.compose(path.read_text(encoding="utf-8"))
        templates = _value(root, "templates") if root is not None else None
        for template in (templates[1].value if templates else []):
            impl, weights, entries = (_value(template, k) for k in ("impl", "weights", "device_model_specs"))
            if impl is None or impl[1].value != spec.impl.impl_name or weights is None or entries is None:
                continue
            repos = [w.value for w in weights[1].value]
            if spec.hf_model_repo not in repos:
                continue
            for entry in entries[1].value:
                device = _value(entry, "device")
                if device is not None and device[1].value == spec.device_type.value:
                    found = _Found(path, template, entry, repos)
    if found is None:
        raise CatalogEditError(f"{spec.model_id}: no template of {spec.impl.impl_name} with weights "
                               f"{spec.hf_model_repo} on {spec.device_type.value} in {specs_dir}")
    return found


def _line_start(text: str, line: int) -> int:
    """Offset of the first character of 0-based ``line`` (the text's end past the last line)."""
    offset = 0
    for _ in range(line):
        nl = text.find("\n", offset)
        if nl < 0:
            return len(text)
        offset = nl + 1
    return offset


def _after_key_line(text: str, mapping: Any, after: str, line: str) -> tuple[int, int, str]:
    """An edit inserting ``line`` (at the mapping's key indentation) below the line of key ``after``."""
    key = _value(mapping, after)
    anchor = key[0] if key is not None else mapping.value[0][0]
    at = _line_start(text, anchor.start_mark.line + 1)
    return at, at, " " * anchor.start_mark.column + line + "\n"


def governed(found: _Found, spec: ModelSpec) -> list[str]:
    """The spec ids whose status the edited line decides: the spec alone when it is the template's only
    (weights, device) pair, else the spec of every weights repository on that device entry."""
    from contracts.model_spec import model_id_for

    return [model_id_for(spec.impl.impl_name, repo.split("/")[-1], spec.device_type.value) for repo in found.repos]


def status_edit(text: str, found: _Found, status: str) -> tuple[int, int, str]:
    """The one edit that sets the spec's status: (start, end, replacement) in the file's text."""
    own = _value(found.entry, "status")
    if own is not None:
        return own[1].start_mark.index, own[1].end_mark.index, status
    entries = _value(found.template, "device_model_specs")
    if found.weights == 1 and entries is not None and len(entries[1].value) == 1:
        template_status = _value(found.template, "status")
        if template_status is not None:
            return template_status[1].start_mark.index, template_status[1].end_mark.index, status
        return _after_key_line(text, found.template, "impl", f"status: {status}")
    if found.entry.flow_style:
        close = found.entry.end_mark.index - 1  # the closing brace
        return close, close, f", status: {status}"
    last_key, last_value = found.entry.value[-1]
    end = last_value.end_mark  # a block value may end at the start of the next line, or mid-line
    at = _line_start(text, end.line if end.column == 0 else end.line + 1)
    return at, at, " " * last_key.start_mark.column + f"status: {status}\n"


def version_edit(text: str, found: _Found, version: str) -> tuple[int, int, str]:
    """The edit that pins the template's ``version:`` to the release that changed it."""
    own = _value(found.template, "version")
    if own is not None:
        return own[1].start_mark.index, own[1].end_mark.index, f'"{version}"'
    after = "status" if _value(found.template, "status") is not None else "impl"
    return _after_key_line(text, found.template, after, f'version: "{version}"')


def apply_edits(text: str, edits: list[tuple[int, int, str]]) -> str:
    """The text with every edit made (positions refer to the original text; overlapping edits refused)."""
    out, last = text, None
    for start, end, new in sorted(set(edits), reverse=True):  # the same insertion point: a fixed order
        if last is not None and end > last:
            raise CatalogEditError(f"two catalog edits overlap at offset {start}")
        out, last = out[:start] + new + out[end:], start
    return out


def next_version(version: str) -> str:
    """The patch release after ``version`` (0.1.0 -> 0.1.1)."""
    parts = version.strip().lstrip("v").split(".")
    parts[-1] = str(int(parts[-1]) + 1)
    return ".".join(parts)


def apply_statuses(root: Path, changes: list[tuple[ModelSpec, str]]) -> tuple[str | None, list[Path]]:
    """Write each (spec, new status) into the catalog under ``root`` and bump ``root/VERSION``; returns the
    new version (None when nothing changed) and the files written."""
    changes = [(spec, status) for spec, status in changes if spec.status.name != status]
    if not changes:
        return None, []
    specs_dir = root / "workflows" / "model_specs"
    version_file = root / "VERSION"
    version = next_version(version_file.read_text(encoding="utf-8"))
    per_file: dict[Path, list[tuple[int, int, str]]] = {}
    texts: dict[Path, str] = {}
    wanted = {spec.model_id: status for spec, status in changes}
    for spec, status in changes:
        found = locate(specs_dir, spec)
        others = [sid for sid in governed(found, spec) if wanted.get(sid) != status and sid != spec.model_id]
        if others:
            raise CatalogEditError(f"{spec.model_id}: its line in {found.path.name} also decides the status of "
                                   f"{', '.join(others)}, which this release does not move to {status}; split the "
                                   f"template to change it alone")
        text = texts.setdefault(found.path, found.path.read_text(encoding="utf-8"))
        per_file.setdefault(found.path, []).extend([status_edit(text, found, status),
                                                    version_edit(text, found, version)])
    for path, edits in per_file.items():
        path.write_text(apply_edits(texts[path], edits), encoding="utf-8")
    version_file.write_text(version + "\n", encoding="utf-8")
    return version, [*sorted(per_file), version_file]
