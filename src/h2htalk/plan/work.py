"""The work of a job that starts no model that grows with the run, as its stage declares it (``Stage.grows``): the
plan job's requests, a score job's answers, the score_studies job's study answers, counted from the run's planned
requests and priced by the throughput table's ``cpu`` section (``config/throughput.yaml``), for the time said before
a run (``plan.timing``) and the paper-size benchmark's prediction (``benchmarks/paper_scale.py``). The other such jobs
(curation, prompts, tables, figures) take about the same at any size: ``other_job_s`` each."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from h2htalk.plan.calls import JobName, PlannedCalls
from h2htalk.plan.costs import CpuCalibration
from h2htalk.stages.spec import Stage
from h2htalk.stages.steps import unsampled

Requests = Mapping[tuple[str, str], int]  # (step, model) -> requests of the run, cached or not


def planned_requests(sessions: Iterable[PlannedCalls]) -> dict[tuple[str, str], int]:
    """The run's requests by step (a cascade's sample with its step) and model, cached or not: the plan goes
    through every one, and the answers are scored whether they were sent now or before."""
    requests: dict[tuple[str, str], int] = defaultdict(int)
    for calls in sessions:
        requests[unsampled(calls.step.name), calls.spec["name"]] += calls.tally.requests
    return dict(requests)


def work_seconds(job: JobName, requests: Requests, cpu: CpuCalibration, stages: Iterable[Stage]) -> float:
    """Seconds ``job`` spends on a core of its own on the work that grows with the run, beyond ``other_job_s``, as
    its stage among ``stages`` declares it (``grows``): the seconds of its ``cpu`` key for each planned request of the
    steps it names (each request of the run where it names none), for a job with a ``model`` label its model's only
    (a baseline that asks no model answers each item in each variant once: as many as the model with the most). A
    job of a stage that declares none: 0."""
    name, labels = job[0], dict(job[1])
    grows = next((stage.grows for stage in stages if stage.name == name), None)
    if grows is None:
        return 0.0
    counted = [(model, count) for (step, model), count in requests.items() if not grows.steps or step in grows.steps]
    if "model" not in labels:
        return getattr(cpu, grows.per) * sum(count for _, count in counted)
    by_model: dict[str, int] = defaultdict(int)
    for model, count in counted:
        by_model[model] += count
    return getattr(cpu, grows.per) * by_model.get(labels["model"], max(by_model.values(), default=0))
