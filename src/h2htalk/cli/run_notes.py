"""What every table and figure built from a run's instances or answers says about the run itself."""

from __future__ import annotations

from typing import Any

RUN_NOTE_READS = ("instances.source", "subtasks")  # what run_notes reads: add them to the command's reads


def run_notes(config: dict[str, Any]) -> list[str]:
    """A run on the demo instances is a check of the pipeline, and says so; other runs say nothing here."""
    from h2htalk.instances.sources import demo_note

    return [demo_note(config["subtasks"])] if config["instances"]["source"] == "demo" else []
