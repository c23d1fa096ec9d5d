"""Figure commands: Figures 4-6 (dataset statistics). Figure 7 is a study's (cli/studies.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from h2htalk.cli.options import add_config, add_provenance, load_config, overrides, write_meta
from h2htalk.progress import summary


def register(sub: Any) -> None:
    p = sub.add_parser("figure", help="Figure 4 (word cloud), 5 (verb-noun pairs) or 6 (lengths), PNG and CSV")
    add_config(p)
    p.add_argument("figure", type=int, choices=[4, 5, 6])
    p.add_argument("--curated", type=Path, nargs="+", required=True, help="curated reference files (outputs)")
    p.add_argument("--instances", type=Path, nargs="*", default=[], help="instance files (inputs)")
    p.add_argument("--font", help="a font file with Chinese glyphs, or auto (overrides figures.cjk_font)")
    p.add_argument("--out", type=Path, required=True, help="output path without extension")
    add_provenance(p)
    overrides(p, font="figures.cjk_font")
    p.set_defaults(handler=cmd_figure)


def cmd_figure(args: argparse.Namespace) -> int:
    from h2htalk.figures.plots import draw_figure

    summary(draw_figure(args.figure, args.curated, args.instances, load_config(args)["figures"], args.out))
    write_meta(args, args.out, [*args.curated, *args.instances])
    return 0
