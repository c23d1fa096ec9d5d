"""Judge against judge, for the card: two judges of one role on the same items (the cascade's sample, where the
cheap judge and the role's own judge both scored every sampled item).

- agreement: Krippendorff's alpha of their item scores (interval: the scores are means of samples);
- ranking: Kendall's tau between the two judges' rankings of the models under test (each model's mean over the
  items both judged), with a percentile bootstrap CI (each model's items resampled, seeded);
- separability: per judge, how many pairs of models it tells apart (their means' difference over its items, a
  normal 95 % interval that excludes 0; Judgemark's measure of a judge's use);
- stability: per judge, Kendall's tau between the model rankings its own samples make (the first sample of every
  item against the second, and so on: a judge that samples once cannot be measured).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from h2htalk.reliability.agreement import INTERVAL, Alpha, krippendorff_alpha
from h2htalk.reliability.ladder import NEEDS, RUBRIC, SAFETY
from h2htalk.settings import BootstrapSettings

Item = tuple[str, str, str, str]  # (model, variant, task, id)
ITEM_VALUE = {RUBRIC: "judge_mean", SAFETY: "safety_score", NEEDS: "success"}  # a verdict record's value
SAMPLE_VALUE = {RUBRIC: "score", SAFETY: "safety_score", NEEDS: "success"}  # a sample's


@dataclass(frozen=True)
class JudgeVerdicts:
    """One judge's verdicts of a role: per item, its value and its samples' values."""

    model: str
    values: Mapping[Item, float | None]
    samples: Mapping[Item, Sequence[float | None]]


def judge_verdicts(model: str, role: str, records: Iterable[tuple[Item, Mapping[str, Any]]]) -> JudgeVerdicts:
    """A judge's verdicts from its verdict records, each with the item it is about."""
    values, samples = {}, {}
    for item, record in records:
        values[item] = _number(record.get(ITEM_VALUE[role]))
        samples[item] = [_number(s.get(SAMPLE_VALUE[role])) for s in record.get("samples", [])]
    return JudgeVerdicts(model, values, samples)


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class Tau:
    value: float | None
    ci_low: float | None
    ci_high: float | None
    models: int


def model_means(values: Mapping[Item, float | None], items: Iterable[Item]) -> dict[str, list[float]]:
    """Each model's values over ``items`` (those the judge has one for)."""
    found: dict[str, list[float]] = {}
    for item in items:
        if values.get(item) is not None:
            found.setdefault(item[0], []).append(float(values[item]))  # type: ignore[arg-type]
    return found


def ranking_tau(a: JudgeVerdicts, b: JudgeVerdicts, bootstrap: BootstrapSettings) -> Tau:
    """Kendall's tau between the two judges' model rankings over the items both judged, with a bootstrap CI."""
    import numpy as np

    shared = [i for i in a.values if a.values[i] is not None and b.values.get(i) is not None]
    by_model: dict[str, list[Item]] = {}
    for item in shared:
        by_model.setdefault(item[0], []).append(item)
    models = sorted(m for m, items in by_model.items() if items)
    if len(models) < 2:
        return Tau(None, None, None, len(models))
    first = [np.array([a.values[i] for i in by_model[m]], float) for m in models]
    second = [np.array([b.values[i] for i in by_model[m]], float) for m in models]
    observed = _tau([x.mean() for x in first], [y.mean() for y in second])
    rng = np.random.default_rng(bootstrap.seed)
    draws = []
    for _ in range(bootstrap.resamples):
        picks = [rng.integers(0, len(x), len(x)) for x in first]
        found = _tau([x[p].mean() for x, p in zip(first, picks, strict=True)],
                     [y[p].mean() for y, p in zip(second, picks, strict=True)])  # fmt: skip
        if found is not None:
            draws.append(found)
    if not draws or observed is None:
        return Tau(observed, None, None, len(models))
    alpha = (1.0 - bootstrap.confidence) / 2.0
    low, high = np.quantile(draws, [alpha, 1.0 - alpha])
    return Tau(observed, float(low), float(high), len(models))


def _tau(x: Sequence[float], y: Sequence[float]) -> float | None:
    import numpy as np
    from scipy.stats import kendalltau

    value = kendalltau(x, y).statistic
    return None if value is None or np.isnan(value) else float(value)


def separable_pairs(values: Mapping[Item, float | None], items: Iterable[Item], confidence: float) -> tuple[int, int]:
    """(pairs of models told apart, pairs compared): two models' means over ``items`` whose difference has a normal
    interval at ``confidence`` that excludes 0."""
    import numpy as np

    means = {m: np.array(v, float) for m, v in model_means(values, items).items() if len(v) >= 2}
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    told = compared = 0
    for first, second in itertools.combinations(sorted(means), 2):
        x, y = means[first], means[second]
        se = np.sqrt(x.var(ddof=1) / x.size + y.var(ddof=1) / y.size)
        compared += 1
        told += bool(abs(x.mean() - y.mean()) > z * se) if se > 0 else bool(x.mean() != y.mean())
    return told, compared


def stability(judge: JudgeVerdicts) -> float | None:
    """The mean Kendall's tau between the model rankings of the judge's k-th samples (k = 1, 2, ...): None when it
    samples each item once or ranks fewer than two models."""
    import numpy as np

    depth = max((len(s) for s in judge.samples.values()), default=0)
    rankings = []
    for k in range(depth):
        kth = {item: samples[k] if len(samples) > k else None for item, samples in judge.samples.items()}
        means = model_means(kth, kth)
        rankings.append({m: float(np.mean(v)) for m, v in means.items()})
    taus = []
    for first, second in itertools.combinations(rankings, 2):
        models = sorted(set(first) & set(second))
        if len(models) >= 2 and (found := _tau([first[m] for m in models], [second[m] for m in models])) is not None:
            taus.append(found)
    return float(np.mean(taus)) if taus else None


def item_alpha(a: JudgeVerdicts, b: JudgeVerdicts) -> Alpha:
    """Krippendorff's alpha (interval) of the two judges' item values, over the items both scored."""
    return krippendorff_alpha(([a.values[i], b.values.get(i)] for i in a.values if i in b.values), INTERVAL)


def compare_judges(
    role: str, cheap: JudgeVerdicts, own: JudgeVerdicts, bootstrap: BootstrapSettings, on: str = "", unit: str = "model"
) -> list[dict[str, Any]]:
    """The card's rows of one role's two judges (``COLUMNS`` of ``h2htalk.reliability.card``), ``on`` the items
    where they met; ``unit``: what an item's first part names, the systems ranked (models; a ladder's rungs)."""
    shared = [i for i in own.values if cheap.values.get(i) is not None and own.values[i] is not None]
    pair = f"{cheap.model} vs {own.model}"
    alpha, tau = item_alpha(cheap, own), ranking_tau(cheap, own, bootstrap)
    rows = [
        {"model": pair, "check": "judge vs judge (alpha)", "task": role, "comparison": "item scores, interval",
         "value": alpha.value, "items": alpha.items, "note": "" if alpha.value is not None else alpha.why},
        {"model": pair, "check": "judge vs judge (Kendall tau)", "task": role, "comparison": f"{unit} ranking",
         "value": tau.value, "ci_low": tau.ci_low, "ci_high": tau.ci_high, "items": len(shared),
         "note": f"{tau.models} {unit}s, each its mean over the items both judged"},
    ]  # fmt: skip
    for judge in (cheap, own):
        told, compared = separable_pairs(judge.values, shared, bootstrap.confidence)
        share = told / compared if compared else None
        rows.append({"model": judge.model, "check": "separability", "task": role,
                     "comparison": f"{unit} pairs told apart, items both judged", "value": share,
                     "items": len(shared), "pairs": compared, "note": f"{told} of {compared} pairs"})  # fmt: skip
        steady = stability(judge)
        depth = max((len(s) for s in judge.samples.values()), default=0)
        rows.append({"model": judge.model, "check": "stability (Kendall tau)", "task": role,
                     "comparison": f"{unit} rankings of its own samples", "value": steady,
                     "items": len(judge.values),
                     "note": "one sample per item" if depth < 2 else f"{depth} samples an item"})  # fmt: skip
    return [{**row, "on": on, "pair": pair} for row in rows]
