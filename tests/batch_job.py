"""A job that asks a model for answers through its Batch API: the kill-and-resume test runs it as a process.

    python -m tests.batch_job --base-url URL --cache DIR --count N

prints one JSON line: the answers by item, what the session sent and the batches it submitted or polled.
"""

from __future__ import annotations

import argparse
import json
import logging

from h2htalk.config import default_config
from h2htalk.llm.calls import EngineOptions
from h2htalk.llm.client import ChatRequest
from h2htalk.settings import ClientSettings

BATCH_API = {"max_requests": 50000, "max_bytes": 200_000_000}


def batch_spec(base_url: str, **batch_api: int) -> dict:
    """A registry entry of an API model whose endpoint has a Batch API."""
    api = {"base_url": base_url, "model": "stub", "batch_api": {**BATCH_API, **batch_api}}
    return {"name": "batch-judge", "engine": "api", "api": api}


def batch_requests(count: int) -> list[ChatRequest]:
    params = {"temperature": 0.0, "max_tokens": 16, "seed": 1}
    messages = [[{"role": "system", "content": "s"}, {"role": "user", "content": f"问题{i}"}] for i in range(count)]
    return [ChatRequest(f"{i:064x}", f"item{i}", messages[i], params) for i in range(count)]


def engines(**generation: object) -> EngineOptions:
    config = default_config({"generation": {"batch_poll_s": 0.05, "retries": 2, **generation}})
    return EngineOptions(ClientSettings.from_config(config), 1234)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--cache", required=True)
    parser.add_argument("--count", type=int, required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)  # the progress lines, which the test reads
    requests = batch_requests(args.count)
    with engines().session(batch_spec(args.base_url), args.cache, batch=True) as calls:
        answers = calls.answers(requests)
        summary = calls.summary()
    print(json.dumps({"answers": {r.item_id: answers[r.key]["response"] for r in requests},
                      "sent": summary["sent"], "batches": summary.get("batches", [])}, ensure_ascii=False))  # fmt: skip


if __name__ == "__main__":
    main()
