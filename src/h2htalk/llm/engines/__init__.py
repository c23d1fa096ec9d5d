"""Engines: how an OpenAI-compatible endpoint comes to exist for one model, for the length of one job.

Every engine is one module here implementing ``Engine`` (base.py), registered in ``ENGINES`` by its name, the
registry's ``engine`` value. Nothing outside this package asks which engine an entry has: it asks the
entry's engine (``engine_of(spec)``) for what it needs. The registry schema gets its ``engine`` values and
each engine's keys from here (``registry_schema``).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from h2htalk.errors import ConfigError
from h2htalk.llm.engines.api import Api
from h2htalk.llm.engines.base import Endpoint, Engine, EngineError, ServeOptions
from h2htalk.llm.engines.baseline import Baseline
from h2htalk.llm.engines.llamacpp import LlamaCpp
from h2htalk.llm.engines.vllm import Vllm

__all__ = [
    "ENGINES", "Endpoint", "Engine", "EngineError", "LazyEndpoint", "ServeOptions", "engine_of", "missing_environment",
    "open_endpoint", "register", "registry_schema", "require_environment",
]  # fmt: skip

ENGINES: dict[str, Engine] = {}


def register(engine: Engine) -> None:
    """Make ``engine`` available to registry entries under its name."""
    if engine.name in ENGINES:
        raise ValueError(f"engine {engine.name!r} is registered already")
    ENGINES[engine.name] = engine


for _engine in (LlamaCpp(), Vllm(), Api(), Baseline()):
    register(_engine)


def engine_of(spec: dict[str, Any]) -> Engine:
    """The engine of a registry entry (validated, so its engine is registered)."""
    return ENGINES[spec["engine"]]


def registry_schema(base: dict[str, Any]) -> dict[str, Any]:
    """The registry schema: ``base`` (the keys every entry has) with the registered engines' names and blocks.

    An engine's keys join every entry's properties; the rest of its block applies to its own entries. Those
    branches come after the shared properties, so that a mapping a shared key defaults to (``resources``)
    exists when an engine fills in its own default inside it (``resources.mem_mb``).
    """
    schema = copy.deepcopy(base)
    entry = schema["additionalProperties"]
    entry["properties"]["engine"] = {**entry["properties"]["engine"], "enum": list(ENGINES)}
    branches = []
    for name, engine in ENGINES.items():
        block = copy.deepcopy(engine.schema)
        entry["properties"].update(block.get("properties", {}))
        branches.append({"if": {"properties": {"engine": {"const": name}}}, "then": block["then"]})
    entry["allOf"] = branches
    return schema


def missing_environment(specs: Iterable[dict[str, Any]]) -> list[str]:
    """What the environment lacks to run ``specs`` (registry entries), one line each."""
    return sorted({problem for spec in specs if (problem := engine_of(spec).missing_environment(spec))})


def require_environment(specs: Iterable[dict[str, Any]]) -> None:
    """Fail, before anything starts, when the environment lacks what ``specs`` need (an API key): every problem
    at once."""
    if problems := missing_environment(specs):
        lines = "\n".join(f"  - {p}" for p in problems)
        raise ConfigError(f"the environment lacks what the models in use need:\n{lines}")


@contextlib.contextmanager
def open_endpoint(
    spec: dict[str, Any], model_file: str | None = None, log_path: Path | None = None, seed: int | None = None
) -> Iterator[Endpoint]:
    """Provide an endpoint for the registry entry ``spec`` for the duration of the block."""
    with engine_of(spec).endpoint(spec, ServeOptions(model_file, log_path, seed)) as endpoint:
        yield endpoint


class LazyEndpoint:
    """An engine started on first use (only when some request is not cached) and stopped on exit."""

    def __init__(self, spec: dict[str, Any], options: ServeOptions) -> None:
        self._spec, self._options = spec, options
        self._stack = contextlib.ExitStack()
        self._endpoint: Endpoint | None = None

    def __call__(self) -> Endpoint:
        if self._endpoint is None:
            self._endpoint = self._stack.enter_context(engine_of(self._spec).endpoint(self._spec, self._options))
        return self._endpoint

    def __enter__(self) -> LazyEndpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()
