"""The work of a job that starts no model that grows with the run: the plan job's requests, a score job's answers,
the score_studies job's study answers, counted from the run's planned requests and priced by the throughput table's
``cpu`` section (``config/throughput.yaml``), for the time said before a run (``plan.timing``) and the paper-size
benchmark's prediction (``benchmarks/paper_scale.py``). The other such jobs (curation, prompts, tables, figures)
take about the same at any size: ``other_job_s`` each."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from h2htalk.plan.calls import JobName, PlannedCalls
from h2htalk.plan.costs import CpuCalibration
from h2htalk.stages.steps import ANSWERS, unsampled

PLAN, SCORE, STUDY_SCORE = "plan", "score", "score_studies"  # the stages whose jobs' work grows with the run
GENERATE, STUDY_ANSWERS = ANSWERS  # the steps whose answers the score jobs score
BASELINE_ANSWERS = "baseline_answers"  # a baseline that asks a model for its answers

Requests = Mapping[tuple[str, str], int]  # (step, model) -> requests of the run, cached or not


def planned_requests(sessions: Iterable[PlannedCalls]) -> dict[tuple[str, str], int]:
    """The run's requests by step (a cascade's sample with its step) and model, cached or not: the plan goes
    through every one, and the answers are scored whether they were sent now or before."""
    requests: dict[tuple[str, str], int] = defaultdict(int)
    for calls in sessions:
        requests[unsampled(calls.stage.name), calls.spec["name"]] += calls.tally.requests
    return dict(requests)


def work_seconds(job: JobName, requests: Requests, cpu: CpuCalibration) -> float:
    """Seconds ``job`` spends on a core of its own on the work that grows with the run, beyond ``other_job_s``: the
    plan job on each request of the run (``request_planned_s``); a score job on each answer of its model
    (``answer_scored_s``; a baseline that asks no model answers each item in each variant once, as many answers as
    the model with the most); the score_studies job on each of the studies' answers (``study_answer_scored_s``,
    both studies' as planned, though it scores the safety study's); any other job, 0."""
    stage, labels = job[0], dict(job[1])
    if stage == PLAN:
        return cpu.request_planned_s * sum(requests.values())
    if stage == SCORE:
        answers: dict[str, int] = defaultdict(int)
        for (step, model), count in requests.items():
            if step in (GENERATE, BASELINE_ANSWERS):
                answers[model] += count
        own = answers.get(labels.get("model", ""), max(answers.values(), default=0))
        return cpu.answer_scored_s * own
    if stage == STUDY_SCORE:
        return cpu.study_answer_scored_s * sum(n for (step, _), n in requests.items() if step == STUDY_ANSWERS)
    return 0.0
