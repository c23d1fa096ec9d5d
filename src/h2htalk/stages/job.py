"""A job of a stage, as its function sees it: the settings the stage declared it reads, its labels and cells, its
resolved inputs and outputs, and how it reaches models (an engine, or the plan's stand-in for one)."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from h2htalk.cells import RunCells
from h2htalk.layout import Cell, Layout

if TYPE_CHECKING:  # the model-call stack (openai, httpx) is imported only by the jobs that call models
    from h2htalk.llm.calls import EngineOptions
    from h2htalk.stages.spec import Stage


@dataclass(frozen=True)
class Done:
    """What a job says when it ends: ``COMMAND SUBJECT: FACTS -> OUT (TIME)``."""

    facts: str
    subject: str = ""
    out: str | os.PathLike[str] | None = None


class Models(Protocol):
    """How a job reaches models: registry entries and engines, for real or planned."""

    def entry(self, name: str, pinned: bool = True) -> dict[str, Any]: ...

    def engines(self, names: list[str]) -> Any: ...


@dataclass
class Job:
    stage: Stage
    config: dict[str, Any]  # only what the stage reads
    results: Layout
    labels: dict[str, str]
    cells: list[Cell]
    inputs: dict[str, list[str]]
    outputs: dict[str, list[str]]
    models: Models
    options: argparse.Namespace = field(default_factory=argparse.Namespace)

    @property
    def run(self) -> RunCells:
        return RunCells(self.config)

    def input(self, name: str) -> str:
        """The one file of input ``name``."""
        (path,) = self.inputs[name]
        return path

    def output(self, name: str) -> str:
        (path,) = self.outputs[name]
        return path

    def named_outputs(self) -> dict[str, str]:
        """The job's outputs that are one file each, by name (a table's csv, md, tex, ...)."""
        return {name: paths[0] for name, paths in self.outputs.items() if len(paths) == 1}

    def out_path(self, name: str) -> Path:
        return Path(self.output(name))

    def each(self, name: str, cell: Cell) -> str:
        """The path of input or output ``name`` (declared ``Each``) of one of the job's cells."""
        from h2htalk.stages.spec import Scope

        spec = self.stage.inputs.get(name) or self.stage.outputs[name]
        return spec.of(Scope(self.config, self.results), cell)  # type: ignore[union-attr]

    def entry(self, name: str) -> dict[str, Any]:
        """A runnable registry entry (at the commit its prefetch record names, where it has one)."""
        return self.models.entry(name)

    def engines(self, names: list[str]) -> EngineOptions:
        return self.models.engines(names)

    def option(self, name: str, default: Any = None) -> Any:
        return getattr(self.options, name, default)
