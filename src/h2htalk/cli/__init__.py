"""The ``h2htalk`` command: every workflow stage as a sub-command (made from the stage table), usable without
Snakemake, and the commands around them: eval, score-upstream, the review desk, validate-config.

A stage's command reads the settings its stage declares (``--config``; defaults from the schema), resolves its
files from the table, calls the stage's function and prints one line. Errors are one line naming the file, line
or key, with exit status 2.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from h2htalk import progress
from h2htalk.cli import evaluate, review, stages, tools
from h2htalk.cli.options import resolve_instance_set
from h2htalk.errors import H2HTalkError

COMMANDS = (stages, tools, review, evaluate)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="h2htalk", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    parser.add_argument(
        "--log", type=Path, help="write the full log here; the terminal then shows progress, the summary and errors"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for commands in COMMANDS:
        commands.register(sub)
    return parser


def _stop_on_signal(signum: int, frame: object) -> None:
    """SIGTERM (Snakemake, a timeout, the scheduler) and Ctrl-C (SIGINT) unwind the job: engine servers are
    stopped, and everything already cached stays. Ctrl-C too: asyncio's own handling of it only cancels the
    requests' task, and twice, under load, a job went on to its last answer after it (why that cancellation did
    not hold was not established). An exception raised here leaves the event loop itself."""
    raise SystemExit(128 + signum)


def _configure_logging(verbose: bool, log_file: Path | None) -> None:
    """Everything to the log file when there is one, and to the terminal only progress lines, the job's
    summary, warnings and errors; without a log file, everything to the terminal."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "h2htalk", False)]:  # main() run again in-process
        root.removeHandler(handler)
        handler.close()
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    detailed = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    terminal = logging.StreamHandler(sys.stderr)
    terminal.setFormatter(detailed)
    terminal.addFilter(lambda r: getattr(r, "terminal", True))
    handlers: list[logging.Handler] = [terminal]
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_file, mode="w", encoding="utf-8"))
        handlers[-1].setFormatter(detailed)
        terminal.setFormatter(logging.Formatter("%(message)s"))
        terminal.addFilter(lambda r: r.name == progress.log.name or r.levelno >= logging.WARNING)
    for handler in handlers:
        handler.h2htalk = True  # type: ignore[attr-defined]
        root.addHandler(handler)


def main(argv: Sequence[str] | None = None) -> int:
    stops = (signal.SIGTERM, signal.SIGINT)
    before = {stop: signal.signal(stop, _stop_on_signal) for stop in stops}
    try:
        return _run(argv)
    finally:  # called in-process (tests, scripts): the caller's own handlers again
        for stop, handler in before.items():
            signal.signal(stop, handler)


def _run(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    _configure_logging(args.verbose, args.log)
    progress.start_job(args.command)
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
