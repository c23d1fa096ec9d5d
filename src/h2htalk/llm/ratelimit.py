"""A provider's rate limits, respected before a request is sent instead of discovered through its 429s.

A provider limits requests and tokens per minute (``generation.rate_limits``). Each is a token bucket that
refills at the limit's rate and holds half a second of it: providers enforce a minute's limit over shorter
windows ("60,000 requests a minute may be enforced as 1,000 a second"), so a client that sends a minute's
worth at once is refused although it keeps to the minute; half of the second's burst leaves room for requests
that arrive closer together than they left. A request reserves its share of both buckets; the
level may go below zero, and the request waits until it would be back at zero, so requests leave in the order
they asked and the long-run rate is the limit. A request's tokens are what the provider counts: its prompt
(estimated, ``h2htalk.llm.tokens``) and its ``max_tokens``.

Every client of one provider in a process shares its buckets (``limiter_for``); jobs that run at the same
time each have their own, so the limits are per job.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

BURST_S = 0.5  # what a bucket holds: this many seconds of its limit


@dataclass
class TokenBucket:
    per_minute: float
    level: float = field(init=False)
    updated: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.level = self.capacity

    @property
    def rate(self) -> float:
        return self.per_minute / 60.0

    @property
    def capacity(self) -> float:
        return self.rate * BURST_S

    def reserve(self, now: float, amount: float) -> float:
        """Take ``amount`` at ``now``; the seconds to wait before using it (0: at once)."""
        if self.updated is not None:
            self.level = min(self.capacity, self.level + (now - self.updated) * self.rate)
        self.updated = now
        self.level -= amount
        return max(0.0, -self.level / self.rate)


class RateLimiter:
    """Requests and tokens per minute of one provider (None: that one is not limited)."""

    def __init__(
        self,
        requests_per_minute: float | None,
        tokens_per_minute: float | None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:
        self.requests = TokenBucket(requests_per_minute) if requests_per_minute else None
        self.tokens = TokenBucket(tokens_per_minute) if tokens_per_minute else None
        self._clock, self._sleep = clock, sleep
        self.held = 0  # requests that waited for the buckets: each would have risked a 429
        self.waited_s = 0.0

    async def acquire(self, tokens: int) -> float:
        """Wait until a request of ``tokens`` may go; the seconds waited."""
        now = self._clock()
        wait = 0.0
        if self.requests:
            wait = self.requests.reserve(now, 1)
        if self.tokens:
            wait = max(wait, self.tokens.reserve(now, tokens))
        if wait > 0:
            self.held += 1
            self.waited_s += wait
            await self._sleep(wait)
        return wait


_SHARED: dict[tuple[str, float | None, float | None], RateLimiter] = {}


def limiter_for(provider: str | None, limits: Mapping[str, Mapping[str, Any]]) -> RateLimiter | None:
    """The process's limiter of ``provider`` as ``limits`` (``generation.rate_limits``) set it; None when it has
    none."""
    if provider is None or provider not in limits:
        return None
    rpm, tpm = limits[provider]["requests_per_minute"], limits[provider]["tokens_per_minute"]
    if not rpm and not tpm:
        return None
    key = (provider, rpm, tpm)
    if key not in _SHARED:
        _SHARED[key] = RateLimiter(rpm, tpm)
    return _SHARED[key]
