"""Where a subtask's instance set comes from: the demo set in its definition, or a file of the user's."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from h2htalk.errors import DataError
from h2htalk.instance_schema import check_instance, read_instances
from h2htalk.io import write_jsonl_atomic
from h2htalk.layout import Layout
from h2htalk.stages.declare import stage
from h2htalk.stages.spec import Done, Labels, One, Over, Paths, Scope
from h2htalk.subtasks import get_subtask

DEMO_PROVENANCE = {"method": "hand-written for the h2htalk demo set", "language": "zh"}

log = logging.getLogger(__name__)


def demo_instances(subtask: str) -> list[dict[str, Any]]:
    """The hand-written demo instances of a subtask's definition, as instance records."""
    records = [
        {
            "id": f"{subtask}-{demo['id']}",
            "subtask": subtask,
            "fields": demo["fields"],
            "reference": demo["reference"],
            "source": {"kind": "demo"},
            "flags": [],
            "provenance": dict(DEMO_PROVENANCE),
        }
        for demo in get_subtask(subtask).demo
    ]
    for record in records:
        check_instance(record, f"demo instance {record['id']} (resources/subtasks/{subtask}.yaml)")
    return records


def demo_note(subtasks: Iterable[str], limit: int | None = None) -> str:
    """What every table and figure of a run on the demo instances says about itself (``limit``: instances.limit)."""
    sizes = sorted({min(len(get_subtask(key).demo), limit or len(get_subtask(key).demo)) for key in subtasks})
    per_subtask = str(sizes[0]) if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
    return f"Demo instances, {per_subtask} per subtask: a check of the pipeline, not a finding."


def source_file(instances: dict[str, Any], subtask: str, results: Layout) -> str | None:
    """The file a subtask's instances come from (``instances.source``): the user's file, the reconstructed
    instances in the results tree, or none (the demo set)."""
    if instances["source"] == "file":
        return instances["files"][subtask]
    if instances["source"] == "reconstructed":
        return results.path("reconstructed", subtask=subtask)
    return None


def limit_note(limit: int | None) -> str | None:
    """What every table and figure of a run limited to its first instances (instances.limit) says about itself."""
    if limit is None:
        return None
    return (
        f"At most {limit} instance{'s' if limit > 1 else ''} per subtask (instances.limit): a partial run, not"
        " comparable with the paper's Table 2."
    )


def instance_set(subtask: str, file: str | os.PathLike[str] | None = None, limit: int | None = None) -> list[dict]:
    """One subtask's instance set, validated: the demo set, or the records of ``file``; with ``limit``
    (instances.limit), its first ``limit`` records only."""
    if file is None:
        records = demo_instances(subtask)
    else:
        records = read_instances(file)
        wrong = [r["id"] for r in records if r["subtask"] != subtask]
        if wrong:
            raise DataError(f"{file}: {len(wrong)} instances belong to another subtask than {subtask}, e.g. {wrong[0]}")
    if limit is not None:
        records = records[:limit]
    if not records:  # e.g. every reconstructed item still waits for review: the subtask's cells stay empty
        log.warning("%s: no instances for %s; its cells will have no items (n = 0) until some are kept", file, subtask)
    return records


def _instance_source(scope: Scope, labels: Labels) -> list[str]:
    """The file the subtask's instances come from (`instances.source`): yours, or the reconstructed ones; none
    for the demo set."""
    file = source_file(scope.config["instances"], labels["subtask"], scope.results)
    return [file] if file else []  # none: the demo set, from the subtask's definition


@stage(
    "instances", "write one subtask's validated instance set (instances.source)",
    uses=("subtasks",), planned=True, reads=("instances",), jobs=Over(subtask=lambda run: run.subtasks),
    inputs={"source": Paths(_instance_source)}, outputs={"instances": One("instances")},
)  # fmt: skip
def write_instances(subtask: str, source: list[str], instances: str, config: Mapping[str, Any]) -> Done:
    """Write ``instance_set`` of ``source`` (none: the demo set) to ``instances``, limited as ``instances.limit``
    says."""
    limit, file = config["instances"]["limit"], source[0] if source else None
    count = write_jsonl_atomic(Path(instances), instance_set(subtask, file, limit))
    limited = f", the first {limit}" if limit is not None else ""
    return Done(f"{count} instances ({file or 'demo set'}{limited})", subtask, instances)


def run_notes(config: Mapping[str, Any]) -> list[str]:
    """What every table and figure built from a run's instances or answers says about the run itself (it reads
    instances.source, instances.limit and subtasks): a run on the demo instances is a check of the pipeline, and a
    run limited to the first instances of each subtask a partial one; other runs say nothing here."""
    limit = config["instances"]["limit"]
    notes = [demo_note(config["subtasks"], limit)] if config["instances"]["source"] == "demo" else []
    return notes + ([note] if (note := limit_note(limit)) else [])
