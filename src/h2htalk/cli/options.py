"""What several sub-commands share, defined once: registering a command, its configuration, the results tree,
and the option groups a declaration names (``OPTIONS``: the engine options, the bootstrap overrides, ...).

Settings come from the configuration only (``config.command_config``): a flag that sets a value, such as
``--concurrency``, overrides one config key before validation, so the schema checks it too.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from h2htalk.commands import CommandError, OptionGroup
from h2htalk.config import command_config, settings_view
from h2htalk.layout import Layout

OVERRIDES = "_config_overrides"  # argparse default: {dest: dotted config key} of a command's override flags
Handler = Callable[[argparse.Namespace], int]


def add_command(
    sub: Any, name: str, handler: Handler, help: str, reads: Sequence[str] = (), config: bool = False
) -> argparse.ArgumentParser:
    """A sub-command; ``reads``: the config sections its settings come from; it gets ``--config`` when it reads any,
    or when its files depend on the configuration (``config``: every stage's do)."""
    try:
        parser = sub.add_parser(name, help=help, description=help)
    except argparse.ArgumentError:  # a stage and a command of one name, or two commands: the first one named
        first = sub.choices[name].get_default("handler").args[0].run  # its Stage's or Command's (a partial's)
        raise CommandError(f"command {name}: declared twice: at {first.__module__}.{first.__qualname__} too") from None
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


def resolve_instance_set(args: argparse.Namespace) -> None:
    """Put ``--results`` in the instance set ``--instance-set`` names (by default the one set the tree holds), with
    its tables in ``--figures`` where given."""
    if isinstance(getattr(args, "results", None), Layout):
        args.results = args.results.the_set(args.instance_set, args.figures)


def add_flag(parser: argparse.ArgumentParser | Any, flag: str, help: str, key: str = "", **more: Any) -> None:
    """Option ``flag`` of ``parser`` (or of its group); with ``key``, it overrides that config key, and says so."""
    action = parser.add_argument(flag, help=f"{help} (overrides {key})" if key else help, **more)
    if key:
        parser.set_defaults(**{OVERRIDES: {**(parser.get_default(OVERRIDES) or {}), action.dest: key}})


def load_config(args: argparse.Namespace) -> dict[str, Any]:
    """The sections this command reads, from its validated configuration: files, then override flags."""
    return settings_view(full_config(args), args.reads, f"command {getattr(args, 'command', '?')}")


def full_config(args: argparse.Namespace) -> dict[str, Any]:
    """The command's validated configuration: its ``--config`` files, then its override flags; a workflow job's, as
    the workflow validated it."""
    flags = getattr(args, OVERRIDES, None) or {}
    return command_config(getattr(args, "config", []), {key: getattr(args, dest, None) for dest, key in flags.items()})


def add_engine(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("engine")
    group.add_argument("--server-log", type=Path, help="append the output of every engine server started here")
    group.add_argument("--base-url", help="use this running OpenAI-compatible server instead of starting the engine")
    group.add_argument("--served-model", help="model name to send with --base-url (default: the registry name)")
    add_flag(group, "--concurrency", "requests in flight", "generation.concurrency", type=int)
    add_flag(group, "--retry-failed", "send again the cached content refusals", "generation.retry_failed",
             action="store_const", const=True)  # fmt: skip


def add_bootstrap(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("bootstrap")
    add_flag(group, "--resamples", "bootstrap resamples", "scoring.bootstrap.resamples", type=int)
    add_flag(group, "--bootstrap-seed", "bootstrap seed", "scoring.bootstrap.seed", type=int)
    add_flag(group, "--confidence", "confidence level of the intervals", "scoring.bootstrap.confidence", type=float)


def add_scoring(parser: argparse.ArgumentParser) -> None:
    add_bootstrap(parser)
    add_flag(parser, "--tokenizer", "lexical tokens", "scoring.tokenizer", choices=["jieba", "char"])
    add_flag(parser, "--cache-dir", "the embedding cache's folder", "scoring.cache_dir")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the embedding cache")


OPTIONS: dict[OptionGroup, Callable[[argparse.ArgumentParser], Any]] = {  # each option group's flags
    "engine": add_engine,
    "rubric_judge": lambda parser: add_flag(parser, "--judge", "the judge model", "rubric_judge.model"),
    "study_judge": lambda parser: add_flag(parser, "--judge", "the judge model", "study_judge.model"),
    "bootstrap": add_bootstrap,
    "scoring": add_scoring,
    "font": lambda parser: add_flag(parser, "--font", "a font file with Chinese glyphs, or auto", "figures.cjk_font"),
    "root": lambda parser: add_flag(
        parser, "--root", "the checkout, for its git revision (default: the one this package runs from)"
    ),
    "upstream": lambda parser: add_flag(
        parser, "--upstream-dir", "copy from this folder instead of downloading", "upstream_dir"
    ),
}
