"""A provider's rate limits kept to before sending: token buckets on a fake clock, then against the API stand-in
enforcing the same limits, with and without them."""

from __future__ import annotations

import asyncio

import pytest

from h2htalk.config import default_config
from h2htalk.llm.calls import EngineOptions
from h2htalk.llm.client import ChatClient, ChatRequest, RetryPolicy
from h2htalk.llm.ratelimit import RateLimiter, TokenBucket, limiter_for
from h2htalk.llm.tokens import prompt_tokens, text_tokens
from h2htalk.settings import ClientSettings

from .standins.limits import RateLimits
from .standins.loopback import LoopbackAPI


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)


def test_a_bucket_holds_half_a_second_and_refills_at_the_limit():
    bucket = TokenBucket(per_minute=240)  # 4 a second, 2 in the bucket
    assert [bucket.reserve(0.0, 1) for _ in range(4)] == [0.0, 0.0, 0.25, 0.5]
    assert [bucket.reserve(10.0, 1) for _ in range(3)] == [0.0, 0.0, 0.25]  # refilled, never beyond its size


def test_requests_wait_in_the_order_they_asked_at_the_limits_rate():
    clock = FakeClock()
    limiter = RateLimiter(120, None, clock=clock, sleep=clock.sleep)  # 2 a second, 1 in the bucket

    async def five() -> None:
        await asyncio.gather(*(limiter.acquire(100) for _ in range(5)))

    asyncio.run(five())
    assert clock.sleeps == [0.5, 1.0, 1.5, 2.0] and limiter.held == 4


def test_tokens_per_minute_count_the_prompt_and_max_tokens():
    clock = FakeClock()
    limiter = RateLimiter(None, 600, clock=clock, sleep=clock.sleep)  # 10 tokens a second, 5 in the bucket
    assert asyncio.run(limiter.acquire(25)) == 2.0  # 20 more than the bucket holds: two seconds' worth
    clock.now = 2.0
    assert asyncio.run(limiter.acquire(5)) == 0.5


def test_limiters_are_shared_by_provider_and_absent_without_limits():
    limits = {"api.example.com": {"requests_per_minute": 100, "tokens_per_minute": None}}
    assert limiter_for("api.example.com", limits) is limiter_for("api.example.com", limits)
    assert limiter_for("other.example.com", limits) is None and limiter_for(None, limits) is None


def test_token_estimate_counts_chinese_and_other_characters_apart():
    assert text_tokens("你好世界你好世界你好") == 7  # 10 CJK characters at 1.44 a token
    assert text_tokens("12:30") == 5  # a digit is a token
    assert text_tokens("score") == 1  # four letters a token
    assert prompt_tokens([{"role": "user", "content": "你好"}]) == 1 + 4 + 3


def requests(n: int) -> list[ChatRequest]:
    return [
        ChatRequest(f"k{i}", f"item{i}", [{"role": "user", "content": f"问题{i}"}], {"max_tokens": 8}) for i in range(n)
    ]


def send(api: LoopbackAPI, limiter: RateLimiter | None, n: int) -> list:
    client = ChatClient(
        api.base_url, "stub", api_key="k", concurrency=20, timeout_s=10,
        retry=RetryPolicy(5, 0.05, 0.2), limiter=limiter,
    )  # fmt: skip
    results: list = []

    async def go() -> None:
        try:
            await client.run(requests(n), results.append)
        finally:
            await client.close()

    asyncio.run(go())
    return results


@pytest.mark.parametrize("limited", [False, True])
def test_the_stand_ins_limit_is_met_as_429s_only_without_the_bucket(limited):
    with LoopbackAPI(limits=RateLimits({"default": (600, None)})) as api:  # 10 requests a second
        results = send(api, RateLimiter(600, None) if limited else None, 30)
        refused = api.stats.snapshot()["counts"].get("http_429_rate_limit", 0)
    assert len(results) == 30
    if limited:
        assert refused == 0 and not any(r.failure for r in results)
    else:  # a burst of 20 meets the provider's 10, and the retries crowd in again
        assert refused >= 10


def test_a_session_keeps_to_its_providers_configured_limits(tmp_path):
    config = default_config({"generation": {"rate_limits": {"stand-in": {"requests_per_minute": 1200}}}})
    with LoopbackAPI(limits=RateLimits({"default": (1200, None)})) as api:
        spec = {"name": "limited", "engine": "api", "api": {"base_url": api.base_url, "model": "stub"}}
        spec["api"]["provider"] = "stand-in"
        with EngineOptions(ClientSettings.from_config(config), 1).session(spec, tmp_path, batch=False) as calls:
            calls.answers(requests(60))
            summary = calls.summary()
        assert api.stats.snapshot()["counts"].get("http_429_rate_limit", 0) == 0
    assert summary["rate_limit_held"] >= 40  # 10 leave at once, the rest wait their turn
