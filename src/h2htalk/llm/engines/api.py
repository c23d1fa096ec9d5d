"""``api``: a remote (or separately run) OpenAI-compatible endpoint; its key, when it asks for one, comes from
the environment variable the registry names."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from h2htalk.io import parse_yaml
from h2htalk.llm.engines.base import NO_KEY, Endpoint, Engine, EngineError, ServeOptions


class Api(Engine):
    name = "api"
    schema = parse_yaml(
        """
        properties:
          api:
            type: object
            additionalProperties: false
            required: [base_url, model]
            properties:
              base_url: {type: string, pattern: "^https?://"}
              model: {type: string}
              api_key_env: {description: "Name of the environment variable holding the key (never the key); none
                              for a server that asks for no key.", type: string, pattern: "^[A-Z_][A-Z0-9_]*$"}
              provider: {description: "Whose rate limits apply (a key of generation.rate_limits); default: the
                           host of base_url.", type: string, minLength: 1}
              batch_api:
                description: "The endpoint offers OpenAI's Batch API (files, batches), with these limits a batch;
                  null: it does not, and its requests are answered directly."
                type: [object, "null"]
                additionalProperties: false
                default: null
                properties:
                  max_requests: {description: Requests a batch., type: integer, minimum: 1, default: 50000}
                  max_bytes: {description: Bytes of a batch's input file., type: integer, minimum: 1,
                              default: 200000000}
        then:
          required: [api]
          properties:
            gpus: {default: 0}
            resources: {properties: {mem_mb: {default: 4000}}}
        """
    )

    def identity(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Another host may serve other weights under the same name: the endpoint is part of the identity, unless
        the entry pins a ``revision`` (the same model, wherever it is served)."""
        identity = super().identity(spec)
        if identity["revision"] is None:
            identity["endpoint"] = base_url(spec)
        return identity

    def model_id(self, spec: dict[str, Any]) -> str | None:
        return spec.get("hf_id") or spec["api"]["model"]

    def provider(self, spec: dict[str, Any]) -> str | None:
        return spec["api"].get("provider") or urlsplit(base_url(spec)).hostname

    def batch_limits(self, spec: dict[str, Any]) -> dict[str, int] | None:
        return spec["api"].get("batch_api")

    def missing_environment(self, spec: dict[str, Any]) -> str | None:
        variable = spec["api"].get("api_key_env")
        if variable and not os.environ.get(variable):
            return f"environment variable {variable} (the API key of model {spec['name']}) is not set"
        return None

    @contextlib.contextmanager
    def endpoint(self, spec: dict[str, Any], options: ServeOptions) -> Iterator[Endpoint]:
        if problem := self.missing_environment(spec):
            raise EngineError(problem)
        variable = spec["api"].get("api_key_env")
        yield Endpoint(base_url(spec), spec["api"]["model"], os.environ[variable] if variable else NO_KEY)


def base_url(spec: dict[str, Any]) -> str:
    return spec["api"]["base_url"].rstrip("/")
