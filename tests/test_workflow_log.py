"""The terminal of a workflow run (the logger plugin ``h2htalk``) and the lines a run ends with."""

from __future__ import annotations

import csv
import io
import logging
import re
import time
from types import SimpleNamespace

from snakemake_interface_logger_plugins.common import LogEvent

from h2htalk.config import default_config
from h2htalk.run_summary import judge_card, roles_under_test, run_summary, table2_gaps
from h2htalk.workflow_log import LogHandler, job_error, job_summary

SNAKEMAKE = SimpleNamespace(dryrun=False, verbose=False, debug_dag=False, stdout=False, printshellcmds=True)


def terminal(**settings) -> tuple[LogHandler, io.StringIO]:
    handler = LogHandler(SimpleNamespace(**{**vars(SNAKEMAKE), **settings}), None)
    handler.stream = io.StringIO()
    return handler, handler.stream


def record(message: str | None = None, level: int = logging.INFO, **extra) -> logging.LogRecord:
    entry = logging.LogRecord("snakemake.logging", level, __file__, 1, message, None, None)
    entry.__dict__.update(extra)
    return entry


def job_info(jobid: int, rule: str, log: str, local: bool = True, **wildcards) -> logging.LogRecord:
    return record(f" Rule: {rule}, Jobid: {jobid}", event=LogEvent.JOB_INFO, jobid=jobid, rule_name=rule,
                  wildcards=wildcards, log=[log], local=local)  # fmt: skip


def test_jobs_leave_only_their_own_lines_and_warnings(tmp_path):
    handler, out = terminal()
    for entry in (
        record("Assuming unrestricted shared filesystem usage."),
        record("Building DAG of jobs..."),
        record("Job stats: ...", event=LogEvent.RUN_INFO, stats={"fetch": 1, "curate": 11, "total": 12}),
        record("Select jobs to execute..."),
        record("Execute 2 jobs...", event=LogEvent.JOB_STARTED, jobs=[1, 2]),
        job_info(1, "curate", str(tmp_path / "curate.log"), subtask="dialogue_base"),
        record("python -m h2htalk --log ... curate ...", event=LogEvent.SHELLCMD, cmd="python -m h2htalk ..."),
        record("Finished jobid: 1 (Rule: curate)", event=LogEvent.JOB_FINISHED, job_id=1),
        record(None, event=LogEvent.PROGRESS, done=1, total=12),
        record("12 results were made from files that are gone", logging.WARNING),
        record("Nothing to be done (all requested files are present and up to date)."),
        record("Complete log(s): /x/.snakemake/log/run.snakemake.log"),
        record("Elapsed time: 0:00:03"),
    ):
        handler.emit(entry)
    assert out.getvalue().splitlines() == [
        "12 jobs: fetch 1, curate 11",
        "12 results were made from files that are gone",
        "Nothing to be done (all requested files are present and up to date).",
    ]


def test_the_run_ends_on_the_error_each_failed_job_ended_with(tmp_path):
    log = tmp_path / "score.log"
    log.write_text(
        "2026-01-01 10:00:00,000 INFO h2htalk.progress: score qwen: 3/26 cells\n"
        "2026-01-01 10:00:01,000 ERROR h2htalk: h2htalk score: error: embedder bge-m3 cannot load: FlagEmbedding "
        "not installed (pip install -e '.[bge]')\n",
        encoding="utf-8",
    )
    handler, out = terminal()
    handler.emit(job_info(7, "score", str(log), model="qwen", embedder="bge-m3"))
    handler.emit(record("Error in rule score, jobid: 7", logging.ERROR, event=LogEvent.JOB_ERROR, jobid=7,
                        rule_name="score", log=[str(log)]))  # fmt: skip
    handler.emit(record("RuleException:\nCalledProcessError in file Snakefile, line 3:\nCommand 'python -m h2htalk'",
                        logging.ERROR, event=LogEvent.ERROR, exception="RuleException"))  # fmt: skip
    handler.emit(record("Exiting because a job execution failed. Look above for error messages", logging.ERROR))
    handler.emit(record("WorkflowError:\nAt least one job did not complete successfully.", logging.ERROR,
                        event=LogEvent.ERROR, exception="WorkflowError"))  # fmt: skip
    lines = out.getvalue().splitlines()
    assert lines == [
        f"failed: score (model=qwen, embedder=bge-m3); its log: {log}",
        "h2htalk score: error: embedder bge-m3 cannot load: FlagEmbedding not installed (pip install -e '.[bge]')",
    ]


def test_an_error_before_any_job_is_shown_whole():
    handler, out = terminal()
    message = "environment variable OPENAI_API_KEY (the API key of model gpt-4o-mini) is not set"
    handler.emit(record(f"WorkflowError:\n{message}", logging.ERROR, event=LogEvent.ERROR, exception="WorkflowError"))
    assert out.getvalue() == message + "\n"


def test_a_jobs_error_is_its_commands_message_or_its_logs_last_line(tmp_path):
    multi = tmp_path / "multi.log"
    multi.write_text("x INFO a: b\nx ERROR h2htalk: h2htalk score-upstream: error: cannot score:\n  - a.jsonl\n")
    assert job_error(multi) == "h2htalk score-upstream: error: cannot score:\n  - a.jsonl"
    crashed = tmp_path / "crashed.log"
    crashed.write_text("Traceback (most recent call last):\n  File x\nValueError: a bug\n\n")
    assert job_error(crashed) == "ValueError: a bug"
    assert job_error(tmp_path / "absent.log") is None


def test_a_submitted_jobs_summary_line_comes_from_its_log(tmp_path):
    """A job on a cluster node writes to its log, not to this terminal: its summary line is read from there.
    A job that ran here (every job of the local executor) printed its own."""
    log = tmp_path / "generate.log"
    log.write_text(
        "2026-01-01 10:00:00,000 INFO h2htalk.progress: generate qwen: 1/66 requests (2%), 0.1/s\n"
        "2026-01-01 10:00:00,500 INFO httpx: HTTP Request: POST http://x/v1/chat/completions\n"
        "2026-01-01 10:01:00,000 INFO h2htalk.progress: generate qwen: 66 answers (0 cached, 0 failed) (1m00s)\n",
        encoding="utf-8",
    )
    assert job_summary(log) == "generate qwen: 66 answers (0 cached, 0 failed) (1m00s)"
    handler, out = terminal()
    handler.emit(job_info(3, "generate", str(log), local=False, model="qwen"))
    handler.emit(job_info(4, "table1", str(log), local=True))
    for jobid in (3, 4):
        handler.emit(record("Finished", event=LogEvent.JOB_FINISHED, job_id=jobid))
    assert out.getvalue().splitlines() == ["generate qwen: 66 answers (0 cached, 0 failed) (1m00s)"]


def test_progress_is_shown_at_most_once_a_minute(monkeypatch):
    handler, out = terminal()
    clock = iter([100.0, 130.0, 170.0, 175.0])
    monkeypatch.setattr(time, "monotonic", lambda: next(clock))
    handler._progress_at = 100.0
    for done in (1, 2, 3, 4):
        handler.emit(record(None, event=LogEvent.PROGRESS, done=done, total=10))
    assert [line.split("] ")[1] for line in out.getvalue().splitlines()] == ["3 of 10 jobs done"]


def test_a_dry_run_shows_snakemakes_own_output():
    handler, _ = terminal(dryrun=True)
    assert not handler.has_filter and not handler.has_formatter  # Snakemake then attaches its own


def test_table2_gaps_count_cells_and_items(tmp_path):
    table2 = tmp_path / "table2.csv"
    columns = ["model", "a", "a_missing", "a_cut_off", "a_failed", "b", "b_missing", "b_cut_off", "b_failed"]
    with open(table2, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        writer.writerow(["m1", "10", "1", "0", "0", "20", "0", "3", "0"])
        writer.writerow(["m2", "10", "2", "1", "0", "20", "0", "0", "0"])
    assert table2_gaps(table2) == [
        "Table 2: 2 of 4 cells are scored on fewer items than expected (3 items missing; table2.md shows "
        "scored/expected).",
        "Table 2: 2 of 4 cells hold answers cut off at their token limit (4 answers).",
    ]


def test_the_judge_card_gives_each_judges_verdict(tmp_path):
    card = tmp_path / "judge_reliability.md"
    card.write_text(
        "# Judge reliability\n\nDoes each judge separate a good answer from a bad one? ...\n\n"
        "## The rubric judge: qwen (Levels I-III)\n\nIt orders the ladder no better than chance (52 %, 95 % CI "
        "[40 %, 63 %] over 9 items, 45 pairs): its scores do not separate a good answer from a bad one. People "
        "have not rated it yet.\n\n| task | accuracy |\n",
        encoding="utf-8",
    )
    assert judge_card(card) == [
        "The rubric judge: qwen (Levels I-III): It orders the ladder no better than chance (52 %, 95 % CI [40 %, "
        "63 %] over 9 items, 45 pairs): its scores do not separate a good answer from a bad one."
    ]
    assert judge_card(tmp_path / "absent.md") == []


def test_the_run_ends_with_what_it_made_what_to_open_and_its_warnings(tmp_path):
    figures = tmp_path / "paper_figures"
    figures.mkdir()
    for name in ("table2.md", "table2.csv", "table2_heatmap.png", "table2.meta.json", "calibration.md"):
        (figures / name).write_text("model\n", encoding="utf-8")
    qwen = "qwen2.5-coder-0.5b-instruct-q4km"
    roles = {"rubric_judge": {"model": qwen}, "study_judge": {"model": "gpt-4o"}}
    config = default_config({"models": [qwen], "instances": {"source": "demo"}, **roles})
    logs = ["/run/.snakemake/log/x.snakemake.log"]
    lines = run_summary(config, figures, time.time() - 75, logs, "results/sets/demo/logs")
    text = [line for _, line in lines]
    assert text[0] == "Finished in 1m15s."
    assert re.match(rf"  Table 2 +{re.escape(str(figures / 'table2.md'))} \(\+ \.csv _heatmap\.png\): ", text[2])
    made = [line for line in text if line.startswith("  ") and str(figures) in line]
    assert len(made) == 2 and len({line.index(str(figures)) for line in made}) == 1  # the titles in one column
    assert f"Open first: {figures / 'table2.md'}, then {figures / 'calibration.md'}" in text
    warnings = [line for level, line in lines if level == logging.WARNING]
    assert any("Demo instances" in line for line in warnings)
    assert f"Warning: {qwen} is a model under test and also the rubric judge (Table 2's Levels I-III)." in warnings
    assert not any("study judge" in line for line in warnings)  # gpt-4o is not under test here
    assert (
        text[-1].startswith("Full log: ")
        and "x.snakemake.log; each job's log is under results/sets/demo/logs/." in text[-1]
    )


def test_a_cheap_judge_under_test_is_warned_of_as_its_roles_own_judge_is():
    """In cascade mode the cheap judge judges every item of its role: under test too, it grades its own answers."""
    qwen = "qwen2.5-coder-0.5b-instruct-q4km"
    cascade = {"mode": "cascade", "model": "gpt-4o", "cheap_model": qwen}
    config = default_config({"models": [qwen], "instances": {"source": "demo"}, "rubric_judge": cascade})
    assert roles_under_test(config) == [
        f"{qwen} is a model under test and also the rubric judge (Table 2's Levels I-III)."
    ]
    config = default_config({"models": [qwen], "instances": {"source": "demo"}, "study_judge": {"model": qwen}})
    assert roles_under_test(config) == [f"{qwen} is a model under test and also the study judge (Table 3, Figure 7)."]


def test_the_closing_lines_list_only_the_files_a_tables_stage_declares(tmp_path):
    figures = tmp_path / "paper_figures"
    figures.mkdir()
    own = ("table1.md", "table1.csv", "table1.tex", "table2.md", "table2_vs_paper.csv")
    others = ("table1_other.csv", "table2_partial.csv", "table2_pairs.csv", "table2_ranks.png")  # not theirs
    for name in (*own, *others):
        (figures / name).write_text("model\n", encoding="utf-8")
    lines = run_summary(default_config({"instances": {"source": "demo"}}), figures, time.time())
    text = "\n".join(line for _, line in lines)
    assert f"  Table 1 {figures / 'table1.md'} (+ .csv .tex): " in text
    assert f"  Table 2 {figures / 'table2.md'} (+ _vs_paper.csv): " in text
    assert not any(name in text for name in others)
