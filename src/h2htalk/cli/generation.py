"""Generation stage commands: provision-model, generate."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

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

GENERATE_READS = (*REGISTRY_READS, "generation", "studies.max_new_tokens", "subtasks", "variants")


def register(sub: Any) -> None:
    p = add_command(
        sub, "provision-model", cmd_provision_model, "assemble or download a GGUF model file and check its SHA-256",
        reads=(*REGISTRY_READS,),
    )  # fmt: skip
    add_results(p)
    p.add_argument("--model", required=True, help="registry name")

    p = add_command(
        sub, "generate", cmd_generate, "answer every cell of one model (its engine started once)", GENERATE_READS
    )
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
    from h2htalk.generation.generate import PromptFile, generate_model
    from h2htalk.llm.engines import engine_of
    from h2htalk.settings import GenerationSettings

    config = load_config(args)
    results = args.results
    spec = registry_entry(config, args.model, results)
    baseline = engine_of(spec).answers_without_model
    cells = RunCells(config).generation(args.model, studies=not baseline)
    files = [
        PromptFile(c.variant, c.task, Path(results.prompts(c.variant, c.task)), Path(results.generations(c)))
        for c in cells
    ]
    instances = {cell.task: Path(results.references(cell.variant, cell.task)) for cell in cells if not cell.is_study}
    engines = engine_options(args, config, [args.model])
    run_file = results.path("generation_run", model=args.model)
    settings = GenerationSettings.from_config(config)
    run = generate_model(spec, files, settings, engines, instances=instances, summary_path=run_file)
    summary(answered(run), subject=args.model, out=f"{len(files)} files")
    return 0
