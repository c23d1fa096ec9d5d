"""A registry entry as other tools name a model: a Hugging Face repository where the weights are one, else the
provider the API's host names and the model it serves, else the project's own namespace (baselines, adapters)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from h2htalk.llm.engines import engine_of
from h2htalk.llm.engines.server import ServerEngine

OWN_NAMESPACE = "h2htalk"  # what the project itself answers with (a baseline), or weights no one else names


@dataclass(frozen=True)
class ModelName:
    id: str  # "developer/model"
    developer: str
    engine: str
    revision: str | None
    open_weights: bool  # the id is a Hugging Face repository of the weights answered with
    self_deployed: bool  # the job ran the model (a server it started, or a baseline), not a remote service
    endpoint: str | None  # the remote service that answered, where its identity names one


def provider_of(url: str | None) -> str | None:
    """The organisation a service's host names (``api.example.com`` -> ``example``); None for an address."""
    host = urlparse(url).hostname if url else None
    if not host or host == "localhost":
        return None
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        labels = host.split(".")
    return labels[-2] if len(labels) >= 2 else None


def model_name(spec: dict[str, Any]) -> ModelName:
    """How exports name the registry entry ``spec`` (with its ``name``), from what identifies its answers: a
    repository id with an adapter on top is not that repository, so it goes under the project's namespace, as
    do baselines and a served model whose host names no provider."""
    engine = engine_of(spec)
    identity = engine.identity(spec)  # what every request key and provenance record name the model by
    served, adapter, endpoint = identity.get("model_id"), identity.get("lora"), identity.get("endpoint")
    self_deployed = isinstance(engine, ServerEngine) or engine.answers_without_model
    open_weights = bool(served and "/" in served and not adapter)
    if open_weights:
        name = served
    elif served and not adapter and (provider := provider_of(endpoint)):
        name = f"{provider}/{served}"
    else:
        name = f"{OWN_NAMESPACE}/{spec['name']}"
    return ModelName(
        id=name,
        developer=name.split("/", 1)[0],
        engine=engine.name,
        revision=identity.get("revision"),
        open_weights=open_weights,
        self_deployed=self_deployed,
        endpoint=None if self_deployed else endpoint,
    )
