"""What every engine provides: the interface the rest of the project calls, never an engine's name.

An engine is one way of running a registry entry (``spec``): its block of the registry schema (the keys it
owns, what its entries require, its defaults), what identifies the weights (part of every request key and
provenance record), what prefetch downloads, what a job running it needs (a provisioned model file, CPU
threads), why an entry cannot run, what the environment must hold (an API key), the endpoint it provides for
the length of a job, and the packages whose versions the provenance records.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from h2htalk.errors import H2HTalkError

NO_KEY = "not-needed"  # what a client sends to an endpoint that asks for no key


class EngineError(H2HTalkError):
    """An engine could not provide an endpoint."""


@dataclass(frozen=True)
class Endpoint:
    base_url: str  # ends in /v1
    model: str  # the name requests carry in their "model" field
    api_key: str = NO_KEY

    def __repr__(self) -> str:  # never print the key
        return f"Endpoint(base_url={self.base_url!r}, model={self.model!r})"


@dataclass(frozen=True)
class ServeOptions:
    """What a job gives the engine it starts: the provisioned model file (engines that need one), the file
    its server writes to, the seed of its sampling."""

    model_file: str | None = None
    log_path: Path | None = None
    seed: int | None = None


class Engine:
    """One way of running a model. Subclasses set ``name`` and ``schema`` and override what differs."""

    name: ClassVar[str]
    # its block of the registry schema: "properties" (the keys it owns, merged into every entry's) and "then"
    # (the schema an entry of this engine must also meet: required keys, its defaults of shared keys)
    schema: ClassVar[dict[str, Any]]
    answers_without_model: ClassVar[bool] = False  # a baseline: answers come from the instances, no endpoint
    needs_model_file: ClassVar[bool] = False  # a job is given a provisioned file (results/models/NAME.gguf)
    packages: ClassVar[tuple[str, ...]] = ()  # installed packages whose versions the provenance records
    slots: ClassVar[int | None] = None  # requests its server works on at once (None: many, batched together)
    # its server runs on this machine's CPU, so a run here can say how long its jobs will take, from prompt and
    # answer rates measured through that server (rates_setting, measure_rates; h2htalk.plan.timing)
    timed_on_cpu: ClassVar[bool] = False

    def identity(self, spec: dict[str, Any]) -> dict[str, Any]:
        """What identifies the answers of ``spec``: part of every request key and of every answer's provenance."""
        return {
            "name": spec["name"],
            "engine": self.name,
            "model_id": self.model_id(spec),
            "revision": self.revision(spec),
            "lora": (spec.get("lora") or {}).get("path"),
        }

    def model_id(self, spec: dict[str, Any]) -> str | None:
        return spec.get("hf_id")

    def revision(self, spec: dict[str, Any]) -> str | None:
        return spec.get("revision")

    def model_file_source(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Where the file a job is given comes from (``needs_model_file``): its URL or parts, and its checksum."""
        raise H2HTalkError(f"model {spec['name']!r}: engine {self.name} needs no model file")

    def downloads(self, spec: dict[str, Any]) -> list[dict[str, Any]]:
        """What prefetch fetches from the Hugging Face hub before any job runs (``role``, ``repo``,
        ``revision``)."""
        return []

    def threads(self, spec: dict[str, Any]) -> int:
        """CPU threads a job running ``spec`` asks the scheduler for."""
        return 1

    def runnable_problem(self, spec: dict[str, Any]) -> str | None:
        """Why ``spec`` cannot run as configured (what to set), or None."""
        return None

    def missing_environment(self, spec: dict[str, Any]) -> str | None:
        """What the environment lacks to run ``spec`` (an API key), or None; checked before any job starts."""
        return None

    def provider(self, spec: dict[str, Any]) -> str | None:
        """Who serves ``spec`` under rate limits of its own (``generation.rate_limits`` keys), or None."""
        return None

    def batch_limits(self, spec: dict[str, Any]) -> dict[str, int] | None:
        """The limits of the OpenAI-compatible Batch API that serves ``spec`` (requests and bytes a batch), or
        None when none does: its requests are answered directly."""
        return None

    def rates_setting(self, spec: dict[str, Any], model_file: str | os.PathLike[str] | None = None) -> str:
        """What the rates of ``spec`` on this CPU depend on besides the CPU (its server's settings, the model, the
        server's version), where the engine is ``timed_on_cpu``: the rates are kept under it (``plan.rates``)."""
        raise EngineError(f"model {spec['name']}: engine {self.name} measures no rates on this CPU")

    def measure_rates(
        self, spec: dict[str, Any], model_file: str | os.PathLike[str], log_path: Path | None = None,
        most: int = 3, least: int = 2, budget_s: float = 20.0,
    ) -> tuple[float, float, int]:  # fmt: skip
        """pp512 and tg128 of ``spec`` on this CPU, where the engine is ``timed_on_cpu``, measured as its jobs will
        get them (on the server a job starts): the best of ``least`` to ``most`` trials, none started after
        ``budget_s`` once ``least`` are done. Returns (pp512, tg128, trials)."""
        raise EngineError(f"model {spec['name']}: engine {self.name} measures no rates on this CPU")

    def endpoint(self, spec: dict[str, Any], options: ServeOptions) -> AbstractContextManager[Endpoint]:
        """An OpenAI-compatible endpoint serving ``spec`` for the length of the block, stopped however it ends."""
        raise EngineError(f"model {spec['name']}: engine {self.name} serves no model")
