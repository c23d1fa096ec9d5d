"""The stages that make what models are asked: the instances (reconstructed, or read), their prompts, the studies'
inputs, and the model files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from h2htalk.errors import H2HTalkError
from h2htalk.layout import Cell
from h2htalk.ratings import INSTANCE_DECISIONS
from h2htalk.settings import STUDIES, VARIANTS, ReconstructSettings, StudySample
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import REGISTRY, config_files, models_in_use
from h2htalk.stages.spec import Done, Each, Models, One, Over, Paths


def _reconstructors(scope, labels):
    """The reconstruction's generator and voters."""
    reconstruct = scope.config["instances"]["reconstruct"]
    return list(dict.fromkeys([reconstruct["generator"], *reconstruct["voters"]]))


@stage(
    "reconstruct_instances", "rebuild the subtasks' inputs from their references, verified by vote",
    uses=("subtasks",), planned=True,
    reads=(*REGISTRY, "generation", "instances.reconstruct", "instances.review_imports", "subtasks", "review.store"),
    command="reconstruct", targets="reconstruct", starts=_reconstructors, ratings=(INSTANCE_DECISIONS,),
    where="model", env="generation", options=("engine",),
    inputs={
        "curated": One("curated", over=("subtask", "subtasks")),
        "decisions": config_files("instances.review_imports"),
    },
    outputs={
        "instances": One("reconstructed", over=("subtask", "subtasks")),
        "reports": One("reconstruction_report", over=("subtask", "subtasks")),
        "review": One("instance_review", over=("subtask", "subtasks")),
    },
)  # fmt: skip
def reconstruct(
    curated: list[str], decisions: list[str], instances: list[str], reports: list[str], review: list[str],
    settings: ReconstructSettings, config: dict[str, Any], models: Models,
) -> Done:  # fmt: skip
    from h2htalk.instances.reconstruct import ReconstructFiles, reconstruct_to_files

    names = list(dict.fromkeys([settings.generator, *settings.voters]))
    files = [
        ReconstructFiles(key, *map(Path, paths))
        for key, *paths in zip(config["subtasks"], curated, instances, reports, review, strict=True)
    ]
    engines = models.engines(names)
    engines.step("reconstruct_instances", "instances")
    entries = {n: models.entry(n) for n in names}
    made = reconstruct_to_files(files, entries, settings, engines, decisions, config["review"]["store"])
    totals = {key: sum(r[key] for r in made) for key in ("sampled", "kept_after_review", "flagged", "leaked", "failed")}
    return Done(
        f"{len(made)} subtasks; {totals['sampled']} sampled, {totals['kept_after_review']} kept, "
        f"{totals['flagged']} flagged, {totals['leaked']} leaked, {totals['failed']} failed"
    )


def _instance_source(scope, labels):
    """The file the subtask's instances come from (`instances.source`): yours, or the reconstructed ones; none
    for the demo set."""
    from h2htalk.instances.sources import source_file

    file = source_file(scope.config["instances"], labels["subtask"], scope.results)
    return [file] if file else []  # none: the demo set, from the subtask's definition


@stage(
    "instances", "write one subtask's validated instance set (instances.source)",
    uses=("subtasks",), planned=True, reads=("instances",), jobs=Over(subtask=lambda run: run.subtasks),
    inputs={"source": Paths(_instance_source)}, outputs={"instances": One("instances")},
)  # fmt: skip
def instances(subtask: str, source: list[str], instances: str, config: dict[str, Any]) -> Done:
    from h2htalk.instances.sources import write_instances

    limit, file = config["instances"]["limit"], source[0] if source else None
    count = write_instances(subtask, instances, file=file, limit=limit)
    limited = f", the first {limit}" if limit is not None else ""
    return Done(f"{count} instances ({file or 'demo set'}{limited})", subtask, instances)


@stage(
    "instances_review", "the reconstruction's review queues in one CSV", targets="reconstruct",
    in_all=lambda config: config["instances"]["source"] == "reconstructed",
    inputs={"queues": One("instance_review", over=("subtask", "subtasks"))},
    outputs={"review": One("instance_review_all")},
)  # fmt: skip
def instances_review(queues: list[str], review: str) -> Done:
    from h2htalk.io import join_csv

    return Done(f"{join_csv(queues, review)} rows", out=review)


@stage(
    "prompt_messages", "render the chat messages of one subtask's instances",
    uses=("prompts", "subtasks"), planned=True,
    command="prompts", targets="prompts",
    jobs=Over(variant=lambda run: run.variants, subtask=lambda run: run.subtasks),
    cells=lambda run, w: [Cell("-", w["variant"], w["subtask"])],
    inputs={"instances": Each("references")}, outputs={"prompts": Each("prompts")},
)  # fmt: skip
def prompts(variant: str, subtask: str, instances: list[str], prompts: list[str]) -> Done:
    from h2htalk.instance_schema import read_instances
    from h2htalk.prompts.render import write_prompts

    (out,) = prompts
    count = write_prompts(read_instances(instances[0]), variant, out)
    return Done(f"{count} prompts", subject=f"{subtask} ({variant})", out=out)


def _scenarios(scope, labels):
    """The study's scenario file, where the config names one (the shipped set otherwise)."""
    from h2htalk.studies.data import scenario_file

    file = scenario_file(scope.config["studies"], labels["study"])
    return [file] if file else []


@stage(
    "study_inputs", "prompts and items of a study (safety or instruction_following)",
    uses=("studies",), planned=True,
    reads=("studies.sample", "studies.safety_scenarios", "studies.instruction_following"),
    # the study judge reads the first variant's items, whatever the run's variants
    jobs=Over(study=lambda run: STUDIES, variant=lambda run: (*run.variants, VARIANTS[0])),
    inputs={"scenarios": Paths(_scenarios)},
    outputs={"prompts": One("study_prompts"), "study_items": One("study_items")},
)  # fmt: skip
def study_inputs(
    study: str, variant: str, scenarios: list[str], prompts: str, study_items: str, sample: StudySample
) -> Done:
    from h2htalk.studies.data import write_study_inputs

    file = scenarios[0] if scenarios else None
    count = write_study_inputs(
        study, variant, Path(prompts), Path(study_items), file, sample=sample.size(study), seed=sample.seed
    )
    return Done(f"{count} items", subject=f"{study} ({variant})", out=Path(prompts))


@stage(
    "provision_model", "assemble or download a GGUF model file and check its SHA-256", reads=REGISTRY,
    jobs=Over(model=models_in_use), entries=lambda s, w: [w["model"]], env="generation", memory_mb=1000,
    minutes=60, outputs={"gguf": One("model_file")},
)  # fmt: skip
def provision_model(model: str, gguf: str, models: Models) -> Done:
    from h2htalk.generation.provision import provision_gguf
    from h2htalk.llm.engines import engine_of

    spec = models.entry(model, pinned=False)
    if not engine_of(spec).needs_model_file:
        raise H2HTalkError(f"model {model!r}: engine {spec['engine']} needs no model file")
    record = provision_gguf(spec["gguf"], gguf)
    return Done(f"{record['size']} bytes, sha256 {record['sha256'][:12]}", subject=model, out=gguf)
