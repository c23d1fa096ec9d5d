"""``baseline``: no language model; the answers come from the instances (calibration: the chance floor, the
oracle). Generation branches on ``answers_without_model``, so a baseline starts no endpoint."""

from __future__ import annotations

from typing import Any

from h2htalk.io import parse_yaml
from h2htalk.llm.engines.base import Engine


class Baseline(Engine):
    name = "baseline"
    answers_without_model = True
    schema = parse_yaml(
        """
        properties:
          baseline:
            description: A baseline answering without a language model (engine baseline).
            type: object
            additionalProperties: false
            required: [kind]
            properties:
              kind: {enum: [random_reference, majority_reference, echo_input, oracle]}
              seed: {description: Seed of random_reference., type: integer, minimum: 0, default: 13}
        then:
          required: [baseline]
          properties:
            gpus: {default: 0}
            resources: {properties: {mem_mb: {default: 4000}}}
        """
    )

    def model_id(self, spec: dict[str, Any]) -> str | None:
        return spec.get("hf_id") or spec["baseline"]["kind"]
