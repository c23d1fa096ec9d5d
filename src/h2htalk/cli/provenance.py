"""Provenance command: what every result of a run depends on besides its own inputs, in one file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from h2htalk.cli.options import add_command, add_results, load_config
from h2htalk.config import load_schema
from h2htalk.progress import summary


def register(sub: Any) -> None:
    p = add_command(
        sub, "provenance", cmd_provenance, "write the run's provenance (git, config, data, versions, hardware)",
        reads=tuple(load_schema()["properties"]),
    )  # fmt: skip
    add_results(p)
    p.add_argument("--root", type=Path, default=Path("."), help="the checkout (for the git revision)")


def cmd_provenance(args: argparse.Namespace) -> int:
    from h2htalk.provenance import write_provenance

    out = args.results.path("provenance")
    record = write_provenance(load_config(args), args.results.path("manifest"), out, args.root)
    summary(f"git {record['git']['revision']}, config sha256 {record['config_sha256'][:12]}", out=out)
    return 0
