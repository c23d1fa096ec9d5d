"""What several stages declare alike: groups of config keys, job priorities, and the files and cells of a run that
more than one stage reads (a file list's docstring is what ``docs/stages.md`` says of it)."""

from __future__ import annotations

from h2htalk import config
from h2htalk.cells import RunCells
from h2htalk.settings import LADDER_PARTS, STUDIES, JudgeMode
from h2htalk.stages.spec import Labels, Paths, Scope

REGISTRY = ("model_registry", "model_registry_overlays")  # the registry: its file and your overlays of it
CELLS = ("models", "baselines", "rubric_judge.baselines", "subtasks", "variants", "scoring.embedders")
RUN_NOTES = ("instances.source", "instances.limit", "subtasks")  # what every table says about the run
GATE = ("rubric_judge.alpha", "rubric_judge.tau", "rubric_judge.max_spread", "rubric_judge.gate_on")
JUDGE_CALLS = ("rubric_judge", *(f"-{key}" for key in GATE), "-rubric_judge.baselines")  # what a judge call reads
JUDGE_MODE_KEYS = ("mode", "model", "cheap_model", "sample_per_cell", "sample_seed")  # who judged: every item, a sample
AUTO_SAMPLE = ("target_half_width", "pilot_per_cell", "assumed_correlation", "assumed_sd")  # sample_per_cell: auto's
RUBRIC_JUDGE_MODE = tuple(f"rubric_judge.{key}" for key in (*JUDGE_MODE_KEYS, *AUTO_SAMPLE))  # the rubric judge's
STUDY_JUDGE_MODE = tuple(f"study_judge.{key}" for key in JUDGE_MODE_KEYS)  # the study judge's
REVIEW_MODE = ("review.mode", "review.sample_per_cell", "review.sample_seed")
# Job priorities: Table 2's answers and scores, and the tables that need no judge, before the judge and the studies
FIRST, EARLY = 20, 10


def config_files(key: str) -> Paths:
    """The file a config key names, or the files it lists (review imports, people's ratings)."""

    def files(scope: Scope, labels: Labels) -> list[str]:
        node = scope.config
        for part in key.split("."):
            node = node[part]
        return [node] if isinstance(node, str) else list(node)

    files.__doc__ = f"the file(s) `{key}` names"
    return Paths(files)


def registry_files(scope, labels):
    """The model registry and your overlays of it (`model_registry`, `model_registry_overlays`)."""
    return config.registry_files(scope.config)


def models_in_use(run):
    """Every model a job of the run may start: those the run calls (``config.models_in_use``) and the
    reconstruction's, whose ``reconstruct`` target a run has whatever ``instances.source`` says."""
    return list(dict.fromkeys([*config.models_in_use(run.config), *run.reconstruction_models]))


def judge_models(scope, section):
    """The judges a judging job starts: the role's model, and in cascade mode the cheap judge first."""
    return list(JudgeMode.from_config(scope.config, section).judges)


def judged_cells(run, labels):
    """every judged cell of the run"""
    return [c for m in run.judged_models for c in run.judged(m)]


def study_cells(*studies):
    def cells(run, labels):
        return [c for m in run.study_models for c in run.studies(m, studies or STUDIES)]

    cells.__doc__ = f"every study model's {' and '.join(studies or STUDIES)} cells"
    return cells


def summaries(scope, labels):
    """The summary of every Table 2 cell: J where the rubric judge is mixed in, S elsewhere."""
    return scope.run.table2_summaries(scope.results)


def judges_ladders(scope, part):
    """The ladders of ``part`` of the judges of this run's cells (the cheap judge's too in cascade mode)."""
    return [scope.results.path("judge_ladder", model=m, part=part) for m, roles in scope.run.judges.items()
            if set(roles) & set(LADDER_PARTS[part])]  # fmt: skip


def study_ladders(scope, labels):
    """The studies' judges' ladders, which Table 3 and Figure 7 show when every run makes the card (else they say
    where the ladder is: the card's target)."""
    return judges_ladders(scope, "studies") if scope.config["judge_reliability"]["every_run"] else []


def rubric_ladders(scope, labels):
    """The rubric judges' sanity ladders, which the tables of their verdicts show (none: no Level I-III cell)."""
    return judges_ladders(scope, "rubric")


def ladder_jobs(run: RunCells) -> list[tuple[str, str]]:
    """Each judge model's ladder parts: the rubric part where it is the rubric judge, the studies' where it judges
    a study."""
    return [(model, part) for model, roles in run.ladder_judges.items() for part in LADDER_PARTS
            if set(roles) & set(LADDER_PARTS[part])]  # fmt: skip
