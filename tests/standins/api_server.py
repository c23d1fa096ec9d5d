"""Start the remote-API stand-in: several OpenAI-compatible providers under path prefixes (a test fixture).

    python tests/standins/api_server.py --port 8400 [--host 127.0.0.1] [--corpus DIR] [--registry FILE]
        [--rate-limit openai=5000:800000] [--batch-running-s 2]

serves ``/{provider}/v1/chat/completions`` and ``/{provider}/v1/models`` for any provider name (point a registry
entry's ``api.base_url`` at ``http://HOST:PORT/openai/v1``, ``.../deepseek/v1``, ``.../anthropic/v1``), the Batch
API's ``/{provider}/v1/files`` and ``/{provider}/v1/batches``, and ``GET /stats`` (request and fault counts, as
JSON). Requests need ``Authorization: Bearer <anything>``. Faults are deterministic given the seed: 429 with
``Retry-After: 1``, rare 500s, and on the ``deepseek`` provider a 400 "Content Exists Risk" for every request whose
user text names a crisis term. A retried request succeeds after at most ``--fault-attempts`` failed attempts.
``--rate-limit PROVIDER=RPM[:TPM]`` refuses a provider's requests beyond those limits with 429. Prints
``listening on http://HOST:PORT`` once it accepts connections.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: this folder is a package

from tests.standins.answers import AnswerSettings
from tests.standins.batches import BatchPlan
from tests.standins.faults import FaultPlan
from tests.standins.limits import RateLimits
from tests.standins.server import Stopper, make_server, serve_until_stopped
from tests.standins.services import ApiService
from tests.standins.sources import env_float, load_registry


def build_parser() -> argparse.ArgumentParser:
    env = os.environ.get
    p = argparse.ArgumentParser(prog="api_server.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, required=True, help="port (0: any free port; the line printed names it)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--corpus", default=env("STANDIN_CORPUS"), help="folder of *.jsonl reference texts")
    p.add_argument("--registry", default=env("STANDIN_REGISTRY"), help="model registry (config/models.yaml format)")
    p.add_argument("--fault-seed", type=int, default=int(env("STANDIN_FAULT_SEED") or 0))
    p.add_argument("--rate-429", type=float, default=env_float("STANDIN_RATE_429", 0.03))
    p.add_argument("--rate-500", type=float, default=env_float("STANDIN_RATE_500", 0.01))
    p.add_argument("--fault-attempts", type=int, default=int(env("STANDIN_FAULT_ATTEMPTS") or 2),
                   help="attempts of one request that may fail (later attempts always succeed)")  # fmt: skip
    p.add_argument("--risk-providers", default=env("STANDIN_RISK_PROVIDERS") or "deepseek",
                   help="comma-separated providers that refuse crisis terms with 400 Content Exists Risk")  # fmt: skip
    p.add_argument("--latency", type=float, default=env_float("STANDIN_LATENCY_S", 0.0))
    p.add_argument(
        "--rate-limit",
        action="append",
        default=[],
        metavar="PROVIDER=RPM[:TPM]",
        help="requests (and tokens) per minute a provider answers; beyond them, 429 (repeatable)",
    )
    p.add_argument("--batch-running-s", type=float, default=env_float("STANDIN_BATCH_RUNNING_S", 2.0),
                   help="seconds a batch runs before its results are ready")  # fmt: skip
    p.add_argument("--access-log", action="store_true")
    return p


def make_service(args: argparse.Namespace) -> ApiService:
    faults = FaultPlan(
        seed=args.fault_seed,
        rate_429=args.rate_429,
        rate_500=args.rate_500,
        fault_attempts=args.fault_attempts,
        refusing=tuple(p.strip() for p in args.risk_providers.split(",") if p.strip()),
    )
    return ApiService(
        settings=AnswerSettings.from_env(corpus_dir=args.corpus),
        registry=load_registry(args.registry or None),
        faults=faults,
        latency_s=args.latency,
        limits=RateLimits(dict(rate_limit(value) for value in args.rate_limit)),
        batch_plan=BatchPlan(running_s=args.batch_running_s),
    )


def rate_limit(value: str) -> tuple[str, tuple[float | None, float | None]]:
    """``openai=5000:800000`` -> ("openai", (5000, 800000)); ``openai=5000`` limits requests only."""
    provider, _, limits = value.partition("=")
    requests, _, tokens = limits.partition(":")
    return provider, (float(requests) if requests else None, float(tokens) if tokens else None)


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    stopper = Stopper().install()
    service = make_service(args)
    server = make_server(args.host, args.port, service.handle, server_header="standin-api",
                                 access_log=args.access_log)  # fmt: skip
    host, port = server.server_address[:2]
    print(f"listening on http://{host}:{port}", flush=True)
    serve_until_stopped(server, stopper)


if __name__ == "__main__":
    main()
