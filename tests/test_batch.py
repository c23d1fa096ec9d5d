"""Requests through the Batch API, against the API stand-in's files and batches: the same cache and keys as direct
answers, batches split by the endpoint's limits, an expired batch, partial failures, a job killed while it waits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from h2htalk.llm.batch import BatchLimits, BatchState, Submission, request_line, split

from .batch_job import batch_requests, batch_spec, engines
from .conftest import REPO_ROOT
from .standins.answers import echo_answer
from .standins.loopback import LoopbackAPI


@pytest.fixture
def api():
    with LoopbackAPI() as stub:
        yield stub


def counts(api: LoopbackAPI) -> dict[str, int]:
    return api.stats.snapshot()["counts"]


def submissions(cache: Path) -> list[Submission]:
    state = BatchState(cache, "batch-judge")
    try:
        return state.submissions()
    finally:
        state.close()


def test_answers_land_in_the_cache_under_the_keys_of_direct_answers(api, tmp_path):
    requests = batch_requests(7)
    with engines().session(batch_spec(api.base_url, max_requests=3), tmp_path, batch=True) as calls:
        answers = calls.answers(requests)
        assert len(calls.summary()["batches"]) == 3  # 7 requests, at most 3 a batch
    assert {r.key: answers[r.key]["response"] for r in requests} == {
        r.key: echo_answer(r.messages[-1]["content"]) for r in requests
    }
    assert sum(api.requests.values()) == 0  # not one was sent directly
    with engines().session(batch_spec(api.base_url), tmp_path, batch=False) as calls:
        again = calls.answers(requests)
        assert calls.sent == 0  # a direct session finds them all in the cache
    assert again == answers
    assert submissions(tmp_path) == []  # every batch read back and forgotten


def test_a_model_without_a_batch_api_is_answered_directly(api, tmp_path):
    spec = batch_spec(api.base_url)
    spec["api"]["batch_api"] = None
    with engines().session(spec, tmp_path, batch=True) as calls:
        calls.answers(batch_requests(2))
    assert sum(api.requests.values()) == 2 and "batches_created" not in counts(api)


def test_batches_are_split_by_requests_and_bytes():
    lines = [(r.key, request_line(r, "m")) for r in batch_requests(10)]
    size = len(lines[0][1])
    by_count = [len(chunk) for chunk in split(lines, BatchLimits(max_requests=4, max_bytes=10**9))]
    by_bytes = [len(chunk) for chunk in split(lines, BatchLimits(max_requests=100, max_bytes=3 * size + 1))]
    assert by_count == [4, 4, 2] and by_bytes == [3, 3, 3, 1]


def test_an_expired_batch_resubmits_only_what_it_did_not_finish(api, tmp_path):
    api.batch_plan.outcomes[:] = ["expired"]
    api.batch_plan.expired_share = 0.5
    with engines().session(batch_spec(api.base_url), tmp_path, batch=True) as calls:
        answers = calls.answers(batch_requests(6))
        assert len(calls.summary()["batches"]) == 2 and not calls.failed
    assert all(a["response"].startswith("（微笑）") for a in answers.values())
    assert counts(api)["batch_lines"] == 6  # 3 in the expired batch, the other 3 in the next


def test_failed_lines_are_retried_or_recorded_per_item(api, tmp_path):
    api.faults.scripted = {"问题1": ["429", "500"], "问题2": ["risk"], "问题3": ["400"]}
    requests = batch_requests(5)
    with engines().session(batch_spec(api.base_url), tmp_path, batch=True) as calls:
        answers = calls.answers(requests)
        failed = dict(calls.failed)
    assert answers[requests[1].key]["response"] == echo_answer("问题1")  # a 429, then a 500: third batch answers
    assert answers[requests[1].key]["attempts"] == 3
    assert {item: f["kind"] for item, f in failed.items()} == {"item2": "content_refusal", "item3": "client_error"}
    with engines().session(batch_spec(api.base_url), tmp_path, batch=True) as calls:
        calls.answers(requests)
        assert calls.sent == 1  # the refusal is cached; the other client error is sent again, as a direct one


def test_a_failed_batch_fails_its_items_without_caching_them(api, tmp_path):
    api.batch_plan.outcomes[:] = ["failed"]
    with engines().session(batch_spec(api.base_url), tmp_path, batch=True) as calls:
        calls.answers(batch_requests(3))
        assert {f["kind"] for f in calls.failed.values()} == {"client_error"}
        assert "The batch input file is not valid" in calls.failed["item0"]["message"]
    with engines().session(batch_spec(api.base_url), tmp_path, batch=True) as calls:
        calls.answers(batch_requests(3))
        assert calls.sent == 3 and not calls.failed


def test_an_uploaded_file_whose_batch_was_not_recorded_is_found_not_submitted_again(api, tmp_path):
    """Killed between creating a batch and recording it: the rerun finds the batch by its input file."""
    requests = batch_requests(2)
    body = b"".join(request_line(r, "stub") for r in requests)
    upload = api.batches.upload(*multipart(body))
    file_id = upload.body["id"]
    api.batches.create("default", json.dumps({"input_file_id": file_id, "endpoint": "/v1/chat/completions"}).encode())
    state = BatchState(tmp_path, "batch-judge")
    state.record(Submission(file_id, [r.key for r in requests], None, 1))
    state.close()
    with engines().session(batch_spec(api.base_url), tmp_path, batch=True) as calls:
        calls.answers(requests)
        assert calls.sent == 2 and not calls.failed
    assert counts(api)["batches_created"] == 1 and counts(api)["files_uploaded"] == 1


def multipart(content: bytes) -> tuple[str, bytes]:
    boundary = "b0undary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="r.jsonl"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + content
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return f"multipart/form-data; boundary={boundary}", body


def test_a_job_killed_while_its_batch_runs_polls_it_again_instead_of_submitting_again(api, tmp_path):
    api.batch_plan.running_s = 600  # the batch runs until the test lets it finish
    command = [sys.executable, "-m", "tests.batch_job", "--base-url", api.base_url, "--cache", str(tmp_path),
               "--count", "5"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "src"), str(REPO_ROOT)])}
    job = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while counts(api).get("batches_created", 0) < 1 or not any(s.batch for s in submissions(tmp_path)):
        assert job.poll() is None, job.stderr.read().decode()
        assert time.monotonic() < deadline, "the job did not submit its batch"
        time.sleep(0.1)
    time.sleep(0.3)  # it polls the running batch now
    job.send_signal(signal.SIGKILL)
    job.wait()
    [submission] = submissions(tmp_path)
    assert len(submission.keys) == 5 and submission.batch in api.batches.batches
    for batch in api.batches.batches.values():
        batch["_finish_at"] = time.time()  # the provider finishes the batch while no job waits for it
    rerun = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300, check=True)
    result = json.loads(rerun.stdout.splitlines()[-1])
    assert result["batches"] == [submission.batch]  # the batch it had submitted, polled
    assert result["answers"] == {f"item{i}": echo_answer(f"问题{i}") for i in range(5)}
    assert counts(api)["batches_created"] == 1 and counts(api)["files_uploaded"] == 1  # nothing submitted twice
    assert counts(api)["batch_lines"] == 5
    assert submissions(tmp_path) == []
    assert "already in 1 submitted batches, polled again" in rerun.stderr


def test_batch_path_keeps_the_state_next_to_the_cache(api, tmp_path):
    with engines().session(batch_spec(api.base_url), tmp_path / "cache", batch=True) as calls:
        calls.answers(batch_requests(1))
    assert sorted(p.name for p in Path(tmp_path / "cache").iterdir()) == [
        "batch-judge.batches.sqlite",
        "batch-judge.sqlite",
    ]
