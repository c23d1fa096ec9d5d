"""The stage table: every stage of the workflow, declared once.

Its order is the order of the pipeline (the plan runs the stages that call models in it, and the reference in
``docs/stages.md`` lists them in it). A stage's ``run`` names the function that does its work; everything else is
what the workflow, the command line, the freshness check and the plan read from it.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from h2htalk.config import default_config
from h2htalk.layout import Cell, Layout
from h2htalk.ratings import INSTANCE_DECISIONS, NEED_VERDICTS, REVIEW_SCORES, SAFETY_RATINGS
from h2htalk.settings import LADDER_PARTS, STUDIES, VARIANTS
from h2htalk.stages.spec import Cells, Each, Figure, One, Over, Paths, Scope, Stage, bundle, figure_files
from h2htalk.subtasks import SUBTASK_KEYS, get_subtask

REGISTRY = ("model_registry", "model_registry_overlays")  # the registry: its file and your overlays of it
CELLS = ("models", "baselines", "rubric_judge.baselines", "subtasks", "variants", "scoring.embedders")
RUN_NOTES = ("instances.source", "instances.limit", "subtasks")  # what every table says about the run
GATE = ("rubric_judge.alpha", "rubric_judge.tau", "rubric_judge.max_spread", "rubric_judge.gate_on")
JUDGE_CALLS = ("rubric_judge", *(f"-{key}" for key in GATE), "-rubric_judge.baselines")  # what a judge call reads
JUDGE_MODE_KEYS = ("mode", "model", "cheap_model", "sample_per_cell", "sample_seed")  # who judged: every item, a sample
REVIEW_MODE = ("review.mode", "review.sample_per_cell", "review.sample_seed")
TABLE2 = (
    *CELLS, *RUN_NOTES, *REGISTRY, "paper.table2", "tables", "instances.reconstruct.generator",
    "instances.reconstruct.voters", "review.imports", "review.store", "scoring.bootstrap",
    "judge_reliability.every_run", *(f"rubric_judge.{key}" for key in JUDGE_MODE_KEYS),
)  # fmt: skip
EXPORT = (*CELLS, *RUN_NOTES, *REGISTRY, "tables")
JOBS = "h2htalk.stages.jobs"
# Job priorities: Table 2's answers and scores, and the tables that need no judge, before the judge and the studies
FIRST, EARLY = 20, 10


def _paths(function):  # a Paths spec from a function of (scope, labels)
    return Paths(function)


def _config_files(key: str) -> Paths:
    """The file a config key names, or the files it lists (review imports, people's ratings)."""

    def files(scope: Scope, labels: dict) -> list[str]:
        node = scope.config
        for part in key.split("."):
            node = node[part]
        return [node] if isinstance(node, str) else list(node)

    files.__doc__ = f"the file(s) `{key}` names"
    return Paths(files)


def _canary_histories(scope, labels):
    """The drift canary's history of every judge role (what each run's judge said), kept across runs."""
    return [str(Path(scope.results.path("canary_history", role="-")).parent.parent)]


def _upstream_files(scope, labels):
    """The 11 files of the pinned upstream release, `results/data/upstream/{file}`."""
    return [scope.results.path("upstream", file=get_subtask(key).upstream_file) for key in SUBTASK_KEYS]


def _upstream_file(scope, labels):
    """The subtask's upstream file, `results/data/upstream/{file}`."""
    return [scope.results.path("upstream", file=get_subtask(labels["subtask"]).upstream_file)]


def _study_items(scope, labels):
    """Both studies' items of the first variant (what the study judge reads, whatever the run's variants)."""
    return [scope.results.references(VARIANTS[0], study) for study in STUDIES]


def _table2_items(scope, labels):
    """The per-item values behind every Table 2 cell of a model under test: J items where judged, S items
    elsewhere."""
    return scope.run.table2_items(scope.results).values()


def _models_in_use(run):
    """Every model a run may start: the models under test, the judges and the reconstruction's models."""
    config = run.config
    reconstruct = config["instances"]["reconstruct"]
    judges = [config["rubric_judge"]["model"], config["study_judge"]["model"], *run.ladder_judges]  # cheap, panel
    return [*run.models, *judges, reconstruct["generator"], *reconstruct["voters"]]


def _judge_models(scope, section):
    """The judges a judging job starts: the role's model, and in cascade mode the cheap judge first."""
    from h2htalk.judge.cascade import judge_models
    from h2htalk.settings import CascadeSettings, JudgeSettings, StudyJudgeSettings

    judge = (JudgeSettings if section == "rubric_judge" else StudyJudgeSettings).from_config(scope.config)
    return judge_models(judge, CascadeSettings.from_config(scope.config, section))


def _judged_cells(run, labels):
    """every judged cell of the run"""
    return [c for m in run.judged_models for c in run.judged(m)]


def _study_cells(*studies):
    def cells(run, labels):
        return [c for m in run.study_models for c in run.studies(m, studies or STUDIES)]

    cells.__doc__ = f"every study model's {' and '.join(studies or STUDIES)} cells"
    return cells


def _summaries(scope, labels):
    """The summary of every Table 2 cell: J where the rubric judge is mixed in, S elsewhere."""
    return scope.run.table2_summaries(scope.results)


def _instance_source(scope, labels):
    """The file the subtask's instances come from (`instances.source`): yours, or the reconstructed ones; none
    for the demo set."""
    from h2htalk.instances.sources import source_file

    file = source_file(scope.config["instances"], labels["subtask"], scope.results)
    return [file] if file else []  # none: the demo set, from the subtask's definition


def _scenarios(scope, labels):
    """The study's scenario file, where the config names one (the shipped set otherwise)."""
    from h2htalk.studies.data import scenario_file

    file = scenario_file(scope.config["studies"], labels["study"])
    return [file] if file else []


def _registry_files(scope, labels):
    """The model registry and your overlays of it (`model_registry`, `model_registry_overlays`)."""
    from h2htalk.config import registry_files

    return registry_files(scope.config)


def _embedder_prefetched(scope, labels):
    """The embedder's prefetch record, where its weights come from the Hugging Face hub."""
    from h2htalk.prefetch import embedder_downloads

    downloads = embedder_downloads(scope.config["embedders"][labels["embedder"]])
    return [scope.results.path("prefetched_embedder", embedder=labels["embedder"])] if downloads else []


def _reconstructors(scope, labels):
    """The reconstruction's generator and voters."""
    reconstruct = scope.config["instances"]["reconstruct"]
    return list(dict.fromkeys([reconstruct["generator"], *reconstruct["voters"]]))


def _item_files(scope, labels):
    """Every cell's summary and per-item file (scores, J, the studies' verdicts)."""
    from h2htalk.export.items import item_files
    from h2htalk.export.summaries import summary_paths

    return [*summary_paths(scope.run, scope.results), *item_files(scope.run, scope.results)]


def _export_summaries(scope, labels):
    """Every cell's summary (Table 2's, and the studies')."""
    from h2htalk.export.summaries import summary_paths

    return summary_paths(scope.run, scope.results)


def _curated_for_decisions(scope, labels):
    """The curated references, which people's instance decisions name, when there are decisions to read."""
    from h2htalk.tables.human_review import reads_decisions

    if not reads_decisions(dict(scope.config)):
        return []
    return [scope.results.path("curated", subtask=s) for s in scope.run.subtasks]


def _rubric_canary(scope, labels):
    """Table 2 notes a changed rubric judge from its drift canary, when every run checks it."""
    if not (scope.config["judge_reliability"]["every_run"] and scope.run.judged_subtasks):
        return []
    return [scope.results.path("judge_canary", model=scope.config["rubric_judge"]["model"], part="rubric")]


def _judges_ladders(scope, part):
    """The ladders of ``part`` of the judges of this run's cells (the cheap judge's too in cascade mode)."""
    return [scope.results.path("judge_ladder", model=m, part=part) for m, roles in scope.run.judges.items()
            if set(roles) & set(LADDER_PARTS[part])]  # fmt: skip


def _rubric_ladders(scope, labels):
    """The rubric judges' sanity ladders, which the tables of their verdicts show (none: no Level I-III cell)."""
    return _judges_ladders(scope, "rubric")


def _study_ladders(scope, labels):
    """The studies' judges' ladders, which Table 3 and Figure 7 show when every run makes the card (else they say
    where the ladder is: the card's target)."""
    return _judges_ladders(scope, "studies") if scope.config["judge_reliability"]["every_run"] else []


def _ladder_jobs(run):
    """Each judge model's ladder parts: the rubric part where it is the rubric judge, the studies' where it judges
    a study."""
    return [(model, part) for model, roles in run.ladder_judges.items() for part in LADDER_PARTS
            if set(roles) & set(LADDER_PARTS[part])]  # fmt: skip


def _ladders(kind):
    def files(scope, labels):
        return [scope.results.path(kind, model=model, part=part) for model, part in _ladder_jobs(scope.run)]

    files.__doc__ = f"`{kind}` of every judge model's ladder part"
    return files


def _ladder_inputs(scope, labels):
    """What the rubric judge's ladder is made of: the judged subtasks' instances and one variant's prompts."""
    run = scope.run
    rubric = labels["part"] == "rubric" and "rubric" in run.ladder_judges.get(labels["model"], ())
    if not (rubric and run.judged_subtasks):
        return []
    return [
        *(scope.results.path("instances", subtask=s) for s in run.judged_subtasks),
        *(scope.results.prompts(run.variants[0], s) for s in run.judged_subtasks),
    ]


def _floor_items(scope, labels):
    """The chance floor's (random-reference baseline's) per-item scores, per embedder and subtask."""
    from h2htalk.tables.calibration import FLOOR

    run = scope.run
    return [scope.results.score_items(Cell(FLOOR, run.variants[0], s, e)) for e in run.embedders for s in run.subtasks]


def _plan_inputs(scope, labels):
    """What the plan reads: the curated references (a reconstructed benchmark's) or the instance files, the
    answer caches as they are now, the price and throughput tables."""
    from pathlib import Path

    config, run = scope.config, scope.run
    instances = config["instances"]
    if instances["source"] == "reconstructed":
        sources = [scope.results.path("curated", subtask=s) for s in run.subtasks]
    else:
        sources = [instances["files"][s] for s in run.subtasks if instances["source"] == "file"]
    folders = {
        config["generation"]["cache_dir"], config["rubric_judge"]["cache_dir"], config["study_judge"]["cache_dir"],
        instances["reconstruct"]["cache_dir"],
    }  # fmt: skip
    caches = sorted(str(p) for folder in folders for p in Path(folder).glob("*.sqlite"))
    return [*sources, *caches, config["plan"]["prices"], config["plan"]["throughput"]]


def _figure_names(run):
    from h2htalk.figures import FIGURE_NAMES

    return FIGURE_NAMES.values()


PROVENANCE = One("provenance")


def _plan_reads_what_it_plans(stages: tuple[Stage, ...]) -> tuple[Stage, ...]:
    """The plan runs every planned stage's function, so it reads every key they read (and reruns when one changes)."""
    # (a key a planned stage leaves out of a section is one another planned stage may read)
    planned = [key for stage in stages if stage.planned for key in stage.reads if not key.startswith("-")]

    def widest(keys: list[str]) -> tuple[str, ...]:  # a key under a section read whole is in that section already
        whole = set(keys)
        parts = [key.split(".") for key in dict.fromkeys(keys)]
        return tuple(".".join(p) for p in parts if not any(".".join(p[:n]) in whole for n in range(1, len(p))))

    return tuple(replace(stage, reads=widest([*stage.reads, *planned])) if stage.name == "plan" else stage
                 for stage in stages)  # fmt: skip


STAGES: tuple[Stage, ...] = _plan_reads_what_it_plans((
    # --- data -------------------------------------------------------------------------------------------
    Stage(
        "fetch", f"{JOBS}.data:fetch", "download (or copy) and check the 11 upstream reference files",
        reads=("data", "upstream_dir"), minutes=15, options=("upstream",),
        outputs={
            "manifest": One("manifest"),
            "files": Paths(_upstream_files),
        },
    ),
    Stage(
        "prefetch_model", f"{JOBS}.data:prefetch_model",
        "fetch a model's Hugging Face weights (and LoRA adapter) and record the commit",
        reads=REGISTRY, jobs=Over(model=_models_in_use), entries=lambda s, w: [w["model"]],
        outputs={"record": One("prefetched_model")}, memory_mb=2000, minutes=720,  # a 72B model is about 150 GB
    ),
    Stage(
        "prefetch_embedder", f"{JOBS}.data:prefetch_embedder",
        "fetch an embedder's Hugging Face weights and record the commit",
        reads=("embedders",), jobs=Over(embedder=lambda run: run.embedders),
        outputs={"record": One("prefetched_embedder")}, memory_mb=2000, minutes=60,
    ),
    Stage(
        "curate", f"{JOBS}.data:curate", "curate one fetched upstream file into flagged JSONL",
        uses=("curation",),
        reads=("data",), jobs=Over(subtask=lambda run: run.subtasks), minutes=10, memory_mb=1000,
        inputs={
            "manifest": One("manifest"),
            "upstream": Paths(_upstream_file),
        },
        outputs={"curated": One("curated"), "report": One("curation")},
    ),
    Stage(
        "curation_report", f"{JOBS}.data:curation_report", "combine the curation reports", reads=("subtasks",),
        priority=EARLY,
        inputs={"reports": One("curation", over=("subtask", "subtasks"))},
        outputs={"json": One("curation_report"), "md": One("curation_report_md")},
    ),
    # --- instances and prompts ----------------------------------------------------------------------------
    Stage(
        "reconstruct_instances", f"{JOBS}.answers:reconstruct",
        "rebuild the subtasks' inputs from their references, verified by vote",
        uses=("subtasks",),
        planned=True,
        reads=(
            *REGISTRY, "generation", "instances.reconstruct", "instances.review_imports", "subtasks", "review.store",
        ),
        command="reconstruct", starts=_reconstructors, ratings=(INSTANCE_DECISIONS,), where="model",
        env="generation", options=("engine",),
        inputs={
            "curated": One("curated", over=("subtask", "subtasks")),
            "decisions": _config_files("instances.review_imports"),
        },
        outputs={
            "instances": One("reconstructed", over=("subtask", "subtasks")),
            "reports": One("reconstruction_report", over=("subtask", "subtasks")),
            "review": One("instance_review", over=("subtask", "subtasks")),
        },
    ),
    Stage(
        "instances", f"{JOBS}.data:instances", "write one subtask's validated instance set (instances.source)",
        uses=("subtasks",),
        planned=True,
        reads=("instances",), jobs=Over(subtask=lambda run: run.subtasks),
        inputs={"source": Paths(_instance_source)}, outputs={"instances": One("instances")},
    ),
    Stage(
        "instances_review", f"{JOBS}.data:instances_review", "the reconstruction's review queues in one CSV",
        inputs={"queues": One("instance_review", over=("subtask", "subtasks"))},
        outputs={"review": One("instance_review_all")},
    ),
    Stage(
        "prompt_messages", f"{JOBS}.data:prompts", "render the chat messages of one subtask's instances",
        uses=("prompts", "subtasks"),
        planned=True,
        command="prompts", jobs=Over(variant=lambda run: run.variants, subtask=lambda run: run.subtasks),
        cells=lambda run, w: [Cell("-", w["variant"], w["subtask"])],
        inputs={"instances": Each("references")}, outputs={"prompts": Each("prompts")},
    ),
    Stage(
        "study_inputs", f"{JOBS}.data:study_inputs", "prompts and items of a study (safety or instruction_following)",
        uses=("studies",),
        planned=True,
        reads=("studies.sample", "studies.safety_scenarios", "studies.instruction_following"),
        # the study judge reads the first variant's items, whatever the run's variants
        jobs=Over(study=lambda run: STUDIES, variant=lambda run: (*run.variants, VARIANTS[0])),
        inputs={"scenarios": Paths(_scenarios)},
        outputs={"prompts": One("study_prompts"), "study_items": One("study_items")},
    ),
    # --- answers (the studies' too) ------------------------------------------------------------------------
    Stage(
        "provision_model", f"{JOBS}.data:provision_model",
        "assemble or download a GGUF model file and check its SHA-256", reads=REGISTRY,
        jobs=Over(model=_models_in_use), entries=lambda s, w: [w["model"]], env="generation", memory_mb=1000,
        minutes=60, outputs={"gguf": One("model_file")},
    ),
    Stage(
        "generate", f"{JOBS}.answers:generate", "answer every Table 2 cell of one model (its engine started once)",
        priority=FIRST,
        planned=True,
        reads=(*REGISTRY, "generation", "subtasks", "variants"), jobs=Over(model=lambda run: run.models),
        cells=lambda run, w: run.benchmark(w["model"]), starts=lambda s, w: [w["model"]], where="model",
        env="generation", options=("engine",),
        inputs={"prompts": Each("prompts")},
        outputs={"responses": Each("generations"), "summary": One("generation_run")},
    ),
    Stage(
        "baseline_answers", f"{JOBS}.answers:generate",
        "answer every Table 2 cell of one baseline from the instances (no model)",
        priority=FIRST,
        planned=True,
        reads=(*REGISTRY, "generation", "subtasks", "variants"), jobs=Over(model=lambda run: run.baselines),
        cells=lambda run, w: run.benchmark(w["model"]), entries=lambda s, w: [w["model"]], env="generation",
        memory_mb=1000, minutes=10,
        inputs={"prompts": Each("prompts"), "instances": Each("references")},
        outputs={"responses": Each("generations"), "summary": One("generation_run")},
    ),
    Stage(
        "study", f"{JOBS}.answers:study",
        "answer both studies' conversations with one model, then judge them (an engine used by both starts once)",
        uses=("studies",),
        planned=True,
        reads=(
            *REGISTRY, "generation", "-generation.max_new_tokens", "studies.max_new_tokens", "studies.models",
            "models", "variants", "study_judge",
        ),
        jobs=Over(model=lambda run: run.study_models), cells=lambda run, w: run.studies(w["model"]),
        starts=lambda s, w: list(dict.fromkeys([w["model"], *_judge_models(s, "study_judge")])),
        where="model", env="generation", options=("engine", "judge"),
        inputs={
            "prompts": Each("prompts"),
            "study_items": Paths(_study_items),
        },
        outputs={
            "responses": Each("generations"), "summary": One("study_generation_run"),
            "verdicts": Each("verdicts"), "judge_summary": One("study_judge_run"), "sample": Each("judge_sample"),
        },
    ),
    # --- scores -------------------------------------------------------------------------------------------
    Stage(
        "score", f"{JOBS}.scores:score", "score every Table 2 cell of one model with one embedder",
        priority=FIRST,
        reads=("scoring", "embedders", "subtasks", "variants", *REGISTRY),
        jobs=Over(model=lambda run: run.run_models, embedder=lambda run: run.embedders),
        cells=lambda run, w: run.scoring(w["model"], w["embedder"]), where="embedder", env="metrics",
        memory_mb=8000, minutes=240, options=("scoring",),
        inputs={
            "generations": Each("generations"), "references": Each("references"),
            "prefetched": Paths(_embedder_prefetched),
        },
        outputs={"scored": Each("score_items"), "summaries": Each("score_summary")},
    ),
    Stage(
        "score_studies", f"{JOBS}.scores:score",
        "score the safety study's answers of every study model against the safe references, with one embedder",
        reads=("scoring", "embedders", "variants", "studies.models", "models"),
        jobs=Over(embedder=lambda run: run.embedders), cells=lambda run, w: run.study_scoring(w["embedder"]),
        where="embedder", env="metrics", memory_mb=8000, minutes=60, options=("scoring",),
        inputs={
            "generations": Each("generations"), "references": Each("references"),
            "prefetched": Paths(_embedder_prefetched),
        },
        outputs={"scored": Each("score_items"), "summaries": Each("score_summary")},
    ),
    # --- the judges and people ---------------------------------------------------------------------------
    Stage(
        "rubric_judge", f"{JOBS}.answers:rubric_judge",
        "rubric-judge one model's itinerary plans (the judge's engine started once; in cascade mode the cheap judge's"
        " on every item, then the role's own judge's on each cell's sample)",
        uses=("judge", "subtasks"),
        planned=True,
        reads=(*REGISTRY, "generation", *JUDGE_CALLS, "subtasks", "variants"),
        jobs=Over(model=lambda run: run.judged_models if run.judged_subtasks else ()),
        cells=lambda run, w: run.judged(w["model"]), starts=lambda s, w: _judge_models(s, "rubric_judge"),
        where="model", env="generation", options=("engine", "judge"),
        inputs={"instances": Each("references"), "prompts": Each("prompts"), "generations": Each("generations")},
        outputs={"verdicts": Each("judge_samples"), "sample": Each("judge_sample"), "summary": One("judge_run")},
    ),
    Stage(
        "judge_ladder", f"{JOBS}.answers:judge_ladder",
        "one judge model's sanity ladder and drift canary, as the rubric judge or as the studies' judges (one part a"
        " job: Table 2 shows the rubric part in every run, the judges' card reads both)",
        uses=("judge", "studies", "subtasks"),
        planned=True,
        reads=(
            *REGISTRY, "generation", *JUDGE_CALLS, "study_judge", "subtasks", "variants", "data.curate.persona_names",
            "judge_reliability.seed", "judge_reliability.ladder", "judge_reliability.canary", "judge_reliability.panel",
        ),
        jobs=Over(_ladder_jobs, model=str, part=str), starts=lambda s, w: [w["model"]], where="model",
        env="generation",
        options=("engine",),
        inputs={"rubric": Paths(_ladder_inputs)},
        outputs={"ladder": One("judge_ladder"), "canary": One("judge_canary"), "summary": One("judge_ladder_run")},
        keeps={"canary_history": Paths(_canary_histories)},
    ),
    Stage(
        "combine_j", f"{JOBS}.answers:combine_j",
        "J from S and the judge (corrected on the role's own judge's sample in cascade mode), the review gate or"
        " sample, people's scores",
        reads=(
            *GATE, "scoring.bootstrap", "review.imports", "review.store", *REVIEW_MODE, "subtasks", "variants",
            "models", "baselines", "rubric_judge.baselines", *(f"rubric_judge.{key}" for key in JUDGE_MODE_KEYS),
        ),
        jobs=Over(model=lambda run: run.judged_models if run.judged_subtasks else (),
                  embedder=lambda run: run.embedders),
        cells=lambda run, w: [c.scored_by(w["embedder"]) for c in run.judged(w["model"])],
        ratings=(REVIEW_SCORES,), ratings_of_model=True, env="metrics", memory_mb=1000, minutes=10,
        options=("bootstrap",),
        inputs={
            "scores": Each("score_items"), "judgments": Each("judge_samples"), "sample": Each("judge_sample"),
            "human": _config_files("review.imports"),
        },
        outputs={"scored": Each("j_items"), "summaries": Each("j_summary")},
    ),
    Stage(
        "review_queue", f"{JOBS}.answers:review_queue",
        "collect the items sent to people (gated, or sampled) into one CSV",
        reads=("models", "baselines", "rubric_judge.baselines", "scoring.embedders", "subtasks", "variants"),
        cells=lambda run, w: [c.scored_by(run.embedder) for c in _judged_cells(run, w)], env="metrics",
        inputs={"j_items": Each("j_items")}, outputs={"queue": One("review_queue")},
    ),
    # --- provenance and tables ----------------------------------------------------------------------------
    Stage(
        "provenance", f"{JOBS}.tables:provenance", "write the run's provenance (git, config, data, versions, hardware)",
        reads=("*",), options=("root",), inputs={"manifest": One("manifest")}, outputs={"provenance": PROVENANCE},
    ),
    Stage(
        "table1", f"{JOBS}.tables:table1", "Table 1 (.csv, .md, .tex) from the curation reports", reads=("subtasks",),
        priority=EARLY,
        env="figures", report=("csv",),
        inputs={"provenance": PROVENANCE, "reports": One("curation", over=("subtask", "subtasks"))},
        outputs=figure_files("table1", csv=".csv", md=".md", tex=".tex"),
    ),
    Stage(
        "table2_partial", f"{JOBS}.tables:table2_partial",
        "Table 2 from the scores alone, before the judge: its judged cells pending, every other cell final",
        reads=(*CELLS, *RUN_NOTES, *REGISTRY, "tables"), cells=lambda run, w: run.table2(), priority=EARLY,
        env="figures", memory_mb=1000, minutes=10,
        inputs={"provenance": PROVENANCE, "summaries": Each("score_summary"), "registry": Paths(_registry_files)},
        outputs=figure_files("table2_partial", csv=".csv", md=".md"),
    ),
    Stage(
        "table2_pairs", f"{JOBS}.tables:table2_pairs",
        "Table 2's paired comparisons, rank intervals and detectable differences, and the rank figure",
        reads=TABLE2, entries=lambda s, w: list(s.run.models), where="cpu", env="figures", memory_mb=2000,
        minutes=20, options=("bootstrap",), report=("csv", "figure"),
        inputs={
            "provenance": PROVENANCE, "scores": Paths(_table2_items),
            "registry": Paths(_registry_files),
        },
        outputs={
            **figure_files("table2_pairs", csv=".csv"),
            "ranks": Figure("table2_ranks", ".csv"), "figure": Figure("table2_ranks", ".png"),
        },
    ),
    Stage(
        "table2", f"{JOBS}.tables:table2", "Table 2, its heatmap, the paper comparison and audit", reads=TABLE2,
        entries=lambda s, w: list(s.run.run_models), ratings=(REVIEW_SCORES,), env="figures", memory_mb=1000,
        minutes=10, options=("bootstrap",), report=("csv", "heatmap"),
        inputs={
            "provenance": PROVENANCE, "summaries": Paths(_summaries), "registry": Paths(_registry_files),
            "paper": _config_files("paper.table2"), "review": One("review_queue"),
            "pairs": Figure("table2_pairs", ".csv"), "ranks": Figure("table2_ranks", ".csv"),
            "judge_samples": Cells("judge_samples", _judged_cells),
            "human": _config_files("review.imports"), "canary": Paths(_rubric_canary),
            "ladders": Paths(_rubric_ladders),
        },
        outputs=figure_files(
            "table2", csv=".csv", md=".md", tex=".tex", heatmap="_heatmap.png", vs_paper="_vs_paper.csv",
            audit="_paper_audit.csv",
        ),
    ),
    Stage(
        "table3", f"{JOBS}.tables:table3", "Table 3: the SAP ablation with paired bootstrap CIs and the paper's rows",
        reads=("scoring", "studies.models", "studies.human_ratings", "paper.table3", "models", "variants",
               "review.store", "judge_reliability.every_run", *RUN_NOTES,
               *(f"study_judge.{key}" for key in JUDGE_MODE_KEYS)),
        cells=lambda run, w: [c.scored_by(run.embedder) for c in _study_cells("safety")(run, w)],
        ratings=(SAFETY_RATINGS,), env="figures", memory_mb=1000, minutes=10, options=("bootstrap",), report=("csv",),
        inputs={
            "provenance": PROVENANCE, "scores": Each("score_items"), "verdicts": Each("verdicts"),
            "sample": Each("judge_sample"), "paper": _config_files("paper.table3"),
            "human": _config_files("studies.human_ratings"), "ladders": Paths(_study_ladders),
        },
        outputs=figure_files("table3", csv=".csv", md=".md", tex=".tex"),
    ),
    Stage(
        "agreement", f"{JOBS}.tables:agreement",
        "Krippendorff's alpha between people and between the judges and people",
        reads=(
            *CELLS, *RUN_NOTES, "review.imports", "review.store", "studies.models", "studies.human_ratings",
            "instances.review_imports", "scoring.bootstrap",
        ),
        ratings=(REVIEW_SCORES, SAFETY_RATINGS, NEED_VERDICTS, INSTANCE_DECISIONS), env="figures", memory_mb=1000,
        minutes=10, options=("bootstrap",), report=("csv",),
        inputs={
            "provenance": PROVENANCE,
            "judge_samples": Cells("judge_samples", _judged_cells),
            "review": _config_files("review.imports"),
            "verdicts": Cells("verdicts", _study_cells()),
            "safety": _config_files("studies.human_ratings"), "curated": Paths(_curated_for_decisions),
            "decisions": _config_files("instances.review_imports"),
        },
        outputs=figure_files("agreement", csv=".csv", md=".md"),
    ),
    Stage(
        "calibration", f"{JOBS}.tables:calibration", "chance floor, oracle, rescaled scores and unrelated-pair SS",
        reads=(*CELLS, *RUN_NOTES, "tables.judged_cell"), env="figures", memory_mb=1000, minutes=10, report=("csv",),
        inputs={"provenance": PROVENANCE, "summaries": Paths(_summaries), "floor_items": Paths(_floor_items)},
        outputs=figure_files("calibration", md=".md", csv=".csv"),
    ),
    # --- figures ------------------------------------------------------------------------------------------
    Stage(
        "figure", f"{JOBS}.tables:figure", "Figure 4 (word cloud), 5 (verb-noun pairs) or 6 (lengths), PNG and CSV",
        priority=EARLY,
        uses=("figures",),
        reads=("figures", *RUN_NOTES), jobs=Over(figure=_figure_names), env="figures", memory_mb=2000, minutes=20,
        options=("font",), report=("png",), caption="figures",
        inputs={
            "provenance": PROVENANCE, "curated": One("curated", over=("subtask", "subtasks")),
            "instances": One("instances", over=("subtask", "subtasks")),
        },
        outputs=figure_files("{figure}", png=".png", csv=".csv"),
    ),
    Stage(
        "fig7", f"{JOBS}.tables:fig7", "Figure 7: instruction following by scenario type",
        reads=("scoring.bootstrap", "studies.models", "models", "variants", "review.store", *RUN_NOTES,
               "judge_reliability.every_run", *(f"study_judge.{key}" for key in JUDGE_MODE_KEYS)),
        cells=_study_cells("instruction_following"), ratings=(NEED_VERDICTS,), env="figures", memory_mb=1000,
        minutes=10, options=("bootstrap",), report=("png",),
        inputs={
            "provenance": PROVENANCE, "verdicts": Each("verdicts"), "sample": Each("judge_sample"),
            "ladders": Paths(_study_ladders),
        },
        outputs=figure_files("fig7_instruction_following", png=".png", csv=".csv"),
    ),
    # --- the run's results in other formats ---------------------------------------------------------------
    Stage(
        "results_json", f"{JOBS}.exports:results_json",
        "the run's results in one JSON file, after lm-eval's results_*.json: config and its hash, versions, every"
        " cell with n, value, CI and measure, the studies' table rows, provenance",
        reads=EXPORT, env="export", memory_mb=1000, minutes=10,
        inputs={
            "provenance": PROVENANCE, "summaries": Paths(_export_summaries), "registry": Paths(_registry_files),
            "safety": Figure("table3", ".csv"), "instruction_following": Figure("fig7_instruction_following", ".csv"),
        },
        outputs=figure_files("results", json=".json"),
    ),
    Stage(
        "leaderboard", f"{JOBS}.exports:leaderboard",
        "Table 2's rows ranked by Overall, per embedder and variant (and within each size group), as JSON",
        reads=(*EXPORT, "scoring.bootstrap", *(f"rubric_judge.{key}" for key in JUDGE_MODE_KEYS)), env="export",
        memory_mb=1000, minutes=10,
        inputs={
            "provenance": PROVENANCE, "summaries": Paths(_export_summaries), "registry": Paths(_registry_files),
            "ladders": Paths(_rubric_ladders),
        },
        outputs=figure_files("leaderboard", json=".json"),
    ),
    Stage(
        "every_eval_ever", f"{JOBS}.exports:every_eval_ever",
        "every item in the Every Eval Ever schema (aggregate and samples per model, variant and embedder),"
        " checked by every-eval-ever's own validator",
        uses=("judge",),
        reads=(*EXPORT, "instances.files", "rubric_judge.model", "rubric_judge.temperature", "rubric_judge.samples",
               "rubric_judge.alpha", "rubric_judge.tau", "rubric_judge.gate_on"),
        env="export", memory_mb=4000, minutes=60,
        inputs={"provenance": PROVENANCE, "per_item": Paths(_item_files), "registry": Paths(_registry_files)},
        outputs=bundle("every_eval_ever"),
    ),
    Stage(
        "viewer", f"{JOBS}.exports:viewer",
        "a static HTML bundle that shows every item (prompt, answer, reference, scores, judge, flags) from disk",
        uses=("viewer",),
        reads=(*CELLS, *RUN_NOTES, *REGISTRY, "tables.judged_cell"), env="export", memory_mb=4000, minutes=60,
        inputs={"provenance": PROVENANCE, "per_item": Paths(_item_files), "registry": Paths(_registry_files)},
        outputs=bundle("viewer"),
    ),
    Stage(
        "judge_reliability", f"{JOBS}.tables:judge_reliability",
        "the judges' reliability card: ladder, self-consistency, agreement with people, drift canary",
        uses=("studies",),
        reads=(
            "models", "baselines", "rubric_judge.baselines", "subtasks", "variants", "studies.models",
            "rubric_judge.samples", "study_judge.samples", "scoring.bootstrap", "judge_reliability.panel",
            *(f"{section}.{key}" for section in ("rubric_judge", "study_judge") for key in JUDGE_MODE_KEYS),
        ),
        env="figures", memory_mb=1000, minutes=10, report=("csv",),
        inputs={
            "provenance": PROVENANCE,
            "ladders": Paths(_ladders("judge_ladder")),
            "canaries": Paths(_ladders("judge_canary")),
            "judge_samples": Cells("judge_samples", _judged_cells),
            "verdicts": Cells("verdicts", _study_cells()),
            "samples": Cells("judge_sample", _judged_cells), "study_samples": Cells("judge_sample", _study_cells()),
            "agreement": Figure("agreement", ".csv"),
        },
        outputs=figure_files("judge_reliability", md=".md", csv=".csv"),
    ),
    # --- the plan -----------------------------------------------------------------------------------------
    Stage(
        "plan", f"{JOBS}.plan:plan",
        "count what the configured run sends per model and stage, what the caches hold, and the tokens, GPU-hours"
        " and API cost of the rest (plan.md and plan.csv in the set's results folder)",
        reads=(
            *REGISTRY, "models", "baselines", "subtasks", "variants", "generation", "rubric_judge", "study_judge",
            "instances", "studies", "review.store", "plan",
        ),
        env="generation", memory_mb=4000, minutes=60,
        inputs={"sources": Paths(_plan_inputs)}, outputs={"table": One("plan"), "report": One("plan_md")},
    ),
))  # fmt: skip

BY_NAME = {stage.name: stage for stage in STAGES}


def command_reads() -> dict[str, tuple[str, ...]]:
    """Each stage's command -> the config keys it reads (what reruns its jobs when they change)."""
    return {stage.command_name: stage.reads for stage in STAGES}


def table_files(name: str, folder: str | os.PathLike[str]) -> dict[str, Path]:
    """The files stage ``name`` writes into the tables folder, were that folder ``folder``: name -> path."""
    scope = Scope(default_config(), Layout(figures=str(folder)))
    stage = BY_NAME[name]
    labels = {label: f"{{{label}}}" for label in stage.labels}
    figures = {key: spec for key, spec in stage.outputs.items() if isinstance(spec, Figure)}
    return {key: Path(spec.paths(scope, labels, [])[0]) for key, spec in figures.items()}
