"""A provider's rate limits as a server enforces them: requests and tokens per minute, each a bucket holding one
second of its limit (providers enforce a minute's limit over short windows). A request the buckets cannot pay
for now gets 429 with the seconds until they could (``Retry-After``), and takes nothing from them."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field


@dataclass
class Bucket:
    per_minute: float
    level: float = field(init=False)
    updated: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.level = self.per_minute / 60.0

    def refill(self, now: float) -> None:
        rate = self.per_minute / 60.0
        self.level = min(rate, self.level + (now - self.updated) * rate)
        self.updated = now

    def shortfall_s(self, amount: float) -> float:
        """Seconds until ``amount`` is in the bucket (0: now); a request larger than the bucket waits for a full one."""
        rate = self.per_minute / 60.0
        return max(0.0, (min(amount, rate) - self.level) / rate)


@dataclass
class RateLimits:
    """Per provider: (requests per minute, tokens per minute), either None."""

    limits: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    _buckets: dict[str, list[Bucket | None]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def admit(self, provider: str, tokens: int) -> float | None:
        """None when the request may be answered (paid for), else the seconds until it could be (its 429's
        Retry-After)."""
        if provider not in self.limits:
            return None
        with self._lock:
            if provider not in self._buckets:
                self._buckets[provider] = [Bucket(limit) if limit else None for limit in self.limits[provider]]
            requests, token_bucket = self._buckets[provider]
            now = time.monotonic()
            wait = 0.0
            for bucket, amount in ((requests, 1), (token_bucket, tokens)):
                if bucket:
                    bucket.refill(now)
                    wait = max(wait, bucket.shortfall_s(amount))
            if wait > 0:
                return wait
            for bucket, amount in ((requests, 1), (token_bucket, tokens)):
                if bucket:
                    bucket.level -= amount
            return None
