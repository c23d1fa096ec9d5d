"""The instance schema (what a model under test is given for one item) and reading instance files.

The schema's per-subtask parts are derived from the subtask definitions: the allowed subtask keys, the fields
each subtask requires, and each field's own schema (``resources/subtasks/fields.yaml``).
Below it are only the subtasks and the package's helpers, so that the instances stage (``h2htalk.instances``)
and the review desk's store (``h2htalk.desk_store``: a kept instance's edited fields) both check instances with it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from h2htalk.commands import command
from h2htalk.errors import DataError
from h2htalk.io import iter_jsonl, parse_yaml
from h2htalk.subtasks import SUBTASK_KEYS, SUBTASKS, field_catalogue

INSTANCE_SCHEMA = "instance.schema.yaml"


@cache
def instance_schema() -> dict[str, Any]:
    text = resources.files("h2htalk.schemas").joinpath(INSTANCE_SCHEMA).read_text(encoding="utf-8")
    schema = parse_yaml(text)
    properties = schema["properties"]
    properties["subtask"]["enum"] = list(SUBTASK_KEYS)
    properties["fields"]["properties"] = {name: entry["schema"] for name, entry in field_catalogue().items()}
    schema["allOf"] = [
        {
            "if": {"properties": {"subtask": {"const": s.key}}},
            "then": {"properties": {"fields": {"required": list(s.fields), "maxProperties": len(s.fields)}}},
        }
        for s in SUBTASKS
    ]
    return schema


@cache
def _validator() -> jsonschema.protocols.Validator:
    schema = instance_schema()
    return jsonschema.validators.validator_for(schema)(schema)


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


@command("validate-instances")
def validate_files(files: Sequence[Path], /) -> Iterator[str]:
    """Check instance files against their schema.

    files: the instance files (JSONL) to check
    """
    for path in files:
        yield f"{path}: {len(read_instances(path))} valid instances"
