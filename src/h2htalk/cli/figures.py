"""Figure commands: Figures 4-6 (dataset statistics) and Figure 7 (the instruction-following study)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from h2htalk.cli.options import (
    add_bootstrap,
    add_command,
    add_results,
    add_table_output,
    load_config,
    overrides,
    write_meta,
)
from h2htalk.cli.run_notes import RUN_NOTE_READS, run_notes
from h2htalk.progress import summary

FIGURES = {4: "fig4_wordcloud", 5: "fig5_verb_noun", 6: "fig6_lengths", 7: "fig7_instruction_following"}


def register(sub: Any) -> None:
    p = add_command(
        sub, "figure", cmd_figure, "Figure 4 (word cloud), 5 (verb-noun pairs) or 6 (lengths), PNG and CSV",
        reads=("figures", *RUN_NOTE_READS),
    )  # fmt: skip
    add_results(p)
    p.add_argument("figure", type=int, choices=[4, 5, 6])
    p.add_argument("--font", help="a font file with Chinese glyphs, or auto (overrides figures.cjk_font)")
    p.add_argument("--out", type=Path, help="output path without extension (default: paper_figures/[SET/]fig{N}_...)")
    overrides(p, font="figures.cjk_font")

    p = add_command(
        sub, "fig7", cmd_fig7, "Figure 7: instruction following by scenario type",
        reads=("scoring.bootstrap", "studies.models", "models", "variants", "review.store", *RUN_NOTE_READS),
    )  # fmt: skip
    add_results(p)
    add_bootstrap(p)
    add_table_output(p, FIGURES[7])


def cmd_figure(args: argparse.Namespace) -> int:
    from h2htalk.figures.plots import draw_figure

    config = load_config(args)
    args.out = args.out or Path(args.results.figure(FIGURES[args.figure]))
    curated = [Path(args.results.path("curated", subtask=key)) for key in config["subtasks"]]
    instances = [Path(args.results.path("instances", subtask=key)) for key in config["subtasks"]]
    source, notes = config["instances"]["source"], run_notes(config)
    drawn = draw_figure(args.figure, curated, instances, config["figures"], args.out, source, notes)
    summary(drawn, subject=str(args.figure))
    write_meta(args, [*curated, *instances])
    return 0


def cmd_fig7(args: argparse.Namespace) -> int:
    from h2htalk.cells import RunCells
    from h2htalk.figures.fig7 import write_fig7_files
    from h2htalk.settings import BootstrapSettings

    config = load_config(args)
    run = RunCells(config)
    cells = [cell for m in run.study_models for cell in run.studies(m, ("instruction_following",))]
    store, bootstrap = config["review"]["store"], BootstrapSettings.from_config(config)
    rows = write_fig7_files(cells, args.results, bootstrap, args.out, store, run_notes(config))
    write_meta(args, [*(args.results.verdicts(cell) for cell in cells), *([store] if os.path.exists(store) else [])])
    summary(f"{len(rows)} bars", out=f"{args.out}.png")
    return 0
