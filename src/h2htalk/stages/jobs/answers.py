"""The stages that call models: the reconstruction, the answers, the rubric judge, the studies and the judges'
ladders; and what J is made of (the review gate, people's scores, the review queue)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from h2htalk.errors import H2HTalkError
from h2htalk.stages.job import Done, Job


def reconstruct(job: Job) -> Done:
    from h2htalk.instances.reconstruct import ReconstructFiles, reconstruct_to_files
    from h2htalk.settings import ReconstructSettings

    options = ReconstructSettings.from_config(job.config)
    names = list(dict.fromkeys([options.generator, *options.voters]))
    subtasks = job.config["subtasks"]
    out = job.outputs
    files = [
        ReconstructFiles(key, Path(curated), Path(instances), Path(report), Path(review))
        for key, curated, instances, report, review in zip(
            subtasks, job.inputs["curated"], out["instances"], out["reports"], out["review"], strict=True
        )
    ]
    engines = job.engines(names)
    engines.step("reconstruct", "instances")
    decisions, store = job.inputs["decisions"], job.config["review"]["store"]
    reports = reconstruct_to_files(files, {n: job.entry(n) for n in names}, options, engines, decisions, store)
    counts = ("sampled", "kept_after_review", "flagged", "leaked", "failed")
    totals = {key: sum(r[key] for r in reports) for key in counts}
    return Done(
        f"{len(reports)} subtasks; {totals['sampled']} sampled, {totals['kept_after_review']} kept, "
        f"{totals['flagged']} flagged, {totals['leaked']} leaked, {totals['failed']} failed"
    )


def generate(job: Job) -> Done:
    """A model's (or a baseline's) answers to every Table 2 cell."""
    from h2htalk.llm.engines import engine_of

    model = job.labels["model"]
    baseline = engine_of(job.entry(model)).answers_without_model
    if baseline != (job.stage.where != "model"):
        other = "baseline-answers" if baseline else "generate"
        raise H2HTalkError(f"{model} is {'a baseline' if baseline else 'a model'}: its answers are h2htalk {other}'s")
    engines = job.engines([model] if job.stage.where == "model" else [])  # a baseline starts no engine
    run = _answer(job, engines, "responses", "summary", for_studies=False)
    return Done(answered(run), subject=model, out=f"{len(job.cells)} files")


def _answer(job: Job, engines: Any, responses: str, summary: str, *, for_studies: bool) -> dict[str, Any]:
    """Answer the job's cells with its model (its engine started once); the run summary."""
    from h2htalk.generation.generate import PromptFile, generate_model
    from h2htalk.settings import GenerationSettings

    model = job.labels["model"]
    cells = [c for c in job.cells if c.is_study == for_studies]
    files = [
        PromptFile(c.variant, c.task, Path(job.each("prompts", c)), Path(job.each(responses, c))) for c in cells
    ]
    instances = {c.task: Path(job.each("instances", c)) for c in cells} if "instances" in job.stage.inputs else {}
    settings = GenerationSettings.from_config(job.config, for_studies=for_studies)
    engines.step("generate studies" if for_studies else "generate", model)
    spec = job.entry(model)
    return generate_model(spec, files, settings, engines, instances=instances, summary_path=job.output(summary))


def rubric_judge(job: Job) -> Done:
    from h2htalk.judge.run import JudgeFiles, judge_files
    from h2htalk.settings import JudgeSettings

    judge, model = JudgeSettings.from_config(job.config), job.labels["model"]
    kinds = ("instances", "prompts", "generations", "verdicts")
    files = [JudgeFiles(c.variant, c.task, *(Path(job.each(kind, c)) for kind in kinds)) for c in job.cells]
    engines = job.engines([judge.model])
    engines.step("rubric judge", model)
    run = judge_files(job.entry(judge.model), model, files, judge, engines, summary_path=job.out_path("summary"))
    return Done(answered(run, "verdicts"), subject=f"{model} by {judge.model}", out=f"{len(files)} files")


def study(job: Job) -> Done:
    """The studies' answers of the job's model, then the study judge's verdicts on them, in one job. Where the judge
    is the model itself (the laptop), one engine serves both; a judge of its own starts after the model's engine has
    stopped, so that two engines never hold a job's GPUs at once."""
    from h2htalk.llm.engines import engine_of
    from h2htalk.settings import StudyJudgeSettings
    from h2htalk.studies.run import judge_studies

    model, judge = job.labels["model"], StudyJudgeSettings.from_config(job.config)
    study_models = job.run.study_models
    if model not in study_models:
        raise H2HTalkError(f"model {model!r} answers no study (studies.models: {', '.join(study_models)})")
    if engine_of(job.entry(model)).answers_without_model:
        raise H2HTalkError(f"model {model!r} is a baseline: baselines answer no study")
    engines = job.engines(list(dict.fromkeys([model, judge.model])))
    shared = [job.entry(judge.model)] if judge.model == model else []
    with engines.sharing(shared) as shared_engines:
        answers = _answer(job, shared_engines, "responses", "summary", for_studies=True)
        shared_engines.step("study judge", model)
        items = [Path(p) for p in job.inputs["study_items"]]
        pairs = [(Path(job.each("responses", c)), Path(job.each("verdicts", c))) for c in job.cells]
        verdicts = judge_studies(
            job.entry(judge.model), model, items, pairs, judge, shared_engines,
            summary_path=job.out_path("judge_summary"),
        )  # fmt: skip
    return Done(
        f"{answered(answers)}; {answered(verdicts, 'verdicts')}", subject=f"{model} judged by {judge.model}",
        out=f"{2 * len(job.cells)} files",
    )  # fmt: skip


def combine_j(job: Job) -> Done:
    from h2htalk.judge.combine import combine_to_files, read_human_scores
    from h2htalk.settings import BootstrapSettings, GateSettings, ReviewSettings

    config, run = job.config, job.run
    gate, bootstrap = GateSettings.from_config(config), BootstrapSettings.from_config(config)
    review = ReviewSettings.from_config(config)
    human = read_human_scores(job.inputs["human"], job.cells, job.results, run.judged_models, config["review"]["store"])
    results = [combine_to_files(cell, job.results, gate, bootstrap, human, review) for cell in job.cells]
    return Done(
        f"{len(results)} cells, {sum(r['n'] for r in results)} items ({review.mode} mode); "
        f"{sum(r['to_review'] for r in results)} to review, {sum(r['human_items'] for r in results)} rated by "
        f"people, {sum(r['missing'] for r in results)} missing",
        subject=job.labels["model"],
    )


def review_queue(job: Job) -> Done:
    from h2htalk.judge.combine import write_review_queue

    out = job.out_path("queue")
    count = write_review_queue([Path(p) for p in job.inputs["j_items"]], out)
    return Done(f"{count} items to review", out=out)


def judge_ladder(job: Job) -> Done:
    from h2htalk.reliability.run import role_texts, run_ladder
    from h2htalk.settings import JUDGE_ROLES, JudgeSettings, ReliabilitySettings, StudyJudgeSettings

    config, run, model = job.config, job.run, job.labels["model"]
    roles = run.judges.get(model)
    if not roles:
        raise H2HTalkError(f"{model!r} judges nothing in this run (rubric_judge.model, study_judge.model)")
    reliability = ReliabilitySettings.from_config(config)
    names = config["data"]["curate"]["persona_names"]
    texts = role_texts(roles, run.judged_subtasks, run.variants[0], job.results, names, reliability.seed)
    rubric, study_judge = JudgeSettings.from_config(config), StudyJudgeSettings.from_config(config)
    judges = {role: rubric if role == JUDGE_ROLES[0] else study_judge for role in roles}
    found = run_ladder(job.entry(model), roles, texts, judges, reliability, job.engines([model]), job.results)
    return Done(answered(found, "verdicts"), subject=f"{model} ({', '.join(roles)})")


def answered(run: dict[str, Any], noun: str = "answers") -> str:
    """``66 answers (12 cached, 0 failed)``, from a run summary of the model-call seam."""
    from h2htalk.llm.engines import ENGINES

    if ENGINES[run["engine"]].answers_without_model:
        return f"{run['requests']} {noun} (a baseline: no model)"
    cached = run["requests"] - run["sent"]
    return f"{run['requests']} {noun} ({cached} cached, {run.get('failed', 0)} failed)"
