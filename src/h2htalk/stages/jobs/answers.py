"""The stages that ask models under test: their answers to Table 2's cells (a baseline's without a model), and
the studies' answers with the study judge's verdicts on them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from h2htalk.errors import H2HTalkError
from h2htalk.settings import VARIANTS
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import FIRST, REGISTRY, judge_models
from h2htalk.stages.spec import Done, Each, Job, One, Over, Paths
from h2htalk.stages.steps import step


def _study_items(scope, labels):
    """Both studies' items of the first variant (what the study judge reads, whatever the run's variants)."""
    from h2htalk.settings import STUDIES

    return [scope.results.references(VARIANTS[0], study) for study in STUDIES]


@stage(
    "generate", "answer every Table 2 cell of one model (its engine started once)", priority=FIRST, planned=True,
    targets="generations",
    reads=(*REGISTRY, "generation", "subtasks", "variants"), jobs=Over(model=lambda run: run.models),
    cells=lambda run, w: run.benchmark(w["model"]), starts=lambda s, w: [w["model"]], where="model",
    env="generation", options=("engine",),
    inputs={"prompts": Each("prompts")},
    outputs={"responses": Each("generations"), "summary": One("generation_run")},
)  # fmt: skip
@stage(
    "baseline_answers", "answer every Table 2 cell of one baseline from the instances (no model)", priority=FIRST,
    planned=True, targets="generations",
    reads=(*REGISTRY, "generation", "subtasks", "variants"), jobs=Over(model=lambda run: run.baselines),
    cells=lambda run, w: run.benchmark(w["model"]), entries=lambda s, w: [w["model"]], env="generation",
    memory_mb=1000, minutes=10,
    inputs={"prompts": Each("prompts"), "instances": Each("references")},
    outputs={"responses": Each("generations"), "summary": One("generation_run")},
)  # fmt: skip
def generate(job: Job) -> Done:
    """A model's (or a baseline's) answers to every Table 2 cell."""
    from h2htalk.llm.engines import engine_of

    model = job.labels["model"]
    baseline = engine_of(job.entry(model)).answers_without_model
    if baseline != (job.stage.where != "model"):
        other = "baseline-answers" if baseline else "generate"
        raise H2HTalkError(f"{model} is {'a baseline' if baseline else 'a model'}: its answers are h2htalk {other}'s")
    engines = job.engines([model] if job.stage.where == "model" else [])  # a baseline starts no engine
    run = answer(job, engines, "responses", "summary", for_studies=False)
    return Done(answered(run), subject=model, out=f"{len(job.cells)} files")


def answer(job: Job, engines: Any, responses: str, summary: str, *, for_studies: bool) -> dict[str, Any]:
    """Answer the job's cells with its model (its engine started once); the run summary."""
    from h2htalk.generation.generate import PromptFile, generate_model
    from h2htalk.settings import GenerationSettings

    model = job.labels["model"]
    cells = [c for c in job.cells if c.is_study == for_studies]
    files = [PromptFile(c.variant, c.task, Path(job.each("prompts", c)), Path(job.each(responses, c))) for c in cells]
    instances = {c.task: Path(job.each("instances", c)) for c in cells} if "instances" in job.stage.inputs else {}
    settings = GenerationSettings.from_config(job.config, for_studies=for_studies)
    engines.step(step(job.stage.name, "answers") if for_studies else job.stage.name, model)
    spec = job.entry(model)
    return generate_model(spec, files, settings, engines, instances=instances, summary_path=job.output(summary))


@stage(
    "study", "answer both studies' conversations with one model, then judge them (an engine used by both starts once)",
    uses=("studies",), planned=True,
    reads=(
        *REGISTRY, "generation", "-generation.max_new_tokens", "studies.max_new_tokens", "studies.models",
        "models", "variants", "study_judge",
    ),
    jobs=Over(model=lambda run: run.study_models), cells=lambda run, w: run.studies(w["model"]),
    starts=lambda s, w: list(dict.fromkeys([w["model"], *judge_models(s, "study_judge")])),
    where="model", env="generation", options=("engine", "study_judge"),
    inputs={"prompts": Each("prompts"), "study_items": Paths(_study_items)},
    outputs={
        "responses": Each("generations"), "summary": One("study_generation_run"),
        "verdicts": Each("verdicts"), "judge_summary": One("study_judge_run"), "sample": Each("judge_sample"),
    },
)  # fmt: skip
def study(job: Job) -> Done:
    """The studies' answers of the job's model, then the study judge's verdicts on them, in one job (in cascade mode
    the cheap judge's on every turn, then the role's own judge's on each cell's sample). Where a judge is the model
    itself (the laptop), one engine serves both; a judge of its own starts after the model's engine has stopped, so
    that two engines never hold a job's GPUs at once."""
    from h2htalk.io import write_jsonl_atomic
    from h2htalk.judge.cascade import answered_ids, cascade_sample
    from h2htalk.llm.engines import engine_of
    from h2htalk.settings import CascadeSettings, StudyJudgeSettings
    from h2htalk.studies.run import judge_studies

    model, judge = job.labels["model"], StudyJudgeSettings.from_config(job.config)
    cascade = CascadeSettings.from_config(job.config, "study_judge")
    every = cascade.every_item_judge(judge)
    study_models = job.run.study_models
    if model not in study_models:
        raise H2HTalkError(f"model {model!r} answers no study (studies.models: {', '.join(study_models)})")
    if engine_of(job.entry(model)).answers_without_model:
        raise H2HTalkError(f"model {model!r} is a baseline: baselines answer no study")
    judges = cascade.judge_models(judge)
    engines = job.engines(list(dict.fromkeys([model, *judges])))
    shared = [job.entry(model)] if model in judges else []
    with engines.sharing(shared) as shared_engines:
        answers = answer(job, shared_engines, "responses", "summary", for_studies=True)
        shared_engines.step(step(job.stage.name, "judge"), model)
        items = [Path(p) for p in job.inputs["study_items"]]
        pairs = [(Path(job.each("responses", c)), Path(job.each("verdicts", c))) for c in job.cells]
        summary = job.out_path("judge_summary")
        verdicts = judge_studies(
            job.entry(every.model), model, items, pairs, every, shared_engines, summary_path=summary
        )  # fmt: skip
        facts = f"{answered(answers)}; {answered(verdicts, 'verdicts')}"
        if cascade.on:
            sample = [(Path(job.each("responses", c)), Path(job.each("sample", c))) for c in job.cells]
            only = {
                responses: cascade_sample(c, answered_ids(responses), cascade)
                for (responses, _), c in zip(sample, job.cells, strict=True)
            }
            shared_engines.step(step(job.stage.name, "judge.sample"), model)
            strong = judge_studies(job.entry(judge.model), model, items, sample, judge, shared_engines, only=only)
            add_to_summary(summary, {"sample": strong})
            facts += f"; the sample: {answered(strong, 'verdicts')} by {judge.model}"
        else:
            for cell in job.cells:
                write_jsonl_atomic(job.each("sample", cell), [])
    return Done(facts, subject=f"{model} judged by {' and '.join(judges)}", out=f"{3 * len(job.cells)} files")


def add_to_summary(path: Path, more: dict[str, Any]) -> None:
    from h2htalk.io import read_json, write_json_atomic

    write_json_atomic(path, {**read_json(path), **more})


def answered(run: dict[str, Any], noun: str = "answers") -> str:
    """``66 answers (12 cached, 0 failed)``, from a run summary of the model-call seam."""
    from h2htalk.llm.engines import ENGINES

    if ENGINES[run["engine"]].answers_without_model:
        return f"{run['requests']} {noun} (a baseline: no model)"
    cached = run["requests"] - run["sent"]
    return f"{run['requests']} {noun} ({cached} cached, {run.get('failed', 0)} failed)"
