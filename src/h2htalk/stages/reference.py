"""The stage reference, ``docs/stages.md``, made from the stage registry: for every stage, what it reads, what it
makes and where it runs. ``python -m h2htalk.stages.reference docs/stages.md`` writes it (whole, or not at all: a
declaration's error leaves the file as it was; without a file it is printed); a test fails when the
file and the declarations drift apart."""

from __future__ import annotations

from h2htalk.layout import PATTERNS, Layout
from h2htalk.stages.spec import Cells, Each, Figure, FileSpec, One, Paths, Stage
from h2htalk.stages.table import STAGES

WHERE = {
    "local": "where Snakemake runs (on a cluster: the submit host)",
    "cpu": "a CPU job (`cluster.cpu_partition`)",
    "model": "a job with its models' GPUs, cores, memory and time (registry `gpus`, `resources`); starts their engines",
    "embedder": "a job placed by its embedder's GPUs (`embedders.NAME.gpus`)",
}
CELL_PATHS = {  # the kinds of a cell the reference writes apart: its study's path too, or only a study's
    "prompts": PATTERNS["prompts"] + " (a study's: " + PATTERNS["study_prompts"] + ")",
    "references": PATTERNS["instances"] + " (a study's items: " + PATTERNS["study_items"] + ")",
    "generations": PATTERNS["generations"] + " (a study's: " + PATTERNS["study_generations"] + ")",
    "verdicts": PATTERNS["study_verdicts"],
    "judge_sample": PATTERNS["judge_sample"] + " (a study's: " + PATTERNS["study_judge_sample"] + ")",
}
RESULTS = Layout("results", "{set}")  # the paths of any instance set's results and tables


def _where(kind: str) -> str:  # a cell's kind: its study's path too
    return f"{RESULTS.set_root}/{CELL_PATHS[kind]}" if kind in CELL_PATHS else RESULTS.pattern(kind)


def describe(spec: FileSpec) -> str:
    if isinstance(spec, Each):
        return f"each cell's `{_where(spec.kind)}`"
    if isinstance(spec, Cells):
        which = " ".join((spec.cells.__doc__ or "").split()) or "the run's cells"
        return f"`{_where(spec.kind)}` of {which}"
    if isinstance(spec, One):
        each = f" for each of the run's {spec.over[1].replace('_', ' ')}" if spec.over else ""
        return f"`{_where(spec.kind)}`{each}"
    if isinstance(spec, Figure):
        return f"`{RESULTS.figure(spec.stem + spec.suffix)}`" + (" (a folder)" if spec.directory else "")
    assert isinstance(spec, Paths)
    doc = (spec.paths_of.__doc__ or "").strip().split("\n\n")[0]
    return " ".join(doc.split())


def stage_section(stage: Stage) -> str:
    lines = [f"## {stage.name}", "", stage.help[0].upper() + stage.help[1:] + ".", ""]
    labels = " ".join(f"--{label} {label.upper()}" for label in stage.labels)
    lines += [f"- command: `h2htalk {stage.command_name}{' ' + labels if labels else ''}`"]
    lines += [f"- runs {('once per ' + ', '.join(stage.labels)) if stage.labels else 'once'}; {WHERE[stage.where]}"]
    lines += [f"- environment: `envs/{stage.env}.yaml`; memory {stage.memory_mb} MB, {stage.minutes} min"]
    if stage.priority:
        lines += [f"- priority {stage.priority}: before the jobs of lower priority that are ready at the same time"]
    keys = dict.fromkeys(stage.reads)
    reads = ", ".join(f"`{key}`" for key in keys) if stage.reads != ("*",) else "the whole configuration"
    lines += [f"- reads: {reads or 'no setting'}"]
    if stage.uses:
        lines += [f"- reads the package's resources: {', '.join(f'`resources/{f}/`' for f in stage.uses)}"]
    if stage.ratings:
        lines += [f"- reads people's ratings: {', '.join(sheet.kind for sheet in stage.ratings)} (the review store)"]
    lines += ["- inputs:" if stage.inputs or stage.where == "model" else "- inputs: none"]
    lines += [f"  - {name}: {describe(spec)}" for name, spec in stage.inputs.items()]
    if stage.where == "model":
        lines += ["  - models: the model files and prefetch records of the models it starts"]
    lines += ["- outputs:"] + [f"  - {name}: {describe(spec)}" for name, spec in stage.outputs.items()]
    if product := stage.product:
        titles = product.title if isinstance(product.title, str) else ", ".join(product.title.values())
        first = "; among what a run says to open first" if product.first else ""
        lines += [f"- product ({product.kind}): {titles}, its `{product.main}` output{first}"]
    if stage.steps:
        named = [f"`{name}`" + f" ({step.makes})" * bool(step.makes)
                 for step in stage.steps for name in step.names(stage.name)]  # fmt: skip
        lines += [f"- its model calls, as the plan names them: {', '.join(named)}"]
    if grows := stage.grows:
        steps = f" of {', '.join(f'`{name}`' for name in grows.steps)}" if grows.steps else ""
        mine = " of its model" if "model" in stage.labels else ""
        lines += [f"- its work grows with the run: each planned request{steps}{mine},"
                  f" at the throughput table's `cpu.{grows.per}`"]  # fmt: skip
    if stage.keeps:
        lines += ["- keeps (adds to, across runs):"] + [f"  - {n}: {describe(s)}" for n, s in stage.keeps.items()]
    return "\n".join(lines) + "\n"


def reference() -> str:
    head = [
        "# Stages",
        "",
        "Every stage of the workflow, as it is declared at the function that does its work (`@stage`): its rule (of",
        "the same name), its command, what it reads and makes, and where it runs. Made from the registry by",
        "`python -m h2htalk.stages.reference docs/stages.md`; `tests/test_stages.py` fails when the two differ.",
        "",
        "A *cell* is a model's result for one variant (`sap`, `nosap`) and one task (a subtask, or a study), scored",
        "by an embedder where it has scores. `{set}` is the run's instance set (`demo`, `reconstructed`, ...).",
        "",
        "| stage | command | runs over | where |",
        "|---|---|---|---|",
        *(f"| [{s.name}](#{s.name}) | `{s.command_name}` | {', '.join(s.labels) or '—'} | {s.where} |" for s in STAGES),
        "",
    ]
    return "\n".join(head) + "\n" + "\n".join(stage_section(stage) for stage in STAGES)


if __name__ == "__main__":
    import sys

    from h2htalk.io import write_text_atomic

    if sys.argv[1:2] and sys.argv[1].startswith("-"):  # --help: not a file to write
        sys.exit("usage: python -m h2htalk.stages.reference [FILE]: write the stage reference to FILE, or print it")
    if sys.argv[1:]:
        write_text_atomic(sys.argv[1], reference())
    else:
        print(reference(), end="")
