"""Make the released benchmark runnable: reconstruct each reference's inputs, then verify them by vote.

For every curated reference (kept by curation; a seeded per-subtask sample if configured), a generator model
is asked for the subtask's template fields as strict JSON, given the persona, the subtask's task and the
reference. An answer that is not JSON, or whose fields break the instance schema, is retried with the next
seed, up to ``max_attempts``; the attempts are recorded. Each reconstruction is then put to ``votes``
verification votes (several judge models, or one at temperature > 0): is the reference a plausible,
in-character answer to this input? A majority of yes keeps the instance; a majority of no, a split, or
unusable votes send it to ``results/review/instances.csv``, which a person can fill in and import back.
Everything runs through the generation engines and their content-addressed cache, so an interrupted run
resumes where it stopped.
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from h2htalk.errors import DataError
from h2htalk.generation.client import ChatRequest
from h2htalk.generation.engines import LazyEndpoint
from h2htalk.generation.generate import (
    GenerationCache,
    GenerationSettings,
    fetch_responses,
    model_identity,
    request_key,
)
from h2htalk.instances import check_instance, required_fields
from h2htalk.io import iter_jsonl, sha256_file, write_json_atomic, write_jsonl_atomic, write_text_atomic
from h2htalk.judge.rubric import json_object_spans
from h2htalk.prompts import persona_text, render_instance, sha256_text

REVIEW_COLUMNS = ("id", "subtask", "status", "votes", "reasons", "fields", "reference", "decision", "reviewer")


@dataclass(frozen=True)
class ReconstructSettings:
    max_attempts: int = 3
    votes: int = 3
    temperature: float = 0.7
    sample_per_subtask: int | None = None
    seed: int = 7
    max_tokens: int = 768

    @classmethod
    def from_config(cls, section: dict[str, Any]) -> ReconstructSettings:
        return cls(
            max_attempts=section.get("max_attempts", 3),
            votes=section.get("votes", 3),
            temperature=section.get("temperature", 0.7),
            sample_per_subtask=section.get("sample_per_subtask"),
            seed=section.get("seed", 7),
            max_tokens=section.get("max_tokens", 768),
        )


@cache
def _resource(name: str) -> dict[str, str]:
    text = resources.files("h2htalk.resources").joinpath("reconstruct").joinpath(name).read_text(encoding="utf-8")
    return yaml.safe_load(text)


def reconstruction_messages(subtask: str, reference: str) -> list[dict[str, str]]:
    fields = required_fields()[subtask]
    described = "\n".join(f"- {name}：{_resource('fields.yaml')[name]}" for name in fields)
    user = (
        "【任务】下面是虚拟伴侣竹内遥斗在一个子任务中的参考回答。请反推出能引出这条回答的输入，用JSON输出。\n\n"
        f"【子任务】{_resource('tasks.yaml')[subtask]}\n\n"
        f"【输入字段】\n{described}\n\n"
        f"【参考回答】\n{reference}\n\n"
        "【要求】\n"
        "1. 只输出一个JSON对象，键正好是上面列出的字段名，不多也不少。\n"
        "2. 内容用中文，具体、自然，前后一致，让参考回答成为对这个输入合理、符合人设的回应。\n"
        "3. 不要把参考回答原样抄进输入。"
    )
    system = f"你为一个陪伴型对话基准构造测试输入。被测的伴侣人设如下：\n\n{persona_text()}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def verification_messages(instance: dict[str, Any]) -> list[dict[str, str]]:
    task = render_instance(instance, "nosap").user
    user = (
        "【任务】判断下面的参考回答，是否是竹内遥斗对给定输入合理、符合人设的回答。\n\n"
        f"【给模型的输入】\n{task}\n\n【参考回答】\n{instance['reference']}\n\n"
        '只输出一个JSON对象：{"reason": "一句话理由", "plausible": true 或 false}'
    )
    return [{"role": "system", "content": "你是一名严格的数据审核员。"}, {"role": "user", "content": user}]


def _first_json_object(text: str) -> Any:
    """The earliest-starting balanced {...} span that parses as JSON."""
    for _, span in sorted(json_object_spans(re.sub(r"```(?:json)?", "", text or ""))):
        try:
            return json.loads(span)
        except json.JSONDecodeError:
            continue
    raise ValueError("no JSON object in the answer")


def parse_fields(text: str, subtask: str) -> dict[str, Any]:
    """The reconstructed fields, or ValueError saying why they are unusable."""
    obj = _first_json_object(text)
    if not isinstance(obj, dict):
        raise ValueError("the JSON is not an object")
    wanted = set(required_fields()[subtask])
    return {k: v for k, v in obj.items() if k in wanted} if wanted <= set(obj) else obj


def parse_vote(text: str) -> tuple[bool | None, str]:
    try:
        obj = _first_json_object(text)
    except ValueError:
        return None, "unparseable vote"
    plausible = obj.get("plausible") if isinstance(obj, dict) else None
    if isinstance(plausible, str):
        plausible = {"true": True, "false": False, "是": True, "否": False}.get(plausible.strip().lower())
    if not isinstance(plausible, bool):
        return None, "vote without a true/false 'plausible'"
    return plausible, str(obj.get("reason", ""))[:300]


def sample_references(records: list[dict[str, Any]], size: int | None, seed: int, subtask: str) -> list[dict]:
    kept = [r for r in records if r["kept"]]
    if size is None or size >= len(kept):
        return kept
    rng = random.Random(f"{seed}:{subtask}")
    chosen = set(rng.sample(range(len(kept)), size))
    return [r for i, r in enumerate(kept) if i in chosen]


def _request(spec: dict[str, Any], item: str, messages: list[dict[str, str]], params: dict[str, Any]) -> ChatRequest:
    key = request_key(model_identity(spec), params, messages[0]["content"], messages[1]["content"])
    return ChatRequest(key, item, messages, params)


@dataclass
class Candidate:
    record: dict[str, Any]  # the curated reference
    instance: dict[str, Any] | None = None
    attempts: int = 0
    errors: list[str] | None = None


def reconstruct_subtask(
    subtask: str,
    curated: Path,
    generator: dict[str, Any],
    judges: list[dict[str, Any]],
    settings: GenerationSettings,
    options: ReconstructSettings,
    cache_dir: Path,
    model_files: dict[str, str],
    server_logs: Path | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Return (kept instances, review rows, report) for one subtask."""
    records = [r for _, r in iter_jsonl(curated)]
    candidates = [
        Candidate(r, errors=[]) for r in sample_references(records, options.sample_per_subtask, options.seed, subtask)
    ]
    gen_cache = GenerationCache(cache_dir, generator["name"])
    log = (server_logs / f"{generator['name']}.log") if server_logs else None
    try:
        with LazyEndpoint(generator, model_files.get(generator["name"]), log, settings.seed) as endpoint:
            for attempt in range(options.max_attempts):
                pending = [c for c in candidates if c.instance is None]
                if not pending:
                    break
                params = {
                    "temperature": 0.0 if attempt == 0 else options.temperature,
                    "top_p": 1.0,
                    "max_tokens": options.max_tokens,
                    "seed": options.seed + attempt,
                }
                requests = [
                    _request(generator, c.record["id"], reconstruction_messages(subtask, c.record["text"]), params)
                    for c in pending
                ]
                answers, _, _ = fetch_responses(generator, requests, gen_cache, settings, endpoint)
                for candidate, request in zip(pending, requests, strict=True):
                    candidate.attempts = attempt + 1
                    try:
                        fields = parse_fields(answers[request.key]["response"], subtask)
                        instance = _instance(subtask, candidate.record, fields, generator, request, attempt + 1)
                        check_instance(instance, candidate.record["id"])
                        candidate.instance = instance
                    except (ValueError, DataError) as exc:
                        candidate.errors.append(f"attempt {attempt + 1}: {str(exc)[:200]}")
    finally:
        gen_cache.close()

    made = [c for c in candidates if c.instance is not None]
    votes = _votes(made, judges, settings, options, cache_dir, model_files, server_logs)
    kept, review = [], []
    for candidate in candidates:
        if candidate.instance is None:
            review.append(_review_row(candidate, "reconstruction_failed", [], candidate.errors))
            continue
        ballots = votes[candidate.record["id"]]
        yes = sum(b["plausible"] is True for b in ballots)
        no = sum(b["plausible"] is False for b in ballots)
        candidate.instance["provenance"]["votes"] = ballots
        if yes > len(ballots) / 2:
            kept.append(candidate.instance)
            continue
        status = "rejected" if no > len(ballots) / 2 else "split"
        candidate.instance["flags"].append(f"vote_{status}")
        review.append(_review_row(candidate, status, ballots, []))
    report = {
        "subtask": subtask,
        "references": len(records),
        "sampled": len(candidates),
        "kept": len(kept),
        "flagged": sum(r["status"] in ("rejected", "split") for r in review),
        "failed": sum(r["status"] == "reconstruction_failed" for r in review),
        "attempts": {str(n): sum(c.attempts == n for c in candidates) for n in range(1, options.max_attempts + 1)},
    }
    return kept, review, report


def _instance(
    subtask: str,
    record: dict[str, Any],
    fields: dict[str, Any],
    generator: dict[str, Any],
    request: ChatRequest,
    attempts: int,
) -> dict[str, Any]:
    return {
        "id": record["id"],
        "subtask": subtask,
        "fields": fields,
        "reference": record["text"],
        "source": {"kind": "upstream", **record["source"]},
        "flags": ["reconstructed"],
        "provenance": {
            "method": "reconstructed from the reference by a generator model, verified by vote",
            "generator": model_identity(generator),
            "generator_request_key": request.key,
            "prompt_sha256": {
                "system": sha256_text(request.messages[0]["content"]),
                "user": sha256_text(request.messages[1]["content"]),
            },
            "attempts": attempts,
        },
    }


def _votes(
    made: list[Candidate],
    judges: list[dict[str, Any]],
    settings: GenerationSettings,
    options: ReconstructSettings,
    cache_dir: Path,
    model_files: dict[str, str],
    server_logs: Path | None,
) -> dict[str, list[dict[str, Any]]]:
    """``options.votes`` ballots per instance, spread round-robin over the judge models."""
    ballots: dict[str, list[dict[str, Any]]] = {c.record["id"]: [] for c in made}
    plan: dict[str, list[tuple[Candidate, int]]] = {}
    for candidate in made:
        for index in range(options.votes):
            plan.setdefault(judges[index % len(judges)]["name"], []).append((candidate, index))
    by_name = {j["name"]: j for j in judges}
    for name, entries in plan.items():
        judge = by_name[name]
        cache = GenerationCache(cache_dir, name)
        log = (server_logs / f"{name}.log") if server_logs else None
        try:
            requests = []
            for candidate, index in entries:
                params = {
                    "temperature": options.temperature,
                    "top_p": 1.0,
                    "max_tokens": 256,
                    "seed": options.seed + 100 + index,
                }
                requests.append(
                    _request(
                        judge,
                        f"vote/{candidate.record['id']}#{index}",
                        verification_messages(candidate.instance),
                        params,
                    )
                )
            with LazyEndpoint(judge, model_files.get(name), log, settings.seed) as endpoint:
                answers, _, _ = fetch_responses(judge, requests, cache, settings, endpoint)
        finally:
            cache.close()
        for (candidate, _), request in zip(entries, requests, strict=True):
            plausible, reason = parse_vote(answers[request.key]["response"])
            ballots[candidate.record["id"]].append(
                {"judge": name, "seed": request.params["seed"], "plausible": plausible, "reason": reason}
            )
    return ballots


def _review_row(candidate: Candidate, status: str, ballots: list[dict[str, Any]], errors: list[str]) -> dict:
    instance = candidate.instance
    return {
        "id": candidate.record["id"],
        "subtask": candidate.record["subtask"],
        "status": status,
        "votes": " ".join({True: "yes", False: "no", None: "?"}[b["plausible"]] for b in ballots),
        "reasons": " | ".join([b["reason"] for b in ballots] + errors),
        "fields": json.dumps(instance["fields"], ensure_ascii=False) if instance else "",
        "reference": candidate.record["text"],
        "decision": "",
        "reviewer": "",
        "_instance": instance,
    }


def read_review_decisions(paths: list[str | os.PathLike[str]]) -> dict[str, dict[str, Any]]:
    """id -> {decision: keep/drop, fields (possibly edited), reviewer, file, sha256} from filled-in review CSVs."""
    decisions = {}
    for path in paths:
        digest = sha256_file(path)
        with open(path, encoding="utf-8-sig", newline="") as handle:
            for number, row in enumerate(csv.DictReader(handle), start=2):
                decision = (row.get("decision") or "").strip().lower()
                if not decision:
                    continue
                if decision not in ("keep", "drop"):
                    raise DataError(f"{path}: line {number}: decision must be keep or drop, not {decision!r}")
                try:
                    fields = json.loads(row["fields"]) if row.get("fields") else None
                except json.JSONDecodeError as exc:
                    raise DataError(f"{path}: line {number}: fields is not valid JSON ({exc.msg})") from None
                decisions[row["id"]] = {
                    "decision": decision,
                    "fields": fields,
                    "reviewer": row.get("reviewer", ""),
                    "file": str(path),
                    "sha256": digest,
                }
    return decisions


def apply_decisions(kept: list[dict], review: list[dict], decisions: dict[str, dict[str, Any]]) -> list[dict]:
    """Instances a person decided to keep join the kept set (with their edited fields), recorded."""
    out = list(kept)
    for row in review:
        decision = decisions.get(row["id"])
        if not decision or decision["decision"] != "keep":
            continue
        instance = row["_instance"]
        if instance is None:
            if decision["fields"] is None:
                raise DataError(f"review of {row['id']}: keep needs fields (reconstruction failed)")
            instance = {
                "id": row["id"],
                "subtask": row["subtask"],
                "fields": {},
                "reference": row["reference"],
                "source": {"kind": "upstream"},
                "flags": ["reconstructed"],
                "provenance": {},
            }
        if decision["fields"] is not None:
            instance["fields"] = decision["fields"]
        instance["provenance"]["human_review"] = {k: decision[k] for k in ("reviewer", "file", "sha256")}
        check_instance(instance, f"review of {row['id']}")
        out.append(instance)
    return sorted(out, key=lambda i: i["id"])


def write_review_csv(rows: list[dict[str, Any]], path: Path) -> None:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(REVIEW_COLUMNS), lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(path, buffer.getvalue())


def write_outputs(kept: list[dict], report: dict[str, Any], out: Path, report_path: Path) -> None:
    write_jsonl_atomic(out, kept)
    write_json_atomic(report_path, report)
