"""Generation stage commands: provision-model, generate, generate-studies."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from h2htalk.cli.options import (
    REGISTRY_READS,
    add_command,
    add_engine,
    add_results,
    engine_options,
    load_config,
    registry_entry,
)
from h2htalk.progress import answered, summary

if TYPE_CHECKING:
    from h2htalk.llm.calls import EngineOptions

GENERATE_READS = (*REGISTRY_READS, "generation", "subtasks", "variants")
# the studies' answers: every generation key but the subtasks' token limits, the studies' limit and models
STUDY_GENERATE_READS = (
    *REGISTRY_READS, *(f"generation.{key}" for key in (
        "concurrency", "timeout_s", "retries", "backoff_base_s", "backoff_max_s", "max_failure_rate", "retry_failed",
        "rate_limits", "batch_poll_s", "decoding", "cache_dir",
    )), "studies.max_new_tokens", "studies.models", "models", "variants",
)  # fmt: skip


def register(sub: Any) -> None:
    p = add_command(
        sub, "provision-model", cmd_provision_model, "assemble or download a GGUF model file and check its SHA-256",
        reads=(*REGISTRY_READS,),
    )  # fmt: skip
    add_results(p)
    p.add_argument("--model", required=True, help="registry name")

    p = add_command(
        sub, "generate", cmd_generate, "answer every Table 2 cell of one model (its engine started once)",
        GENERATE_READS,
    )  # fmt: skip
    add_results(p)
    add_engine(p)
    p.add_argument("--model", required=True, help="registry name")

    p = add_command(
        sub, "generate-studies", cmd_generate_studies,
        "answer the two studies' conversations with one model (its engine started once)", STUDY_GENERATE_READS,
    )  # fmt: skip
    add_results(p)
    add_engine(p)
    p.add_argument("--model", required=True, help="registry name")


def cmd_provision_model(args: argparse.Namespace) -> int:
    from h2htalk.errors import H2HTalkError
    from h2htalk.generation.provision import provision_gguf
    from h2htalk.llm.engines import engine_of

    spec = registry_entry(load_config(args), args.model)
    if not engine_of(spec).needs_model_file:
        raise H2HTalkError(f"model {args.model!r}: engine {spec['engine']} needs no model file")
    out = args.results.path("model_file", model=args.model)
    record = provision_gguf(spec["gguf"], out)
    summary(f"{record['size']} bytes, sha256 {record['sha256'][:12]}", subject=args.model, out=out)
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from h2htalk.cells import RunCells

    config = load_config(args)
    cells = RunCells(config).benchmark(args.model)
    instances = {cell.task: Path(args.results.references(cell.variant, cell.task)) for cell in cells}
    engines = engine_options(args, config, [args.model])
    run = _generate(args, config, cells, engines, instances, "generation_run", for_studies=False)
    summary(answered(run), subject=args.model, out=f"{len(cells)} files")
    return 0


def cmd_generate_studies(args: argparse.Namespace) -> int:
    config = load_config(args)
    run = answer_studies(args, config, engine_options(args, config, [args.model]))
    summary(answered(run), subject=args.model, out=f"{run['files']} files")
    return 0


def answer_studies(args: argparse.Namespace, config: dict[str, Any], engines: EngineOptions) -> dict[str, Any]:
    """Answer both studies' conversations with the model of ``args`` (a study model, not a baseline); its run
    summary, with the number of generation files written (``files``)."""
    from h2htalk.cells import RunCells
    from h2htalk.errors import H2HTalkError
    from h2htalk.llm.engines import engine_of

    study_models = RunCells(config).study_models
    if args.model not in study_models:
        raise H2HTalkError(f"model {args.model!r} answers no study (studies.models: {', '.join(study_models)})")
    if engine_of(registry_entry(config, args.model)).answers_without_model:
        raise H2HTalkError(f"model {args.model!r} is a baseline: baselines answer no study")
    cells = RunCells(config).studies(args.model)
    run = _generate(args, config, cells, engines, {}, "study_generation_run", for_studies=True)
    return {**run, "files": len(cells)}


def _generate(
    args: argparse.Namespace,
    config: dict[str, Any],
    cells: list[Any],
    engines: EngineOptions,
    instances: dict[str, Path],
    run_kind: str,
    for_studies: bool,
) -> dict[str, Any]:
    """Answer ``cells`` with the model of ``args`` (its engine started once); the job's run summary, also written
    as ``run_kind``."""
    from h2htalk.generation.generate import PromptFile, generate_model
    from h2htalk.settings import GenerationSettings

    results = args.results
    spec = registry_entry(config, args.model, results)
    files = [
        PromptFile(c.variant, c.task, Path(results.prompts(c.variant, c.task)), Path(results.generations(c)))
        for c in cells
    ]
    run_file = results.path(run_kind, model=args.model)
    settings = GenerationSettings.from_config(config, for_studies=for_studies)
    return generate_model(spec, files, settings, engines, instances=instances, summary_path=run_file)
