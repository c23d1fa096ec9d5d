"""What planned tokens cost: API money from a dated price table, GPU time from a throughput table by model size, and
that time's money from the price table's rate for the throughput table's GPU.

Both tables are files (``plan.prices``, ``plan.throughput``; ``config/prices.yaml`` and ``config/throughput.yaml``
hold the sources their numbers come from): no price or rate is in the code.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema

from h2htalk.errors import ConfigError
from h2htalk.io import parse_yaml
from h2htalk.stages.steps import Stepped, steps_making

PRICES_SCHEMA = parse_yaml(
    """
    type: object
    required: [date, currency, models]
    additionalProperties: false
    properties:
      date: {type: string}
      currency: {type: string}
      models:
        type: object
        additionalProperties:
          type: object
          required: [input_per_mtok, output_per_mtok, batch_discount]
          additionalProperties: false
          properties:
            input_per_mtok: {type: number, minimum: 0}
            output_per_mtok: {type: number, minimum: 0}
            batch_discount: {type: [number, "null"], minimum: 0, maximum: 1}
            source: {type: string}
      gpu_hours:
        type: object
        additionalProperties:
          type: object
          required: [per_hour]
          additionalProperties: false
          properties:
            per_hour: {type: number, minimum: 0}
            source: {type: string}
    """
)
THROUGHPUT_SCHEMA = parse_yaml(
    """
    type: object
    required: [gpu, classes]
    additionalProperties: false
    properties:
      gpu: {type: string}
      classes:
        type: array
        minItems: 1
        items:
          type: object
          required: [up_to_b, prefill, decode, startup_min]
          additionalProperties: false
          properties:
            up_to_b: {type: [number, "null"], exclusiveMinimum: 0}
            prefill: {type: number, exclusiveMinimum: 0}
            decode: {type: number, exclusiveMinimum: 0}
            startup_min: {type: number, minimum: 0}
      cpu:
        type: object
        required: [prefill_share, decode_share, job_start_s, answer_length, verdict_tokens, other_job_s,
                   reference_pp512]
        additionalProperties: false
        properties:
          prefill_share: {type: number, exclusiveMinimum: 0}
          decode_share: {type: number, exclusiveMinimum: 0}
          job_start_s: {type: number, minimum: 0}
          answer_length: {type: object, additionalProperties: {type: number, exclusiveMinimum: 0}}
          verdict_tokens: {type: object, additionalProperties: {type: number, minimum: 0}}
          other_job_s: {type: number, minimum: 0}
          reference_pp512: {type: number, exclusiveMinimum: 0}
          request_planned_s: {type: number, minimum: 0}
          answer_scored_s: {type: number, minimum: 0}
          study_answer_scored_s: {type: number, minimum: 0}
    """
)


def throughput_schema(stages: Iterable[Stepped]) -> dict[str, Any]:
    """The throughput table's schema: its ``cpu`` section names the steps of ``stages`` that make answers
    (``answer_length``) and verdicts (``verdict_tokens``) by their one name (``stages.steps``)."""
    stages = list(stages)
    schema = copy.deepcopy(THROUGHPUT_SCHEMA)
    cpu = schema["properties"]["cpu"]["properties"]
    cpu["answer_length"]["propertyNames"] = {"enum": steps_making(stages, "answers")}
    cpu["verdict_tokens"]["propertyNames"] = {"enum": steps_making(stages, "verdicts")}
    return schema


def _read(path: str | os.PathLike[str], schema: dict[str, Any], what: str) -> dict[str, Any]:
    try:
        data = parse_yaml(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{what} not found: {path}") from None
    if isinstance(data, dict) and "date" in data:
        data["date"] = str(data["date"])  # YAML reads 2025-03-01 as a date
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        where = ".".join(str(p) for p in errors[0].absolute_path) or "<top level>"
        raise ConfigError(f"{path}: {where}: {errors[0].message}")
    return data


@dataclass(frozen=True)
class Price:
    input_per_mtok: float
    output_per_mtok: float
    batch_discount: float | None  # the share the provider's Batch API takes off; None: it has none

    def cost(self, prompt_tokens: int, completion_tokens: int, batched: bool) -> float:
        full = (prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok) / 1e6
        return full * (1 - self.batch_discount) if batched and self.batch_discount else full


@dataclass(frozen=True)
class PriceTable:
    path: str
    date: str
    currency: str
    models: dict[str, Price]
    gpu_hours: dict[str, float]  # GPU model (as the throughput table names it) -> the price of one GPU-hour

    def gpu_cost(self, gpu: str, hours: float | None) -> float | None:
        """What ``hours`` GPU-hours of ``gpu`` cost; None where either is not known."""
        rate = self.gpu_hours.get(gpu)
        return None if hours is None or rate is None else hours * rate


def load_prices(path: str | os.PathLike[str]) -> PriceTable:
    data = _read(path, PRICES_SCHEMA, "price table (plan.prices)")
    models = {
        name: Price(entry["input_per_mtok"], entry["output_per_mtok"], entry["batch_discount"])
        for name, entry in data["models"].items()
    }
    gpus = {gpu: entry["per_hour"] for gpu, entry in data.get("gpu_hours", {}).items()}
    return PriceTable(str(path), data["date"], data["currency"], models, gpus)


@dataclass(frozen=True)
class SizeClass:
    up_to_b: float | None
    prefill: float  # prompt tokens read a second, per GPU
    decode: float  # answer tokens written a second, per GPU
    startup_min: float  # a job's server start, on each of its GPUs


@dataclass(frozen=True)
class CpuCalibration:
    """The local model on a CPU (``plan.timing``): the throughput table's ``cpu`` section, sources in the file."""

    prefill_share: float  # a job's prompt tokens a second, as a share of pp512
    decode_share: float  # a job's answer tokens a second, as a share of tg128
    job_start_s: float  # a job's server start and its work outside llama.cpp
    answer_length: Mapping[str, float]  # the local model's answers / the plan's placeholders, by step
    verdict_tokens: Mapping[str, float]  # a judge's answer, in tokens, by step
    other_job_s: float  # a job that starts no model, on a core of its own
    reference_pp512: float
    # what a job that starts no model spends on each unit of work that grows with the run, on a core of its own (0:
    # none counted): the plan job on each request of the run, a score job on each answer, score_studies on each of
    # the studies' answers (the key its stage's ``grows`` names, plan.work)
    request_planned_s: float = 0.0
    answer_scored_s: float = 0.0
    study_answer_scored_s: float = 0.0


@dataclass(frozen=True)
class Throughput:
    path: str
    gpu: str
    classes: tuple[SizeClass, ...]
    cpu: CpuCalibration | None = None  # the local model's jobs on a CPU (plan.timing)

    def size_class(self, size_b: float) -> SizeClass | None:
        return next((c for c in self.classes if c.up_to_b is None or size_b <= c.up_to_b), None)

    def gpu_hours(self, spec: dict[str, Any], prefill_tokens: int, decode_tokens: int, jobs: int) -> float | None:
        """GPU-hours of ``jobs`` jobs of the model of ``spec`` reading and writing these tokens; None for a model
        without GPUs or without a known size."""
        if not spec.get("gpus") or spec.get("size_b") is None:
            return None
        rates = self.size_class(spec["size_b"])
        if rates is None:
            return None
        work = (prefill_tokens / rates.prefill + decode_tokens / rates.decode) / 3600
        return work + jobs * spec["gpus"] * rates.startup_min / 60


def load_throughput(path: str | os.PathLike[str], stages: Iterable[Stepped]) -> Throughput:
    """The throughput table at ``path``, checked; the steps its ``cpu`` section names are those ``stages`` declare."""
    data = _read(path, throughput_schema(stages), "throughput table (plan.throughput)")
    classes = tuple(SizeClass(**entry) for entry in data["classes"])
    cpu = CpuCalibration(**data["cpu"]) if "cpu" in data else None
    return Throughput(str(path), data["gpu"], classes, cpu)
