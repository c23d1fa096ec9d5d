"""The chat client against a real loopback server that injects faults."""

from __future__ import annotations

import asyncio
import time

import pytest

from h2htalk.llm.client import ChatClient, ChatRequest, EndpointError, RetryPolicy

from .standins.answers import echo_answer
from .standins.loopback import LoopbackAPI


@pytest.fixture
def stub():
    with LoopbackAPI() as state:
        yield state


def requests(n: int) -> list[ChatRequest]:
    return [
        ChatRequest(
            f"key{i}",
            f"item{i}",
            [{"role": "system", "content": "s"}, {"role": "user", "content": f"问题{i}"}],
            {"temperature": 0.0, "max_tokens": 16, "seed": 1},
        )
        for i in range(n)
    ]


def run(stub, reqs, concurrency=3, timeout_s=5.0, retries=3):
    client = ChatClient(
        stub.base_url,
        "stub-model",
        api_key="not-needed",
        concurrency=concurrency,
        timeout_s=timeout_s,
        retry=RetryPolicy(max_retries=retries, backoff_base_s=0.01, backoff_max_s=0.05),
    )
    results = []

    async def go():
        try:
            await client.run(reqs, results.append)
        finally:
            await client.close()

    asyncio.run(go())
    return results


def test_all_requests_answered_with_bounded_concurrency(stub):
    stub.latency_s = 0.1
    results = run(stub, requests(12), concurrency=3)
    assert sorted(r.item_id for r in results) == sorted(f"item{i}" for i in range(12))
    assert all(r.response == echo_answer(f"问题{r.item_id[4:]}") for r in results)
    assert all(r.finish_reason == "stop" and r.attempts == 1 for r in results)
    assert 1 < stub.stats.max_in_flight <= 3


def test_429_honours_retry_after(stub):
    stub.faults.scripted = {"问题0": ["429"]}
    stub.faults.retry_after = "1"
    start = time.monotonic()
    results = run(stub, requests(1))
    assert time.monotonic() - start >= 0.95
    assert results[0].attempts == 2 and stub.requests["问题0"] == 2


@pytest.mark.parametrize("fault", ["500", "503", "malformed", "close", "no_choices"])
def test_transient_faults_are_retried(stub, fault):
    stub.faults.scripted = {"问题1": [fault, fault]}
    results = run(stub, requests(3))
    by_item = {r.item_id: r for r in results}
    assert by_item["item1"].attempts == 3
    assert by_item["item1"].response == echo_answer("问题1")
    assert stub.requests["问题1"] == 3


def test_stall_past_the_timeout_is_retried(stub):
    stub.faults.scripted = {"问题0": ["stall"]}
    stub.faults.stall_s = 2.0
    start = time.monotonic()
    results = run(stub, requests(1), timeout_s=0.5)
    assert results[0].attempts == 2
    assert time.monotonic() - start < 2.0  # the client gave up on the stalled request, it did not wait


def test_a_client_error_fails_that_item_at_once_and_no_other(stub):
    stub.faults.scripted = {"问题2": ["400"]}
    results = {r.item_id: r for r in run(stub, requests(3), concurrency=1)}
    assert stub.requests["问题2"] == 1  # not retried
    failure = results["item2"].failure
    assert failure.kind == "client_error" and "HTTP 400" in failure.message
    assert not failure.permanent  # it may not fail again: it is never cached
    assert results["item2"].response == "" and results["item0"].failure is None and results["item1"].response


def test_a_content_refusal_is_permanent(stub):
    stub.faults.scripted = {"问题1": ["risk"]}
    results = {r.item_id: r for r in run(stub, requests(2))}
    failure = results["item1"].failure
    assert failure.kind == "content_refusal" and failure.permanent and stub.requests["问题1"] == 1


@pytest.mark.parametrize(
    ("fault", "says"), [("401", "HTTP 401: .*Incorrect API key"), ("404", "HTTP 404: .*not exist")]
)
def test_an_endpoint_that_refuses_every_request_stops_the_work_at_once(stub, fault, says):
    stub.faults.scripted = {"问题": [fault] * 20}  # every request: a wrong key, or a model the endpoint does not serve
    with pytest.raises(EndpointError, match=f"{stub.base_url} answered {says}"):
        run(stub, requests(20), concurrency=2)
    assert sum(stub.requests.values()) < 20  # the rest were never sent


def test_retries_run_out_for_one_item_and_the_others_are_answered(stub):
    stub.faults.scripted = {"问题3": ["500"] * 10}
    kept = []
    client = ChatClient(
        stub.base_url,
        "stub-model",
        api_key="not-needed",
        concurrency=1,
        timeout_s=5,
        retry=RetryPolicy(max_retries=2, backoff_base_s=0.01, backoff_max_s=0.02),
    )

    async def go():
        try:
            await client.run(requests(5), kept.append)
        finally:
            await client.close()

    asyncio.run(go())
    assert [r.item_id for r in kept] == ["item0", "item1", "item2", "item3", "item4"]  # the rest went on
    failure = kept[3].failure
    assert failure.kind == "retries_exhausted" and not failure.permanent
    assert "HTTP 500" in failure.message and "gave up after 3 attempts" in failure.message
    assert stub.requests["问题3"] == 3
