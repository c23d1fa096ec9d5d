"""Config validation: defaults, and errors that name the offending key."""

from __future__ import annotations

import copy

import pytest
import yaml

from h2htalk.cli import main
from h2htalk.config import load_config, validate_config
from h2htalk.errors import ConfigError

from .conftest import REPO_ROOT


@pytest.fixture
def local_config() -> dict:
    return yaml.safe_load((REPO_ROOT / "config" / "local.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", ["config.yaml", "local.yaml"])
def test_shipped_configs_are_valid(name):
    config = load_config(REPO_ROOT / "config" / name)
    assert config["data"]["upstream"]["commit"] == "4730dae9d853a2adabdc16083f862ed8f9d50033"
    assert len(config["subtasks"]) == 11


def test_defaults_are_filled_in(local_config):
    del local_config["data"]["curate"]
    del local_config["data"]["upstream"]["retries"]
    config = validate_config(local_config)
    assert config["data"]["upstream"]["retries"] == 3
    assert config["data"]["curate"]["anonymise"]["person_name"] == "flag"
    assert config["data"]["curate"]["exclude_flags"] == ["empty", "meta_refusal", "leftover_instruction", "sensitive"]


def test_misspelled_key_is_named_with_a_suggestion(local_config):
    local_config["upstrem_dir"] = "/data"
    with pytest.raises(ConfigError, match=r"unknown key 'upstrem_dir' \(did you mean 'upstream_dir'\?\)"):
        validate_config(local_config)


def test_nested_misspelled_key_is_named_by_path(local_config):
    local_config["data"]["curate"]["exlude_flags"] = ["empty"]
    with pytest.raises(ConfigError, match=r"unknown key 'data\.curate\.exlude_flags'"):
        validate_config(local_config)


def test_wrong_value_names_the_key(local_config):
    bad = copy.deepcopy(local_config)
    bad["data"]["upstream"]["commit"] = "main"
    bad["data"]["curate"]["anonymise"]["phone"] = "scramble"
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
    local_config["paper"]["tabel1"] = "x.csv"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(local_config, allow_unicode=True), encoding="utf-8")
    assert main(["validate-config", str(bad)]) == 2
    assert "unknown key 'paper.tabel1' (did you mean 'table1'?)" in capsys.readouterr().err
