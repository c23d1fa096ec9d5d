"""What several sub-commands share, defined once: registering a command, its configuration, the results tree,
the engine options and the bootstrap overrides.

Settings come from the configuration only. A command reads ``--config`` files (later ones overlay earlier ones,
as Snakemake's ``--configfiles``) and validates them, which fills in every default; a workflow job reads the run's
resolved ``results/config.json``, which the Snakefile validated before any job, as it is (``config.read_validated``).
A command declares the config sections it reads (``reads``): it gets only those, and the workflow reruns its jobs
when one of them changes. A flag that sets a value, such as
``--concurrency``, overrides one config key before validation, so the schema checks it too.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from h2htalk.config import (
    check_environment,
    deep_update,
    load_registry,
    merge_layers,
    read_validated,
    registry_files,
    registry_name,
    runnable_problem,
    settings_view,
    validate_config,
)
from h2htalk.errors import H2HTalkError
from h2htalk.layout import Layout
from h2htalk.llm.engines import engine_of
from h2htalk.prefetch import embedder_downloads, pinned_embedder, pinned_model, read_records
from h2htalk.settings import ClientSettings

if TYPE_CHECKING:  # the model-call stack (openai, httpx) is imported only by the commands that call models
    from h2htalk.llm.calls import EngineOptions

OVERRIDES = "_config_overrides"  # argparse default: {dest: dotted config key} of a command's override flags
Handler = Callable[[argparse.Namespace], int]


def add_command(
    sub: Any, name: str, handler: Handler, help: str, reads: Sequence[str] = (), config: bool = False
) -> argparse.ArgumentParser:
    """A sub-command; ``reads``: the config sections its settings come from; it gets ``--config`` when it reads any,
    or when its files depend on the configuration (``config``: every stage's do)."""
    parser = sub.add_parser(name, help=help, description=help)
    parser.set_defaults(handler=handler, reads=tuple(reads))
    if reads or config:
        parser.add_argument(
            "--config", action="append", default=[], metavar="FILE",
            help="config file; repeatable, later files overlay earlier ones (default: the schema's defaults)",
        )  # fmt: skip
    return parser


def add_results(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--results", type=Layout, default=Layout(), metavar="DIR", help="the results tree (default: results)"
    )
    parser.add_argument(
        "--instance-set", metavar="NAME",
        help="the instance set of the run (demo, reconstructed, file-…): its results are under DIR/sets/NAME/ and"
        " its tables under paper_figures/NAME/, beside other sets' (the workflow passes it; default: the one set"
        " under DIR/sets/, or none: DIR/ and paper_figures/)",
    )  # fmt: skip
    parser.add_argument("--figures", metavar="DIR", help="the tables folder (default: paper_figures/[SET/])")


def _only_set(results: Layout) -> str | None:
    sets = Path(str(results.root), "sets")
    found = sorted(p.name for p in sets.iterdir() if p.is_dir()) if sets.is_dir() else []
    if len(found) > 1:
        raise H2HTalkError(f"{sets} holds the results of {len(found)} instance sets ({', '.join(found)}): name one "
                           "with --instance-set")  # fmt: skip
    return found[0] if found else None


def resolve_instance_set(args: argparse.Namespace) -> None:
    """Put ``--results`` in the instance set ``--instance-set`` names (by default the one set the tree holds), with
    its tables in ``--figures`` where given."""
    results = getattr(args, "results", None)
    if isinstance(results, Layout):
        args.results = results.for_set(args.instance_set or _only_set(results)).with_figures(args.figures)


def overrides(parser: argparse.ArgumentParser, **keys: str) -> None:
    """Declare flags of ``parser`` (by dest) that override config keys (dotted paths)."""
    known = dict(parser.get_default(OVERRIDES) or {})
    known.update(keys)
    parser.set_defaults(**{OVERRIDES: known})


def load_config(args: argparse.Namespace) -> dict[str, Any]:
    """The sections this command reads, from its validated configuration: files, then override flags."""
    return settings_view(full_config(args), args.reads)


def full_config(args: argparse.Namespace) -> dict[str, Any]:
    """The command's validated configuration: its ``--config`` files, then its override flags; a workflow job's, as
    the workflow validated it."""
    flagged: dict[str, Any] = {}
    for dest, key in (getattr(args, OVERRIDES, None) or {}).items():
        value = getattr(args, dest, None)
        if value is not None:
            node = flagged
            *parents, leaf = key.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
    files = getattr(args, "config", [])
    if not flagged and len(files) == 1 and (validated := read_validated(files[0])) is not None:
        return validated  # a workflow job: the Snakefile validated the run's configuration before any job
    raw = merge_layers(files)
    deep_update(raw, flagged)
    return validate_config(raw)


def registry_entry(config: dict[str, Any], name: str, results: Layout | None = None) -> dict[str, Any]:
    """A runnable registry entry, or an error naming the model and what is missing; with ``results``, at the
    commit its prefetch record (in the results tree) names, and this process then works offline."""
    registry = load_registry(registry_files(config))
    if name not in registry:
        raise H2HTalkError(f"model {name!r} is not in the registry {registry_name(config)}")
    spec = registry[name]
    if problem := runnable_problem(spec):
        raise H2HTalkError(problem)
    if results is None or not engine_of(spec).downloads(spec):
        return spec
    record = read_records([results.path("prefetched_model", model=name)])
    return pinned_model(spec, record[("models", name)])


def embedder_settings(config: dict[str, Any], name: str, results: Layout | None = None) -> dict[str, Any]:
    """An embedder definition; with ``results``, at the commit its prefetch record names (then offline)."""
    if name not in config["embedders"]:
        defined = ", ".join(config["embedders"])
        raise H2HTalkError(f"embedder {name!r} is not defined under 'embedders' (defined: {defined})")
    settings = config["embedders"][name]
    if results is None or not embedder_downloads(settings):
        return settings
    record = read_records([results.path("prefetched_embedder", embedder=name)])
    return pinned_embedder(settings, record[("embedders", name)])


def add_engine(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("engine")
    group.add_argument("--server-log", type=Path, help="append the output of every engine server started here")
    group.add_argument("--base-url", help="use this running OpenAI-compatible server instead of starting the engine")
    group.add_argument("--served-model", help="model name to send with --base-url (default: the registry name)")
    group.add_argument("--concurrency", type=int, help="requests in flight (overrides generation.concurrency)")
    group.add_argument(
        "--retry-failed", action="store_const", const=True,
        help="send again the cached content refusals (overrides generation.retry_failed)",
    )  # fmt: skip
    overrides(parser, concurrency="generation.concurrency", retry_failed="generation.retry_failed")


def engine_options(args: argparse.Namespace, config: dict[str, Any], models: list[str]) -> EngineOptions:
    """How this command reaches ``models`` (registry names): their model files in the results tree (engines that
    need one), the server log, or a running server. Fails, before anything starts, when the environment lacks what
    the models need (an API key)."""
    from h2htalk.llm.calls import EngineOptions
    from h2htalk.llm.engines import Endpoint

    registry = load_registry(registry_files(config))
    files = {m: args.results.path("model_file", model=m) for m in models if engine_of(registry[m]).needs_model_file}
    endpoint = None
    if getattr(args, "base_url", None):
        if len(models) != 1 and not getattr(args, "served_model", None):
            raise H2HTalkError(f"--base-url serves every model of this job ({', '.join(models)}): name the one model "
                               "its requests carry with --served-model")  # fmt: skip
        endpoint = Endpoint(getattr(args, "base_url", None), getattr(args, "served_model", None) or models[0])
    else:
        check_environment(config, models)
    return EngineOptions(
        client=ClientSettings.from_config(config),
        seed=config["generation"]["decoding"]["seed"],
        model_files=files,
        server_log=getattr(args, "server_log", None),
        endpoint=endpoint,
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
