"""Prompts stage command: render the chat messages of an instance file for one variant."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from h2htalk.progress import summary
from h2htalk.settings import VARIANTS


def register(sub: Any) -> None:
    p = sub.add_parser("prompts", help="render the chat messages for an instance file")
    p.add_argument("--instances", type=Path, required=True)
    p.add_argument("--variant", required=True, choices=VARIANTS)
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(handler=cmd_prompts)


def cmd_prompts(args: argparse.Namespace) -> int:
    from h2htalk.instances.schema import read_instances
    from h2htalk.prompts.render import write_prompts

    count = write_prompts(read_instances(args.instances), args.variant, args.out)
    summary(f"{args.instances}: {count} prompts ({args.variant}) -> {args.out}")
    return 0
