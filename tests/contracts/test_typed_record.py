"""The typed record base: round trip, unknown keys kept, schema checked, legend from descriptions."""

from __future__ import annotations

import dataclasses

import pytest

from contracts.typed_record import RecordError, TypedRecord, described


@dataclasses.dataclass
class Part(TypedRecord):
    value: float = described("a measured value", unit="ms")


@dataclasses.dataclass
class Whole(TypedRecord):
    SCHEMA = "tt-example/2"
    name: str = described("what it is")
    part: Part | None = described("one nested part", None, record=Part)
    parts: list = described("several parts", factory=list, record_list=Part)

    @classmethod
    def upgrade(cls, found_schema, data):
        if found_schema == "tt-example/1":
            return {**data, "name": data.pop("title")}
        return super().upgrade(found_schema, data)


def test_round_trip_keeps_unknown_keys(tmp_path):
    data = {"schema": "tt-example/2", "name": "x", "part": {"value": 1.5, "new": 1},
            "parts": [{"value": 2.0}], "future_field": [1, 2]}
    record = Whole.from_dict(data)
    assert record.part.value == 1.5 and record.parts[0].value == 2.0
    assert record.to_dict() == data
    assert Whole.read(record.write(tmp_path / "r.json")).to_dict() == data


def test_other_kind_and_missing_fields_are_refused():
    with pytest.raises(RecordError, match="not a 'tt-example' record"):
        Whole.from_dict({"schema": "tt-other/2", "name": "x"})
    with pytest.raises(RecordError, match="missing field"):
        Whole.from_dict({"schema": "tt-example/2"})
    with pytest.raises(RecordError, match="cannot read schema"):
        Whole.from_dict({"schema": "tt-example/9", "name": "x"})


def test_older_version_is_upgraded():
    assert Whole.from_dict({"schema": "tt-example/1", "title": "old"}).name == "old"


def test_legend_comes_from_the_field_descriptions():
    assert Part.legend() == {"value": "a measured value (ms)"}
