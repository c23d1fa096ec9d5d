"""Option groups shared by several sub-commands, defined once: config, engine, bootstrap, provenance.

Settings come from the configuration only. A command reads ``--config`` files (later ones overlay earlier
ones, as Snakemake's ``--configfiles``) and ``--config-json`` overlays (what the workflow's rules pass), and
validates the result against the schema, which fills in every default. A flag that sets a value, such as
``--concurrency`` or ``--resamples``, is an override of one config key: it is applied before validation,
so the schema checks it and settings still come from one place.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from h2htalk.config import deep_update, load_registry, merge_layers, runnable_problem, validate_config
from h2htalk.errors import ConfigError, H2HTalkError
from h2htalk.prefetch import pinned_embedder, pinned_model, read_records
from h2htalk.settings import ClientSettings, GenerationSettings

if TYPE_CHECKING:  # the model-call stack (openai, httpx) is imported only by the commands that call models
    from h2htalk.llm.calls import EngineOptions

OVERRIDES = "_config_overrides"  # argparse default: {dest: dotted config key} of a command's override flags


def overrides(parser: argparse.ArgumentParser, **keys: str) -> None:
    """Declare flags of ``parser`` (by dest) that override config keys (dotted paths)."""
    known = dict(parser.get_default(OVERRIDES) or {})
    known.update(keys)
    parser.set_defaults(**{OVERRIDES: known})


def add_config(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("configuration (defaults: workflow/schemas/config.schema.yaml)")
    group.add_argument(
        "--config", action="append", default=[], metavar="FILE",
        help="config file; repeatable, later files overlay earlier ones (e.g. config/config.yaml config/local.yaml)",
    )  # fmt: skip
    group.add_argument(
        "--config-json", action="append", default=[], metavar="JSON", help="a config overlay as JSON (repeatable)"
    )
    group.add_argument(
        "--prefetched", action="append", default=[], metavar="FILE",
        help="a prefetch record (h2htalk prefetch): work offline, on the commit it names (repeatable)",
    )  # fmt: skip


def load_config(args: argparse.Namespace) -> dict[str, Any]:
    """The validated configuration of this command: files, JSON overlays, then override flags."""
    layers = []
    for text in args.config_json:
        try:
            layers.append(json.loads(text))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--config-json is not valid JSON: {exc.msg}") from None
    flagged: dict[str, Any] = {}
    for dest, key in (getattr(args, OVERRIDES, None) or {}).items():
        value = getattr(args, dest, None)
        if value is not None:
            node = flagged
            *parents, leaf = key.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
    raw = merge_layers(args.config, layers)
    deep_update(raw, flagged)
    config = validate_config(raw)
    for (kind, name), record in prefetched(args).items():
        if kind == "embedders" and name in config["embedders"]:
            config["embedders"][name] = pinned_embedder(config["embedders"][name], record)
    return config


def prefetched(args: argparse.Namespace) -> dict[tuple[str, str], dict[str, Any]]:
    """The command's prefetch records by (kind, name); having any puts the command offline."""
    return read_records(getattr(args, "prefetched", []))


def registry_entry(config: dict[str, Any], name: str, args: argparse.Namespace | None = None) -> dict[str, Any]:
    """A runnable registry entry (at its prefetched commit when ``args`` has a record for it), or an error
    naming the model and what is missing."""
    registry = load_registry(config["model_registry"])
    if name not in registry:
        raise H2HTalkError(f"model {name!r} is not in the registry {config['model_registry']}")
    spec = registry[name]
    if problem := runnable_problem(spec):
        raise H2HTalkError(problem)
    return pinned_model(spec, prefetched(args).get(("models", name))) if args else spec


def add_engine(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("engine")
    group.add_argument(
        "--model-file", action="append", default=[], metavar="[NAME=]PATH",
        help="GGUF file of a llamacpp model (NAME= when the command uses several models)",
    )  # fmt: skip
    group.add_argument("--server-log", type=Path, help="append the output of every engine server started here")
    group.add_argument("--base-url", help="use this running OpenAI-compatible server instead of starting the engine")
    group.add_argument("--served-model", help="model name to send with --base-url (default: the registry name)")
    group.add_argument("--concurrency", type=int, help="requests in flight (overrides generation.concurrency)")
    group.add_argument(
        "--retry-failed", action="store_true",
        help="send again the items the endpoint refused before (refusals are cached, so a rerun does not resend them)",
    )  # fmt: skip
    overrides(parser, concurrency="generation.concurrency")


def engine_options(args: argparse.Namespace, config: dict[str, Any], models: list[str]) -> EngineOptions:
    """How this command reaches ``models`` (registry names): model files, server log, or a running server."""
    from h2htalk.llm.calls import EngineOptions
    from h2htalk.llm.engines import Endpoint

    files: dict[str, str] = {}
    for item in args.model_file:
        name, sep, path = item.rpartition("=")
        if not sep:
            if len(models) != 1:
                raise H2HTalkError(f"--model-file {item}: say which model it is for (NAME=PATH)")
            name = models[0]
        files[name] = path
    endpoint = None
    if args.base_url:
        if len(models) != 1:
            raise H2HTalkError("--base-url needs a command that uses one model")
        endpoint = Endpoint(args.base_url, args.served_model or models[0])
    return EngineOptions(
        client=ClientSettings.from_config(config),
        seed=GenerationSettings.from_config(config).seed,
        model_files=files,
        server_log=args.server_log,
        endpoint=endpoint,
        retry_failed=args.retry_failed,
    )


def add_bootstrap(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("bootstrap (overrides scoring.bootstrap)")
    group.add_argument("--resamples", type=int, help="bootstrap resamples")
    group.add_argument("--bootstrap-seed", type=int, help="bootstrap seed")
    group.add_argument("--confidence", type=float, help="confidence level of the intervals")
    overrides(
        parser,
        resamples="scoring.bootstrap.resamples",
        bootstrap_seed="scoring.bootstrap.seed",
        confidence="scoring.bootstrap.confidence",
    )


def add_provenance(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--provenance", type=Path, help="results/provenance.json: referenced, with input checksums, in OUT.meta.json"
    )


def write_meta(args: argparse.Namespace, out_prefix: str | Path, inputs: list[str | Path]) -> None:
    """Point a table or figure at the run's provenance, with its inputs' checksums."""
    if args.provenance:
        from h2htalk.provenance import write_table_meta

        write_table_meta(out_prefix, args.provenance, inputs)


def same_length(args: argparse.Namespace, *names: str) -> None:
    """File lists that are zipped must be equally long."""
    lengths = {name: len(getattr(args, name) or []) for name in names}
    if len(set(lengths.values())) > 1:
        listed = ", ".join(f"--{n.replace('_', '-')} {k}" for n, k in lengths.items())
        raise H2HTalkError(f"these file lists go together and must be equally long: {listed}")
