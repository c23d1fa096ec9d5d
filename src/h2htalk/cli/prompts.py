"""Prompts stage command: render the chat messages of one subtask's instances for one variant."""

from __future__ import annotations

import argparse
from typing import Any

from h2htalk.cli.options import add_command, add_results
from h2htalk.progress import summary
from h2htalk.settings import VARIANTS
from h2htalk.subtasks import SUBTASK_KEYS


def register(sub: Any) -> None:
    p = add_command(sub, "prompts", cmd_prompts, "render the chat messages of one subtask's instances")
    add_results(p)
    p.add_argument("--subtask", required=True, choices=SUBTASK_KEYS)
    p.add_argument("--variant", required=True, choices=VARIANTS)


def cmd_prompts(args: argparse.Namespace) -> int:
    from h2htalk.instances.schema import read_instances
    from h2htalk.prompts.render import write_prompts

    instances = args.results.path("instances", subtask=args.subtask)
    out = args.results.prompts(args.variant, args.subtask)
    count = write_prompts(read_instances(instances), args.variant, out)
    summary(f"{count} prompts", subject=f"{args.subtask} ({args.variant})", out=out)
    return 0
