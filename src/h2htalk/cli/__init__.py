"""The ``h2htalk`` command: every workflow stage as a sub-command (made from the stage table), usable without
Snakemake, and the commands around them, each made from its ``@command`` declaration: eval, score-upstream, the
review desk, validate-config, ... Errors are one line naming the file, line or key, with exit status 2.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from h2htalk import progress
from h2htalk.cli.options import resolve_instance_set
from h2htalk.errors import H2HTalkError

DESCRIPTION = "Every stage of the H2HTalk workflow as a command, usable without Snakemake, and the commands around it."


def build_parser() -> argparse.ArgumentParser:
    """Every command's parser; a stage or command declared wrong fails it (importing the registry), naming it."""
    from h2htalk.cli import commands, stages

    parser = argparse.ArgumentParser(prog="h2htalk", description=DESCRIPTION)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    parser.add_argument(
        "--log", type=Path, help="write the full log here; the terminal then shows progress, the summary and errors"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for made in (stages, commands):
        made.register(sub)
    return parser


def _stop_on_signal(signum: int, frame: object) -> None:
    """SIGTERM (Snakemake, a timeout, the scheduler) and Ctrl-C (SIGINT) unwind the job: engine servers are
    stopped, and everything already cached stays. Ctrl-C too: asyncio's own handling of it only cancels the
    requests' task, and twice, under load, a job went on to its last answer after it (why that cancellation did
    not hold was not established). An exception raised here leaves the event loop itself."""
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    before = {stop: signal.signal(stop, _stop_on_signal) for stop in (signal.SIGTERM, signal.SIGINT)}
    try:
        return _run(argv)
    finally:  # called in-process (tests, scripts): the caller's own handlers again
        for stop, handler in before.items():
            signal.signal(stop, handler)


def _run(argv: Sequence[str] | None) -> int:
    try:
        parser = build_parser()
    except H2HTalkError as exc:  # a declaration's: one line, as any error (its log is not open yet); -v: its traceback
        if {"-v", "--verbose"} & set(sys.argv[1:] if argv is None else argv):
            raise
        print(f"h2htalk: error: {exc}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    progress.log_to(args.log, args.verbose)
    progress.start_job(getattr(args, "job_name", args.command))  # a stage's job: its stage's name, as its rule's
    try:
        resolve_instance_set(args)
        return args.handler(args)
    except H2HTalkError as exc:
        message = f"h2htalk {args.command}: error: {exc}"
        print(message, file=sys.stderr)
        logging.getLogger("h2htalk").error("%s", message, extra={"terminal": False})
        return 2
    except Exception:
        logging.getLogger("h2htalk").exception("h2htalk %s failed", args.command)
        raise
