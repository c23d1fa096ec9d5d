"""The ``h2htalk`` command: every workflow stage as sub-commands, usable without Snakemake.

Each stage's module registers its sub-commands next to their handlers. A handler parses its arguments,
builds settings from the configuration (``--config``; defaults from the schema), calls one function of its
stage, and prints one line. Errors are one line naming the file, line or key, with exit status 2.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence

from h2htalk.cli import data, figures, generation, instances, judge, prompts, scoring, studies, tables
from h2htalk.errors import H2HTalkError

STAGES = (data, instances, prompts, generation, scoring, judge, tables, figures, studies)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="h2htalk", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress at debug level")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for stage in STAGES:
        stage.register(sub)
    return parser


def _stop_on_signal(signum: int, frame: object) -> None:
    """SIGTERM (Snakemake, a timeout, the scheduler) unwinds the job like Ctrl-C does: engine servers are
    stopped, and everything already cached stays."""
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _stop_on_signal)
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return args.handler(args)
    except H2HTalkError as exc:
        print(f"h2htalk {args.command}: error: {exc}", file=sys.stderr)
        return 2
