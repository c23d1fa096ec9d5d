"""What every table and figure built from a run's instances or answers says about the run itself."""

from __future__ import annotations

from typing import Any

# what run_notes reads: add them to the command's reads
RUN_NOTE_READS = ("instances.source", "instances.limit", "subtasks")


def run_notes(config: dict[str, Any]) -> list[str]:
    """A run on the demo instances is a check of the pipeline, and a run limited to the first instances of each
    subtask a partial one: each says so; other runs say nothing here."""
    from h2htalk.instances.sources import demo_note, limit_note

    limit = config["instances"]["limit"]
    notes = [demo_note(config["subtasks"], limit)] if config["instances"]["source"] == "demo" else []
    return notes + ([note] if (note := limit_note(limit)) else [])
