"""Generation stage commands: provision-model, generate."""

from __future__ import annotations

import argparse
from itertools import islice
from pathlib import Path
from typing import Any

from h2htalk.cli.options import add_config, add_engine, engine_options, load_config, registry_entry, same_length
from h2htalk.progress import answered, summary


def register(sub: Any) -> None:
    p = sub.add_parser("provision-model", help="assemble or download a GGUF model file and check its SHA-256")
    add_config(p)
    p.add_argument("--model", required=True, help="registry name")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(handler=cmd_provision_model)

    p = sub.add_parser("generate", help="generate one model's answers to prompt files (engine started once)")
    add_config(p)
    add_engine(p)
    p.add_argument("--model", required=True, help="registry name")
    p.add_argument("--prompts", type=Path, nargs="+", required=True, help="prompt files (the prompts stage's)")
    p.add_argument("--out", type=Path, nargs="+", required=True, help="one generation file per prompt file")
    p.add_argument("--instances", type=Path, nargs="*", default=[], help="instance files (read by baselines)")
    p.add_argument("--summary", type=Path, help="write a run summary (JSON) here")
    p.set_defaults(handler=cmd_generate)


def cmd_provision_model(args: argparse.Namespace) -> int:
    from h2htalk.errors import H2HTalkError
    from h2htalk.generation.provision import provision_gguf

    spec = registry_entry(load_config(args), args.model)
    if "gguf" not in spec:
        raise H2HTalkError(f"model {args.model!r} has no gguf entry (engine {spec['engine']})")
    record = provision_gguf(spec["gguf"], args.out)
    summary(f"{args.model}: {record['size']} bytes, sha256 {record['sha256']} -> {args.out}")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from h2htalk.generation.generate import PromptFile, generate_model
    from h2htalk.io import iter_jsonl
    from h2htalk.settings import GenerationSettings

    same_length(args, "prompts", "out")
    config = load_config(args)
    spec = registry_entry(config, args.model, args)
    settings = GenerationSettings.from_config(config)
    files = [PromptFile.read(prompts, out) for prompts, out in zip(args.prompts, args.out, strict=True)]
    # subtask -> instance file, by the first record (an empty file is an empty subtask: nothing to answer)
    instances = {record["subtask"]: path for path in args.instances for _, record in islice(iter_jsonl(path), 1)}
    engines = engine_options(args, config, [args.model])
    run = generate_model(spec, files, settings, engines, instances=instances, summary_path=args.summary)
    summary(answered(f"generate {args.model}", run) + f" -> {len(files)} files")
    return 0
