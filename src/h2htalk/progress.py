"""Progress a person can follow: ``done/total, rate, ETA`` lines for long work, and one summary line a job.

Lines go to the ``h2htalk.progress`` logger. The command line shows that logger on the terminal (where the
person running Snakemake sees it) while the full log goes to the job's log file.
"""

from __future__ import annotations

import logging
import time

from h2htalk.llm.engines import ENGINES

log = logging.getLogger("h2htalk.progress")

EVERY_S = 15.0  # at most one line this often, besides the first and the last


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

    def __init__(self, label: str, total: int, unit: str = "requests") -> None:
        self.label, self.total, self.unit = label, total, unit
        self.done = 0
        self.started = time.monotonic()
        self._reported = 0.0

    def advance(self, count: int = 1) -> None:
        self.done += count
        now = time.monotonic()
        if self.done == count or self.done >= self.total or now - self._reported >= EVERY_S:
            self._reported = now
            log.info("%s: %s", self.label, self.status(now))

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


_job_started = time.monotonic()


def start_job() -> None:
    global _job_started
    _job_started = time.monotonic()


def summary(line: str) -> None:
    """The one line a job ends with, with the job's time (terminal and log)."""
    log.info("%s in %s", line, duration(time.monotonic() - _job_started))


def answered(what: str, run: dict, noun: str = "answers") -> str:
    """``qwen: 66 answers (12 cached, 0 failed)``, from a run summary of the model-call seam."""
    if ENGINES[run["engine"]].answers_without_model:
        return f"{what}: {run['requests']} {noun} (a baseline: no model)"
    cached = run["requests"] - run["sent"]
    return f"{what}: {run['requests']} {noun} ({cached} cached, {run.get('failed', 0)} failed)"
