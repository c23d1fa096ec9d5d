"""Every item of a run in the Every Eval Ever schema (``every-eval-ever`` 0.3.0), laid out as its datastore.

An Every Eval Ever *evaluation log* is one model's run of one benchmark; here that is one Table 2 row: a model,
a variant (the SAP layer is part of what the model is given) and an embedder (which changes S). Each log is two
files under ``data/h2htalk/{developer}/{model}/``: ``{uuid}.json``, the aggregate (who ran what, the model, one
result per subtask with its 95 % bootstrap CI, and Overall), and ``{uuid}_samples.jsonl``, the instance-level
records. The schema wants one instance record per item and aggregate result, so an item of a judged subtask
has two: its S and its J (on 0-100). A record needs a score: an item without one (an empty answer left unscored,
no readable judge answer) has no record, and its result's ``missing`` counts it. S and J are continuous, so
``is_correct`` is false throughout and the metadata says so, as the schema's own converters do for graded
metrics. UUIDs, ids and timestamps derive from the run's provenance, so the same run writes the same files.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from calendar import timegm
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from time import strptime
from typing import Any
from urllib.parse import urlparse

from h2htalk.cells import RunCells
from h2htalk.config import load_registry
from h2htalk.export.eee_validation import write_validation
from h2htalk.export.items import COMPONENTS, answer_items, read_prompts, read_references
from h2htalk.export.models import ModelName, model_name
from h2htalk.export.summaries import (
    EXPORT,
    ITEM_INPUTS,
    CellSummaries,
    components,
    read_summaries,
    shown_value,
    table_rows,
)
from h2htalk.io import read_json, sha256_file, write_json_atomic, write_jsonl_atomic
from h2htalk.layout import Layout
from h2htalk.llm.engines import engine_of
from h2htalk.scoring.signatures import signature_string
from h2htalk.settings import VARIANT_NAMES
from h2htalk.stages.declare import stage
from h2htalk.stages.spec import Done, Figure, Product
from h2htalk.subtasks import get_subtask
from h2htalk.tables.table2 import Row

SCHEMA_VERSION = "0.3.0"
COLLECTION = "h2htalk"
DATA = "data"  # the datastore's root folder, which its validator requires
S_DEFINITION = "(BLEU-1 + BLEU-2 + BLEU-3 + BLEU-4 + ROUGE-1 + ROUGE-L + SS) / 7 x 100"
J_DEFINITION = "J100 = 20 * (alpha * S / 20 + (1 - alpha) * judge), judge on 0-5"
NOT_BINARY = {"is_correct_applicable": "false", "is_correct_rule": "false for a graded metric; use evaluation.score"}


@dataclass(frozen=True)
class EvaluationLog:
    folder: str  # data/h2htalk/{developer}/{model}, relative to the export's root
    uuid: str
    aggregate: dict[str, Any]
    samples: list[dict[str, Any]]


def stable_uuid(*parts: str) -> str:
    """A version-4-shaped UUID from ``parts``: the datastore wants UUID4 file names, the run wants the same names
    every time it writes."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def epoch(timestamp: str) -> str:
    """``2026-01-31T12:00:00Z`` as Unix seconds, the form the schema asks for."""
    return str(timegm(strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ")))


def folder_of(name: ModelName) -> str:
    """The datastore folder of a model: the id's first part is the developer, the rest (flattened) the model."""
    parts = [part.replace(":", "_") for part in name.id.split("/")]
    return "/".join([DATA, COLLECTION, parts[0], "_".join(parts[1:])])


def strings(values: dict[str, Any]) -> dict[str, str]:
    """The schema's ``additional_details`` and ``metadata`` hold strings only; None is left out."""
    return {key: value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            for key, value in values.items() if value is not None}  # fmt: skip


def model_info(spec: dict[str, Any], name: ModelName, engines: dict[str, Any]) -> dict[str, Any]:
    """The schema's model block; ``engines``: the provenance's versions of the engines' packages."""
    info: dict[str, Any] = {"name": spec["display_name"], "id": name.id, "developer": name.developer}
    engine = engine_of(spec)
    versions = [engines[package] for package in engine.packages if engines.get(package)]
    if name.self_deployed and not engine.answers_without_model:
        info["inference_engine"] = {"name": name.engine, **({"version": " ".join(versions)} if versions else {})}
    elif name.endpoint:
        info["inference_platform"] = urlparse(name.endpoint).hostname or name.endpoint
    info["additional_details"] = {
        "deployment_type": "self_deployed" if name.self_deployed else "externally_managed",
        "model_availability": "open_weights" if name.open_weights else "unknown",
        **strings({"registry_name": spec["name"], "engine": name.engine, "revision": name.revision,
                   "size_group": spec.get("size_group")}),
    }  # fmt: skip
    return info


def source_data(subtask: str, config: dict[str, Any], manifest: dict[str, Any]) -> dict[str, Any]:
    """Where a subtask's references come from: the release's file at its commit, or the demo set (hand-written
    instances that ship with the project) or the user's own instance file."""
    definition, source = get_subtask(subtask), config["instances"]["source"]
    files = {entry["file"]: entry for entry in manifest.get("files", [])}
    released = files.get(definition.upstream_file)
    if source == "reconstructed" and released and manifest.get("url_template"):
        url = manifest["url_template"].format(repo=manifest["repo"], commit=manifest["commit"],
                                              file=definition.upstream_file)  # fmt: skip
        return {
            "dataset_name": f"H2HTalk {definition.paper_name}",
            "source_type": "url",
            "url": [url],
            "additional_details": strings({"commit": manifest["commit"], "sha256": released["sha256"],
                                           "inputs": "reconstructed from the released references"}),
        }  # fmt: skip
    file = config["instances"]["files"].get(subtask) if source == "file" else None
    return {
        "dataset_name": f"H2HTalk {definition.paper_name} ({source} instances)",
        "source_type": "other",
        "additional_details": strings({"instances": source, "file": file}),
    }


def judge_scoring(config: dict[str, Any], registry: dict[str, Any], versions: dict[str, Any]) -> dict[str, Any]:
    from h2htalk.judge.rubric import system_text

    judge = config["rubric_judge"]
    spec = {"name": judge["model"], **registry[judge["model"]]}
    template = resources.files("h2htalk.resources").joinpath("judge", "itinerary_rubric.j2").read_text("utf-8")
    return {
        "judges": [{"model_info": model_info(spec, model_name(spec), versions), "temperature": judge["temperature"]}],
        "input_prompt": f"{system_text()}\n\n{template}",
        "aggregation_method": "average",
        "additional_details": strings({"samples": judge["samples"], "alpha": judge["alpha"], "tau": judge["tau"],
                                       "gate_on": judge["gate_on"], "scale": "judge 0-5, J on 0-100"}),
    }  # fmt: skip


def result_id(subtask: str, measure: str) -> str:
    return f"{subtask}.{measure}"


def uncertainty(value: dict[str, Any], n: int, bootstrap: dict[str, Any] | None) -> dict[str, Any]:
    if value["ci_low"] is None or value["ci_high"] is None:
        return {"num_samples": n}
    interval = {"lower": value["ci_low"], "upper": value["ci_high"], "method": "percentile bootstrap over items"}
    if bootstrap:
        interval["confidence_level"] = bootstrap["confidence"]
    return {
        "confidence_interval": interval,
        "num_samples": n,
        **({"num_bootstrap_samples": bootstrap["resamples"]} if bootstrap else {}),
    }


def metric_config(measure: str, signature: str | None, scoring: dict[str, Any] | None) -> dict[str, Any]:
    judged = measure == "J"
    config: dict[str, Any] = {
        "evaluation_description": J_DEFINITION if judged else S_DEFINITION,
        "metric_id": f"h2htalk.{measure}",
        "metric_name": "J100" if judged else "S",
        "metric_kind": "llm_judge_mix" if judged else "text_similarity",
        "metric_unit": "points",
        "lower_is_better": False,
        "score_type": "continuous",
        "min_score": 0,
        "max_score": 100,
        "additional_details": strings({"definition": J_DEFINITION if judged else S_DEFINITION,
                                       "signature": signature}),
    }  # fmt: skip
    if judged and scoring:
        config["llm_scoring"] = scoring
    return config


def generation_config(items: list[dict[str, Any]], variant: str, system: set[str]) -> dict[str, Any] | None:
    params = next((item["params"] for item in items if item.get("params")), None)
    details = strings(
        {
            "variant": VARIANT_NAMES.get(variant, variant),
            "system_prompt_sha256": ",".join(sorted(hashlib.sha256(s.encode()).hexdigest() for s in system)),
        }
    )
    if not params:  # a baseline: no model was sampled
        return {"additional_details": details}
    args = {key: params[key] for key in ("temperature", "top_p", "top_k") if key in params}
    if params.get("max_tokens"):
        args["max_tokens"] = int(params["max_tokens"])
    if params.get("seed") is not None:
        details["seed"] = str(params["seed"])
    return {"generation_args": args, "additional_details": details}  # fmt: skip


def evaluation_result(
    summaries: CellSummaries, measure: str, value: dict[str, Any], cell_config: dict[str, Any]
) -> dict[str, Any]:
    n, missing = int(value["n"]), int(value["missing"])
    bootstrap = summaries.shown.get("bootstrap") if measure == "J" else summaries.score.get("bootstrap")
    answers = summaries.shown.get("answers", {})
    details = {"n": n, "expected": n + missing, "missing": missing, **answers}
    if measure == "S":
        details.update({column: parts["value"] for column, parts in components(summaries.score).items()
                        if column in COMPONENTS})  # fmt: skip
    return {
        "evaluation_result_id": result_id(summaries.cell.task, measure),
        "evaluation_name": get_subtask(summaries.cell.task).paper_name,
        "source_data": cell_config["source_data"],
        "evaluation_timestamp": cell_config["timestamp"],
        "metric_config": metric_config(measure, cell_config["signature"], cell_config["llm_scoring"]),
        "score_details": {
            "score": value["value"],
            "details": strings(details),
            "uncertainty": uncertainty({"ci_low": value["value_ci_low"], "ci_high": value["value_ci_high"]}, n,
                                       bootstrap),
        },
        **({"generation_config": cell_config["generation"]} if cell_config["generation"] else {}),
    }  # fmt: skip


def sample_record(
    log: dict[str, Any], subtask: str, measure: str, item: dict[str, Any], prompt: dict[str, str], reference: str
) -> dict[str, Any] | None:
    """One item's record for one result, or None when the item has no score under it."""
    score = item["scores"]["S"] if measure == "S" else (item["judge"] or {}).get("J100")
    if score is None:
        return None
    judge = item["judge"] or {}
    tokens = item["tokens"]
    metadata = {
        "subtask": subtask,
        "variant": log["variant"],
        "embedder": log["embedder"],
        "flags": ",".join(item["flags"]),
        "finish_reason": item["finish_reason"],
        "system_prompt_sha256": hashlib.sha256(prompt["system"].encode("utf-8")).hexdigest(),
        **{column: item["scores"][column] for column in COMPONENTS},
        "S": item["scores"]["S"],
        **({"judge_score": judge.get("score"), "judge_samples": judge.get("samples"),
            "judge_evidence": judge.get("evidence"), "review": judge.get("review"),
            "human_score": judge.get("human")} if judge else {}),
        **NOT_BINARY,
    }  # fmt: skip
    failure = item["failure"]
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": log["evaluation_id"],
        "model_id": log["model_id"],
        "evaluation_name": get_subtask(subtask).paper_name,
        "evaluation_result_id": result_id(subtask, measure),
        "sample_id": item["id"],
        "sample_hash": hashlib.sha256(
            json.dumps({"raw": prompt["user"], "reference": [reference]}, sort_keys=True, separators=(",", ":"),
                       ensure_ascii=False).encode("utf-8")
        ).hexdigest(),
        "interaction_type": "single_turn",
        "input": {"raw": prompt["user"], "reference": [reference]},
        "output": {"raw": [item["answer"]], "reasoning_trace": [item["reasoning"]] if item["reasoning"] else None},
        "answer_attribution": [{
            "turn_idx": 0, "source": "output.raw", "extracted_value": item["answer"],
            "extraction_method": "whole answer" if not item["reasoning"] else "answer after the reasoning",
            "is_terminal": True,
        }],
        "evaluation": {"score": float(score), "is_correct": False, "num_turns": 1},
        "error": f"{failure.get('kind')}: {failure.get('message')}" if failure else None,
        "metadata": strings(metadata),
    }  # fmt: skip
    if isinstance(tokens["prompt"], int) and isinstance(tokens["completion"], int):
        record["token_usage"] = {"input_tokens": tokens["prompt"], "output_tokens": tokens["completion"],
                                 "total_tokens": tokens["prompt"] + tokens["completion"]}  # fmt: skip
    if item["latency_s"]:
        record["performance"] = {"latency_ms": round(1000.0 * item["latency_s"], 3)}
    return record


@dataclass(frozen=True)
class RunRecords:
    """What every log of a run shares: its settings, provenance and time, its prompts and references."""

    config: dict[str, Any]
    results: Layout
    registry: dict[str, Any]
    provenance: dict[str, Any]
    timestamp: str
    prompts: dict[tuple[str, str], dict[str, dict[str, str]]]  # (variant, subtask) -> id -> {system, user}
    references: dict[str, dict[str, str]]  # subtask -> id -> reference
    scoring: dict[str, Any] | None  # the rubric judge, for the J results


def cell_records(run: RunRecords, summaries: CellSummaries, log: dict[str, Any]) -> tuple[list, list]:
    """A cell's aggregate results (S, and J when judged) and its items' records, one per item and result."""
    cell, config = summaries.cell, run.config
    items = answer_items(run.results, cell, summaries.judged is not None)
    prompts = run.prompts[(cell.variant, cell.task)]
    signature = signature_string(summaries.score["signature"]) if "signature" in summaries.score else None
    cell_config = {
        "source_data": source_data(cell.task, config, run.provenance["data_manifest"]),
        "timestamp": run.timestamp,
        "signature": signature,
        "llm_scoring": run.scoring,
        "generation": generation_config(items, cell.variant, {prompts[item["id"]]["system"] for item in items}),
    }
    measures = {"S": shown_value(summaries, "S")}
    if summaries.judged is not None:
        measures["J"] = shown_value(summaries, "J")
    aggregate, samples = [], []
    for measure, value in measures.items():
        if value["value"] is None:  # no item has a score under it: no result, and no record points at one
            continue
        aggregate.append(evaluation_result(summaries, measure, value, cell_config))
        for item in items:
            reference = run.references[cell.task][item["id"]]
            record = sample_record(log, cell.task, measure, item, prompts[item["id"]], reference)
            if record is not None:
                samples.append(record)
    return aggregate, samples


def row_log(run: RunRecords, row: Row, cells: list[CellSummaries]) -> EvaluationLog:
    """One Table 2 row's evaluation log: its cells' results and records, and Overall."""
    from h2htalk.versions import package_version

    spec = {"name": row.model, **run.registry[row.model]}
    name = model_name(spec)
    evaluation_id = f"{COLLECTION}/{name.id}/{row.variant}/{row.embedder}/{run.timestamp}"
    log = {"evaluation_id": evaluation_id, "model_id": name.id, "variant": row.variant, "embedder": row.embedder}
    results, samples = [], []
    for summaries in cells:
        cell_results, cell_samples = cell_records(run, summaries, log)
        results += cell_results
        samples += cell_samples
    tables = run.config["tables"]
    if row.values().get("overall") is not None:
        signature = next((r["metric_config"]["additional_details"].get("signature") for r in results), None)
        results.append(overall_result(row, tables["overall_weights"], tables["judged_cell"], run.timestamp, signature))
    provenance = run.provenance
    aggregate = {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": evaluation_id,
        "evaluation_timestamp": run.timestamp,
        "retrieved_timestamp": run.timestamp,
        "source_metadata": {
            "source_name": "h2htalk",
            "source_type": "evaluation_run",
            "source_organization_name": "h2htalk",
            "evaluator_relationship": "third_party",
            "additional_details": strings({
                "git_revision": provenance["git"]["revision"], "config_sha256": provenance["config_sha256"],
                "variant": row.variant, "embedder": row.embedder, "instances": run.config["instances"]["source"],
            }),
        },
        "eval_library": {"name": "h2htalk", "version": package_version("h2htalk", "unknown") or "unknown"},
        "model_info": model_info(spec, name, provenance.get("engines", {})),
        "evaluation_results": results,
    }  # fmt: skip
    identity = stable_uuid(provenance["config_sha256"], evaluation_id)
    return EvaluationLog(folder_of(name), identity, aggregate, samples)


def evaluation_logs(config: dict[str, Any], results: Layout, registry: dict[str, Any]) -> Iterator[EvaluationLog]:
    """One log per Table 2 row (model, variant, embedder), in Table 2's order."""
    cells = RunCells(config)
    provenance = read_json(results.path("provenance"))
    run = RunRecords(
        config=config,
        results=results,
        registry=registry,
        provenance=provenance,
        timestamp=epoch(provenance["created_at"]),
        prompts={(v, s): read_prompts(results.prompts(v, s)) for v in cells.variants for s in cells.subtasks},
        references={s: read_references(results.references(cells.variants[0], s)) for s in cells.subtasks},
        scoring=judge_scoring(config, registry, provenance.get("engines", {})) if cells.judged_subtasks else None,
    )
    summaries = read_summaries(cells, results)
    tables = config["tables"]
    by_row: dict[tuple[str | None, str, str], list[CellSummaries]] = {}
    for summary in summaries:
        by_row.setdefault((summary.cell.embedder, summary.cell.model, summary.cell.variant), []).append(summary)
    for row in table_rows(summaries, registry, tables["overall_weights"], tables["judged_cell"]):
        yield row_log(run, row, by_row[(row.embedder, row.model, row.variant)])


def overall_result(row: Row, weights: dict[str, float], judged_cell: str, timestamp: str, signature: str | None):
    """Table 2's Overall: the subtask values (judged cells as ``tables.judged_cell`` reads them) weighted by fixed
    weights. It has no CI: Table 2 computes none."""
    return {
        "evaluation_result_id": "overall",
        "evaluation_name": "Overall",
        "source_data": {"dataset_name": "H2HTalk (all subtasks)", "source_type": "other"},
        "evaluation_timestamp": timestamp,
        "metric_config": {
            "evaluation_description": "Mean of the 11 subtask scores weighted by fixed weights (Table 2's Overall)",
            "metric_id": "h2htalk.overall",
            "metric_name": "Overall",
            "metric_kind": "weighted_mean",
            "metric_unit": "points",
            "lower_is_better": False,
            "score_type": "continuous",
            "min_score": 0,
            "max_score": 100,
            "additional_details": strings({"weights": weights, "judged_cell": judged_cell, "signature": signature,
                                           "complete": not row.incomplete("overall")}),
        },
        "score_details": {"score": row.values()["overall"]},
    }  # fmt: skip


def write_every_eval_ever(
    config: dict[str, Any], results: Layout, registry: dict[str, Any], root: str | Path
) -> list[Path]:
    """Write every evaluation log under ``root`` (``data/h2htalk/...``, replacing what an earlier export left
    there); return the files, aggregates and samples."""
    collection = Path(root) / DATA / COLLECTION
    if collection.exists():
        shutil.rmtree(collection)
    written = []
    for log in evaluation_logs(config, results, registry):
        folder = Path(root) / log.folder
        samples = folder / f"{log.uuid}_samples.jsonl"
        aggregate = dict(log.aggregate)
        if log.samples:  # a samples file must hold a record: a row with no score anywhere has none
            write_jsonl_atomic(samples, log.samples)
            aggregate["detailed_evaluation_results"] = {
                "format": "jsonl",
                "file_path": f"{log.folder}/{samples.name}",
                "hash_algorithm": "sha256",
                "checksum": sha256_file(samples),
                "total_rows": len(log.samples),
            }
            written.append(samples)
        write_json_atomic(folder / f"{log.uuid}.json", aggregate)
        written.append(folder / f"{log.uuid}.json")
    return written


@stage(
    "every_eval_ever",
    "every item in the Every Eval Ever schema (aggregate and samples per model, variant and embedder),"
    " checked by every-eval-ever's own validator",
    uses=("judge",),
    reads=(*EXPORT, "instances.files", "rubric_judge.model", "rubric_judge.temperature", "rubric_judge.samples",
           "rubric_judge.alpha", "rubric_judge.tau", "rubric_judge.gate_on"),
    env="export", memory_mb=4000, minutes=60,
    product=Product("export", "Every Eval Ever", "every item in that schema, validated", main="bundle",
                    inner="validation.json"),
    in_all=False,  # made on request: snakemake every_eval_ever
    inputs=ITEM_INPUTS,
    outputs={"bundle": Figure("every_eval_ever", "", directory=True)},
)  # fmt: skip
def write_validated_export(
    per_item: list[str], registry: list[str], bundle: str, config: dict[str, Any], results: Layout
) -> Done:
    """The run's export under ``bundle`` (``write_every_eval_ever``), validated by every-eval-ever's own validator,
    whose report is kept beside it."""
    files = write_every_eval_ever(config, results, load_registry(registry), Path(bundle))
    validation = write_validation(Path(bundle))
    return Done(
        f"{len(files)} files, {validation['records']} records; every-eval-ever {validation['version']} validates "
        "all of them"
    )
