"""The stages that make what models are asked: the instances' prompts, the studies' inputs, and the model files
(the instances themselves are ``h2htalk.instances``')."""

from __future__ import annotations

from pathlib import Path

from h2htalk.errors import H2HTalkError
from h2htalk.layout import Cell
from h2htalk.settings import STUDIES, VARIANTS, StudySample
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import REGISTRY, models_in_use
from h2htalk.stages.spec import Done, Each, Models, One, Over, Paths


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
