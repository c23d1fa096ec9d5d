"""Instances: what a model under test is given for one item, validated against the instance schema."""

from __future__ import annotations

import os
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from h2htalk.errors import DataError
from h2htalk.io import iter_jsonl, write_jsonl_atomic

INSTANCE_SCHEMA = "instance.schema.yaml"


@cache
def instance_schema() -> dict[str, Any]:
    text = resources.files("h2htalk.schemas").joinpath(INSTANCE_SCHEMA).read_text(encoding="utf-8")
    return yaml.safe_load(text)


@cache
def _validator() -> jsonschema.protocols.Validator:
    schema = instance_schema()
    return jsonschema.validators.validator_for(schema)(schema)


@cache
def required_fields() -> dict[str, tuple[str, ...]]:
    """Subtask -> the template fields its instances must have (read from the schema's rules)."""
    out = {}
    for rule in instance_schema()["allOf"]:
        subtask = rule["if"]["properties"]["subtask"]["const"]
        out[subtask] = tuple(rule["then"]["properties"]["fields"]["required"])
    return out


def _field_path(error: jsonschema.ValidationError) -> str:
    path = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in error.absolute_path).replace(".[", "[")
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        path = f"{path}.{missing}" if path else missing
    return path or "<record>"


def check_instance(record: Any, where: str) -> None:
    """Raise ``DataError`` naming ``where`` and the first offending field if ``record`` is invalid."""
    errors = sorted(_validator().iter_errors(record), key=lambda e: (len(list(e.absolute_path)), e.message))
    if errors:
        error = errors[0]
        raise DataError(f"{where}: field '{_field_path(error)}': {error.message}")


def read_instances(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read and validate an instance file; any invalid line is an error naming file, line and field."""
    path = Path(path)
    records, seen = [], set()
    for number, record in iter_jsonl(path):
        where = f"{path}: line {number}"
        check_instance(record, where)
        if record["id"] in seen:
            raise DataError(f"{where}: field 'id': duplicate id {record['id']!r}")
        seen.add(record["id"])
        records.append(record)
    return records


def demo_instances_path(subtask: str) -> Path:
    return Path(str(resources.files("h2htalk.resources").joinpath("demo_instances").joinpath(f"{subtask}.jsonl")))


def write_instances(
    subtask: str, source: str, out: str | os.PathLike[str], file: str | os.PathLike[str] | None = None
) -> int:
    """Write the instance set of one subtask from the chosen source (``demo`` or ``file``), validated."""
    if source == "demo":
        path = demo_instances_path(subtask)
    elif source == "file":
        if file is None:
            raise DataError(f"instances for {subtask}: source 'file' needs a path")
        path = Path(file)
    else:
        raise DataError(f"instances for {subtask}: unknown source {source!r}")
    records = read_instances(path)
    wrong = [r["id"] for r in records if r["subtask"] != subtask]
    if wrong:
        raise DataError(f"{path}: {len(wrong)} instances belong to another subtask than {subtask} (e.g. {wrong[0]})")
    if not records:
        raise DataError(f"{path}: no instances for {subtask}")
    return write_jsonl_atomic(out, records)
