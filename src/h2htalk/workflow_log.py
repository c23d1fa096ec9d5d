"""What the terminal shows of a workflow run (Snakemake's logger plugin ``h2htalk``, set in the profiles).

Each job prints its own progress lines and its one summary line (``h2htalk.progress``); a job submitted to a
cluster writes them to its log, and its summary line is shown from there when it finishes. Snakemake's block per
job (rule, files, reason, resources, the shell command) and its scheduling chatter stay in its full log
(``.snakemake/log/``). The terminal keeps the job count at the start, how far the run is (at most once a
minute), warnings, one line per failed job, and, last, the error each failed job ended with. A dry run and
``--verbose`` show Snakemake's own output.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent

PROGRESS_EVERY_S = 60.0

# Snakemake's event-less lines that say nothing a person acts on (the full log keeps them)
CHATTER = re.compile(
    "|".join((
        r"Assuming unrestricted shared filesystem usage",
        r"Config file \S+ is (extended|replaced) by additional config",
        r"Building DAG of jobs",
        r"Using shell:",
        r"Conda environments: ignored",
        r"Select jobs to execute",
        r"Removing output files of failed job",
        r"Shutting down, this might take some time",
        r"Exiting because a job execution failed",  # the failed jobs' own errors end the output instead
        r"Complete log\(s\):",  # the run's summary says where its log is
        r"Elapsed time:",
    ))
)  # fmt: skip
QUIET_EVENTS = {
    LogEvent.JOB_STARTED, LogEvent.SHELLCMD, LogEvent.RESOURCES_INFO,
    LogEvent.WORKFLOW_STARTED, LogEvent.GROUP_INFO, LogEvent.DEBUG_DAG, LogEvent.RULEGRAPH,
}  # fmt: skip
ALL_FAILED = "At least one job did not complete successfully."
ERROR_LINE = re.compile(r"h2htalk [\w-]+: error: ")
SUMMARY_LINE = re.compile(r"^\S+ \S+ INFO h2htalk\.progress: (.*)$", re.M)  # the job log's format (h2htalk.cli)


def job_summary(log: str | Path) -> str | None:
    """The last progress line of a job's log: its summary line, once it has finished."""
    try:
        found = SUMMARY_LINE.findall(Path(log).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None
    return found[-1] if found else None


def job_error(log: str | Path) -> str | None:
    """The error a job's log ends with: the command's ``h2htalk COMMAND: error: ...`` message, or else the
    log's last line (an exception's own line, after its traceback); None without a readable log."""
    try:
        text = Path(log).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    starts = list(ERROR_LINE.finditer(text))
    if starts:
        return text[starts[-1].start() :].strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else None


@dataclass
class _Job:
    rule: str
    wildcards: dict[str, Any]
    logs: list[str] = field(default_factory=list)
    local: bool = True  # runs where Snakemake runs (every job, with the local executor): its output is here

    def name(self) -> str:
        labels = ", ".join(f"{k}={v}" for k, v in self.wildcards.items())
        return f"{self.rule} ({labels})" if labels else self.rule


class LogHandler(LogHandlerBase):
    """The terminal of a run: see the module's docstring."""

    def __post_init__(self) -> None:
        settings = self.common_settings
        # a dry run lists the jobs, --verbose is for debugging: both show Snakemake's own output
        self.own_output = not (settings.dryrun or settings.verbose or settings.debug_dag)
        self.stream = sys.stdout if settings.stdout else sys.stderr
        self.jobs: dict[int, _Job] = {}
        self.failed: list[_Job] = []
        self._progress_at = time.monotonic()

    @property
    def writes_to_stream(self) -> bool:
        return True

    @property
    def writes_to_file(self) -> bool:
        return False

    @property
    def has_filter(self) -> bool:
        return self.own_output

    @property
    def has_formatter(self) -> bool:
        return self.own_output

    @property
    def needs_rulegraph(self) -> bool:
        return False

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.render(record) if self.own_output else self.format(record)
            if text:
                self.stream.write(text.rstrip("\n") + "\n")
                self.stream.flush()
        except Exception:
            self.handleError(record)

    def render(self, record: logging.LogRecord) -> str | None:
        """The terminal's text for one of Snakemake's records, or None."""
        event = getattr(record, "event", None)
        message = record.getMessage()
        if event == LogEvent.JOB_INFO:
            logs, local = list(record.log or []), bool(record.local)
            self.jobs[record.jobid] = _Job(record.rule_name, dict(record.wildcards or {}), logs, local)
            return None
        if event == LogEvent.JOB_FINISHED:
            return self._finished(self.jobs.get(getattr(record, "job_id", None)))
        if event == LogEvent.RUN_INFO:
            return _job_counts(getattr(record, "stats", None))
        if event == LogEvent.PROGRESS:
            return self._progress(record.done, record.total)
        if event == LogEvent.JOB_ERROR:
            job = self.jobs.get(record.jobid) or _Job(record.rule_name, {})
            job.logs = list(record.log or job.logs)
            self.failed.append(job)
            return f"failed: {job.name()}" + (f"; its log: {job.logs[0]}" if job.logs else "")
        if event in QUIET_EVENTS:
            return None
        if event == LogEvent.ERROR:
            return self._error(record, message)
        if CHATTER.match(message):
            return None
        return message

    def _finished(self, job: _Job | None) -> str | None:
        """A submitted job's summary line, which its own output (in its log) did not show here."""
        return job_summary(job.logs[0]) if job is not None and job.logs and not job.local else None

    def _progress(self, done: int, total: int) -> str | None:
        now = time.monotonic()
        if done >= total or now - self._progress_at < PROGRESS_EVERY_S:
            return None
        self._progress_at = now
        return f"[{time.strftime('%H:%M')}] {done} of {total} jobs done"

    def _error(self, record: logging.LogRecord, message: str) -> str | None:
        if getattr(record, "exception", None) == "RuleException" and "CalledProcessError" in message:
            return None  # a job's command failed: its own error, from its log, ends the output
        if ALL_FAILED in message and self.failed:
            return "\n".join(self._failure(job) for job in self.failed)
        return message.removeprefix("WorkflowError:\n")

    def _failure(self, job: _Job) -> str:
        """One line: the job's error (its start, when it has more lines: they are above, and in its log)."""
        error = job_error(job.logs[0]) if job.logs else None
        if not error:
            return f"{job.name()} failed" + (f"; its log: {job.logs[0]}" if job.logs else "")
        first, *more = error.splitlines()
        if more and first.endswith(":"):  # a list of problems: its first one
            first = f"{first} {more.pop(0).strip().removeprefix('- ')}"
        return first + (f" (and {len(more)} more lines in {job.logs[0]})" if more else "")


def _job_counts(stats: dict[str, int] | None) -> str | None:
    """``71 jobs: fetch 1, curate 11, ...`` from Snakemake's job stats."""
    if not stats:
        return None
    counts = {rule: count for rule, count in stats.items() if rule != "total"}
    return f"{stats.get('total', sum(counts.values()))} jobs: " + ", ".join(f"{r} {n}" for r, n in counts.items())
