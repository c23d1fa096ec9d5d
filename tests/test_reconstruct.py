"""Reconstructing and verifying the released references' inputs."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from h2htalk.config import default_config, load_registry
from h2htalk.errors import DataError
from h2htalk.instance_schema import check_instance
from h2htalk.instances.reconstruct import (
    Vote,
    apply_decisions,
    parse_fields,
    parse_vote,
    read_review_decisions,
    reconstruct_subtask,
    sample_references,
    verification_messages,
    write_review_csv,
)
from h2htalk.io import read_jsonl, write_jsonl_atomic
from h2htalk.llm.calls import EngineOptions, ModelPool
from h2htalk.settings import ClientSettings, ReconstructSettings

from .conftest import REPO_ROOT
from .standins.loopback import LoopbackAPI

FIELDS = {"your_current_schedule": "遥斗在阳台给绿萝换盆，手上沾满泥土。", "user_feedback": "你居然会养花？（惊讶）"}
CLIENT = ClientSettings(
    concurrency=2, timeout_s=10, retries=1, backoff_base_s=0.01, backoff_max_s=0.02, max_failure_rate=0.0,
    retry_failed=False, rate_limits={}, batch_poll_s=1.0,
)  # fmt: skip


def options(tmp_path: Path, **changes) -> ReconstructSettings:
    section = {"cache_dir": str(tmp_path / "cache"), **changes}
    return ReconstructSettings.from_config(default_config({"instances": {"reconstruct": section}}))


def curated(tmp_path: Path, n: int = 4) -> Path:
    path = tmp_path / "itinerary_response.jsonl"
    records = [
        {"id": f"itinerary_response-{i:05d}", "subtask": "itinerary_response", "text": f"“第{i}句：是你上次说的呀~”",
         "kept": i != 3, "flags": [], "source": {"file": "itinerary_feedback.jsonl", "commit": "c" * 40, "line": i}}
        for i in range(1, n + 1)
    ]  # fmt: skip
    write_jsonl_atomic(path, records)
    return path


def stub_spec(name: str, base_url: str) -> dict:
    return {"name": name, "engine": "api", "display_name": name,
            "api": {"base_url": base_url, "model": name, "api_key_env": "STUB_KEY"}}  # fmt: skip


def responder(fields=FIELDS, vote=True, bad_for=(), bad_first_for=(), copy_for=(), leaks=False):
    """The stand-in generator and voter: ``copy_for`` references are copied into the user's feedback (a leak);
    ``vote`` and ``leaks`` are each vote's answers (or functions of the prompt giving them)."""
    seen: dict[str, int] = {}

    def answer(user: str) -> str:
        if "反推出" in user:
            seen[user] = seen.get(user, 0) + 1
            if any(tag in user for tag in bad_for):
                return "好的，这是输入：{不是JSON"
            if any(tag in user for tag in bad_first_for) and seen[user] == 1:
                return '{"your_current_schedule": "只有一个字段"}'
            given = dict(fields)
            if any(tag in user for tag in copy_for):
                given["user_feedback"] = user.split("【参考回答】\n")[1].split("\n\n【要求】")[0]
            return "```json\n" + json.dumps(given, ensure_ascii=False) + "\n```"
        plausible = vote(user) if callable(vote) else vote
        said_leak = leaks(user) if callable(leaks) else leaks
        return json.dumps({"reason": "合理", "leaks": said_leak, "plausible": plausible}, ensure_ascii=False)

    return answer


@pytest.fixture(autouse=True)
def stub_key(monkeypatch):
    monkeypatch.setenv("STUB_KEY", "stub-key")


def run(tmp_path, state, **changes):
    spec = stub_spec("stub-generator", state.base_url)
    settings = options(tmp_path, **{"votes": 3, "max_attempts": 3, **changes})
    with ModelPool(EngineOptions(CLIENT, 1234), settings.cache_dir, batch=False) as pool:
        return reconstruct_subtask("itinerary_response", curated(tmp_path), spec, [spec], settings, pool)


def test_reconstructed_instances_are_valid_and_carry_provenance(tmp_path):
    with LoopbackAPI() as state:
        state.responder = responder()
        kept, review, report = run(tmp_path, state)
    assert [i["id"] for i in kept] == [
        "itinerary_response-00001",
        "itinerary_response-00002",
        "itinerary_response-00004",
    ]
    assert review == [] and report["kept"] == 3 and report["sampled"] == 3  # item 3 was not kept by curation
    for instance in kept:
        check_instance(instance, instance["id"])
        assert instance["fields"] == FIELDS and instance["source"]["kind"] == "upstream"
        assert instance["provenance"]["attempts"] == 1
        assert [v["plausible"] for v in instance["provenance"]["votes"]] == [True, True, True]
        assert len(instance["provenance"]["prompt_sha256"]["user"]) == 64


def test_invalid_json_is_retried_a_bounded_number_of_times_then_flagged(tmp_path):
    with LoopbackAPI() as state:
        state.responder = responder(bad_for=("第1句",), bad_first_for=("第2句",))
        kept, review, report = run(tmp_path, state)
        recon_requests = {u: n for u, n in state.requests.items() if "反推出" in u}
    failed = [r for r in review if r["status"] == "reconstruction_failed"]
    assert [r["id"] for r in failed] == ["itinerary_response-00001"]
    assert "attempt 3" in failed[0]["reasons"] and "no JSON object" in failed[0]["reasons"]
    second = next(i for i in kept if i["id"] == "itinerary_response-00002")
    assert second["provenance"]["attempts"] == 2  # the first answer lacked a field, the retry was fine
    assert report["failed"] == 1 and report["attempts"] == {"1": 1, "2": 1, "3": 1}
    assert sorted(recon_requests.values()) == [1, 2, 3]  # three tries at most, each with a new seed


def test_split_and_rejected_votes_go_to_review(tmp_path):
    asked: Counter[str] = Counter()

    def vote(user: str) -> bool:
        """No for the first reference; yes and then no for the second, in whichever order its votes come."""
        if "第1句" in user:
            return False
        asked[user] += 1
        return "第2句" not in user or asked[user] == 1

    with LoopbackAPI() as state:
        state.responder = responder(vote=vote)
        kept, review, report = run(tmp_path, state, votes=2, max_attempts=1)
    statuses = {r["id"]: r["status"] for r in review}
    assert statuses["itinerary_response-00001"] == "rejected"
    assert statuses.get("itinerary_response-00002") == "split"
    assert [i["id"] for i in kept] == ["itinerary_response-00004"]
    assert report["flagged"] == 2


def test_an_input_that_holds_its_reference_goes_to_review_as_a_leak(tmp_path):
    with LoopbackAPI() as state:
        state.responder = responder(copy_for=("第2句",))
        kept, review, report = run(tmp_path, state)
        votes = sum(n for user, n in state.requests.items() if "反推出" not in user)
    assert [i["id"] for i in kept] == ["itinerary_response-00001", "itinerary_response-00004"]
    assert [(r["id"], r["status"]) for r in review] == [("itinerary_response-00002", "leak")]
    assert review[0]["votes"] == "yes yes yes"  # the voters missed it; the measure did not
    assert "the input holds 100% of the reference" in review[0]["reasons"]
    leaked = review[0]["_instance"]
    assert "leak" in leaked["flags"] and leaked["provenance"]["leak"]["leak"] is True
    assert leaked["provenance"]["leak"]["fields"]["user_feedback"] == {"substring": 1.0, "ngram": 1.0}
    assert leaked["provenance"]["leak"]["fields"]["your_current_schedule"]["ngram"] == 0.0
    assert all(i["provenance"]["leak"]["leak"] is False for i in kept)
    assert votes == 9  # the leaked instance is voted on too: its votes help the reviewer
    assert report["leaked"] == 1 and report["leaks_dropped"] == 0 and report["flagged"] == 0
    assert report["leak"]["overlap"]["count"] == 3 and report["leak"]["overlap"]["above_threshold"] == 1
    assert report["leak"]["fields"]["user_feedback"]["above_threshold"] == 1
    assert report["leak"]["fields"]["your_current_schedule"]["above_threshold"] == 0


def test_leaks_can_be_dropped_without_a_vote(tmp_path):
    with LoopbackAPI() as state:
        state.responder = responder(copy_for=("第2句",))
        kept, review, report = run(tmp_path, state, leak={"action": "drop"})
        votes = sum(n for user, n in state.requests.items() if "反推出" not in user)
    assert [i["id"] for i in kept] == ["itinerary_response-00001", "itinerary_response-00004"]
    assert review == [] and votes == 6
    assert report["leaked"] == report["leaks_dropped"] == 1 and report["leak"]["action"] == "drop"


def test_the_threshold_decides_what_leaks(tmp_path):
    with LoopbackAPI() as state:
        state.responder = responder(copy_for=("第2句",))
        kept, review, report = run(tmp_path, state, leak={"threshold": 1.0})  # nothing is above all of it
    assert len(kept) == 3 and review == [] and report["leaked"] == 0
    assert report["leak"]["overlap"]["max"] == 1.0 and report["leak"]["overlap"]["above_threshold"] == 0


def test_voters_are_asked_whether_the_input_leaks_and_a_leak_vote_is_not_a_keep(tmp_path):
    with LoopbackAPI() as state:
        state.responder = responder(leaks=lambda user: "第4句" in user)
        kept, review, report = run(tmp_path, state)
    assert [i["id"] for i in kept] == ["itinerary_response-00001", "itinerary_response-00002"]
    assert [(r["id"], r["status"], r["votes"]) for r in review] == [
        ("itinerary_response-00004", "rejected", "leak leak leak")
    ]
    assert report["leaked"] == 0 and report["leak"]["votes_saying_leak"] == 3
    asked = verification_messages(kept[0])[1]["content"]
    assert '"leaks": true 或 false' in asked and "照抄输入就能得到参考回答" in asked


def test_rerun_resumes_from_the_cache(tmp_path):
    with LoopbackAPI() as state:
        state.responder = responder()
        run(tmp_path, state)
        first = sum(state.requests.values())
        kept, _, _ = run(tmp_path, state)
        assert sum(state.requests.values()) == first  # nothing sent again
    assert len(kept) == 3


def test_review_import_round_trip(tmp_path):
    with LoopbackAPI() as state:
        state.responder = responder(bad_for=("第1句",))
        kept, review, _ = run(tmp_path, state, votes=1, max_attempts=1)
    path = tmp_path / "review.csv"
    write_review_csv(review, path)
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    assert rows[0]["status"] == "reconstruction_failed" and rows[0]["fields"] == ""
    rows[0]["decision"], rows[0]["reviewer"] = "keep", "annotator-7"
    rows[0]["fields"] = json.dumps(FIELDS, ensure_ascii=False)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    ids = [r["id"] for r in review] + [i["id"] for i in kept]
    decisions = read_review_decisions([path], ids)
    merged = apply_decisions(kept, review, decisions)
    added = next(i for i in merged if i["id"] == "itinerary_response-00001")
    assert added["fields"] == FIELDS
    assert added["provenance"]["human_review"][0]["rater"] == "annotator-7"
    assert len(merged) == len(kept) + 1
    rows[0]["decision"] = "maybe"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with pytest.raises(DataError, match=r"line 2: decision 'maybe' is not one the form offers \(keep, drop\)"):
        read_review_decisions([path], ids)


def test_parsers():
    answer = '说明：{"itinerary": "上午开会", "specific_arrangements": "14:00 写生"}'
    assert parse_fields(answer, "itinerary_advanced") == {
        "itinerary": "上午开会",
        "specific_arrangements": "14:00 写生",
    }
    with pytest.raises(ValueError):
        parse_fields("没有JSON", "itinerary_middle")
    assert parse_vote('{"plausible": "false", "leaks": false, "reason": "答非所问"}') == Vote(False, False, "答非所问")
    assert parse_vote("我觉得可以").keep is None
    assert parse_vote('{"plausible": true, "leaks": false}').keep is True
    assert parse_vote('{"plausible": true, "leaks": true}').keep is False  # the input gives the answer away
    # a vote is read whole or not at all, as every judge's verdict is (tests/test_verdicts.py)
    for half in ('{"plausible": false}', '{"plausible": true, "reason": "合理"}'):
        vote = parse_vote(half)
        assert vote == Vote(None, None, f"vote without a true/false 'leaks': {half}") and vote.keep is None


def test_sample_is_seeded_and_kept_only():
    records = [{"id": str(i), "kept": i % 5 != 0} for i in range(40)]
    a = sample_references(records, 5, 7, "dialogue_base")
    assert a == sample_references(records, 5, 7, "dialogue_base")
    assert a != sample_references(records, 5, 8, "dialogue_base")
    assert all(r["kept"] for r in a) and len(a) == 5


@pytest.mark.slow
def test_real_local_model_on_a_small_sample(tmp_path):
    """The stage with the real local model: whatever the tiny model answers, nothing crashes or is dropped."""
    from h2htalk.generation.provision import provision_gguf

    registry = load_registry(REPO_ROOT / "config" / "models.yaml")
    spec = registry["qwen2.5-coder-0.5b-instruct-q4km"]
    model = tmp_path / "model.gguf"
    provision_gguf(spec["gguf"], model)
    settings = options(tmp_path, votes=1, max_attempts=2, sample_per_subtask=1, max_new_tokens=160)
    client = ClientSettings(
        concurrency=1, timeout_s=300, retries=1, backoff_base_s=1.0, backoff_max_s=2.0, max_failure_rate=0.0,
        retry_failed=False, rate_limits={}, batch_poll_s=1.0,
    )  # fmt: skip
    engines = EngineOptions(client, 1234, {spec["name"]: str(model)}, tmp_path / "server.log")
    with ModelPool(engines, settings.cache_dir, batch=False) as pool:
        kept, review, report = reconstruct_subtask(
            "itinerary_response", curated(tmp_path), spec, [spec], settings, pool
        )
    assert report["sampled"] == 1
    # the sampled reference is accounted for: kept, flagged by the vote, failed, or caught leaking its reference
    # (the tiny model often copies the reference into the input it writes)
    assert report["kept"] + report["flagged"] + report["failed"] + report["leaked"] == 1
    assert len(kept) + len(review) == 1
    for instance in kept:
        check_instance(instance, instance["id"])


def test_the_reconstruct_command_works_in_the_results_tree_and_resumes(tmp_path):
    """The reconstruct command: the configured subtasks' curated references in, the instances, report and
    review file of each out, where the layout puts them; a rerun is answered from the cache."""
    from h2htalk.cli import main
    from h2htalk.layout import Layout

    results = Layout(str(tmp_path / "results"))
    registry, config = tmp_path / "models.yaml", tmp_path / "config.yaml"
    Path(results.path("curated", subtask="itinerary_response")).parent.mkdir(parents=True)
    Path(results.path("curated", subtask="itinerary_response")).write_bytes(curated(tmp_path).read_bytes())
    with LoopbackAPI() as state:
        state.responder = responder()
        entry = {k: v for k, v in stub_spec("stub-generator", state.base_url).items() if k != "name"}
        registry.write_text(json.dumps({"stub-generator": {**entry, "size_group": "specialized"}}), encoding="utf-8")
        section = {"generator": "stub-generator", "voters": ["stub-generator"], "votes": 1, "cache_dir": str(tmp_path)}
        settings = {"model_registry": str(registry), "subtasks": ["itinerary_response"]}
        config.write_text(json.dumps({**settings, "instances": {"reconstruct": section}}), encoding="utf-8")
        command = ["reconstruct", "--config", str(config), "--results", str(results.root)]
        assert main(command) == 0
        sent = sum(state.requests.values())
        assert main(command) == 0
        assert sum(state.requests.values()) == sent == 3 + 3  # 3 kept references: 3 inputs, 3 votes; then none
    assert len(read_jsonl(results.path("reconstructed", subtask="itinerary_response"))) == 3
    report = json.loads(Path(results.path("reconstruction_report", subtask="itinerary_response")).read_text())
    assert report["sampled"] == 3 and report["kept_after_review"] == 3
    assert Path(results.path("instance_review", subtask="itinerary_response")).is_file()


def test_a_subtask_with_no_kept_instances_is_an_empty_cell_not_an_error(tmp_path):
    from h2htalk.instances.sources import write_instances

    empty = tmp_path / "reconstructed" / "itinerary_middle.jsonl"
    empty.parent.mkdir()
    empty.write_text("", encoding="utf-8")
    out = tmp_path / "results" / "instances" / "itinerary_middle.jsonl"
    done = write_instances("itinerary_middle", [str(empty)], str(out), {"instances": {"limit": None}})
    assert done.facts.startswith("0 instances") and out.read_text(encoding="utf-8") == ""
