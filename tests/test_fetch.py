"""The fetch stage against a real HTTP server on loopback, and from a local folder."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from h2htalk.cli import main
from h2htalk.data.fetch import fetch_release
from h2htalk.errors import DataError
from h2htalk.settings import UpstreamSource
from h2htalk.subtasks import SUBTASKS, get_subtask

COMMIT = "4730dae9d853a2adabdc16083f862ed8f9d50033"


def source_for(server, retries: int = 0) -> UpstreamSource:
    return UpstreamSource(
        repo="owner/repo",
        commit=COMMIT,
        url_template=server.url_template(),
        timeout_s=5,
        retries=retries,
        backoff_s=0.01,
    )


def assert_nothing_written(out_dir: Path, manifest: Path) -> None:
    assert not manifest.exists(), "a failed fetch must not leave a manifest"
    leftovers = list(out_dir.glob("*")) if out_dir.exists() else []
    assert leftovers == [], f"a failed fetch left files behind: {leftovers}"


def test_download_writes_files_and_manifest(fixture_server, tmp_path):
    out, manifest_path = tmp_path / "upstream", tmp_path / "manifest.json"
    manifest = fetch_release(out, manifest_path, source_for(fixture_server))

    on_disk = json.loads(manifest_path.read_text(encoding="utf-8"))
    assert on_disk == manifest
    assert on_disk["commit"] == COMMIT and on_disk["origin"] == "download"
    assert [f["subtask"] for f in on_disk["files"]] == [s.key for s in SUBTASKS]
    for entry in on_disk["files"]:
        data = (out / entry["file"]).read_bytes()
        served = (fixture_server.root / entry["file"]).read_bytes()
        assert data == served
        assert entry["sha256"] == hashlib.sha256(served).hexdigest()
        assert entry["size"] == len(served)
        assert entry["lines"] == get_subtask(entry["subtask"]).released
        assert entry["source"] == f"{fixture_server.base_url}/owner/repo/{COMMIT}/data/{entry['file']}"
    assert sum(fixture_server.requests.values()) == 11


def test_404_names_the_file_and_leaves_nothing(fixture_server, tmp_path):
    (fixture_server.root / "dialogue_emotion.jsonl").unlink()
    out, manifest = tmp_path / "upstream", tmp_path / "manifest.json"
    with pytest.raises(DataError, match=r"dialogue_emotion\.jsonl: HTTP 404"):
        fetch_release(out, manifest, source_for(fixture_server))
    assert_nothing_written(out, manifest)


def test_truncated_download_is_retried_then_reported(fixture_server, tmp_path):
    path = f"/owner/repo/{COMMIT}/data/recollection_refine.jsonl"
    fixture_server.faults[path] = ["truncate", "truncate"]
    out, manifest = tmp_path / "upstream", tmp_path / "manifest.json"
    with pytest.raises(DataError, match=r"recollection_refine\.jsonl: truncated download.*gave up after 2 attempts"):
        fetch_release(out, manifest, source_for(fixture_server, retries=1))
    assert fixture_server.requests[path] == 2
    assert_nothing_written(out, manifest)


def test_transient_server_error_is_retried(fixture_server, tmp_path):
    path = f"/owner/repo/{COMMIT}/data/itinerary_basic.jsonl"
    fixture_server.faults[path] = ["500", "truncate"]
    out, manifest = tmp_path / "upstream", tmp_path / "manifest.json"
    fetch_release(out, manifest, source_for(fixture_server, retries=2))
    assert fixture_server.requests[path] == 3
    assert manifest.exists()


def test_line_that_is_not_json_names_file_and_line(fixture_server, tmp_path):
    target = fixture_server.root / "itinerary_middle.jsonl"
    lines = target.read_bytes().split(b"\r\n")
    lines[6] = b'{"response": "unterminated'
    target.write_bytes(b"\r\n".join(lines))
    out, manifest = tmp_path / "upstream", tmp_path / "manifest.json"
    with pytest.raises(DataError, match=r"itinerary_middle\.jsonl: line 7: not valid JSON"):
        fetch_release(out, manifest, source_for(fixture_server))
    assert_nothing_written(out, manifest)


def test_response_that_is_not_a_string_names_file_and_line(fixture_server, tmp_path):
    target = fixture_server.root / "dialogue_base.jsonl"
    lines = target.read_bytes().split(b"\r\n")
    lines[2] = b'{"answer": "x"}'
    target.write_bytes(b"\r\n".join(lines))
    with pytest.raises(DataError, match=r"dialogue_base\.jsonl: line 3: 'response' must be a string \(missing\)"):
        fetch_release(tmp_path / "o", tmp_path / "m.json", source_for(fixture_server))


def test_count_mismatch_names_file_and_both_counts(fixture_server, tmp_path):
    target = fixture_server.root / "recollection_initialize.jsonl"
    target.write_bytes(b"\r\n".join(target.read_bytes().split(b"\r\n")[:40]) + b"\r\n")
    out, manifest = tmp_path / "upstream", tmp_path / "manifest.json"
    with pytest.raises(DataError, match=r"recollection_initialize\.jsonl: expected 41 lines, found 40"):
        fetch_release(out, manifest, source_for(fixture_server))
    assert_nothing_written(out, manifest)


def test_every_failing_file_is_reported_at_once(fixture_server, tmp_path):
    (fixture_server.root / "dialogue_base.jsonl").unlink()
    (fixture_server.root / "itinerary_feedback.jsonl").write_bytes(b'{"response": "x"}\r\n')
    with pytest.raises(DataError) as info:
        fetch_release(tmp_path / "o", tmp_path / "m.json", source_for(fixture_server))
    assert "dialogue_base.jsonl: HTTP 404" in str(info.value)
    assert "itinerary_feedback.jsonl: expected 163 lines, found 1" in str(info.value)


def test_rerun_after_failure_replaces_stale_manifest(fixture_server, tmp_path):
    out, manifest = tmp_path / "upstream", tmp_path / "manifest.json"
    fetch_release(out, manifest, source_for(fixture_server))
    (fixture_server.root / "dialogue_emotion.jsonl").unlink()
    with pytest.raises(DataError):
        fetch_release(out, manifest, source_for(fixture_server))
    assert not manifest.exists(), "a stale manifest would vouch for a fetch that failed"


def test_upstream_dir_replaces_the_download(synthetic_release, tmp_path):
    source = UpstreamSource("o/r", COMMIT, "http://127.0.0.1:9/{file}", timeout_s=5, retries=0, backoff_s=0.01)
    manifest = fetch_release(tmp_path / "o", tmp_path / "m.json", source, upstream_dir=synthetic_release)
    assert manifest["origin"] == "upstream_dir"
    assert sum(f["lines"] for f in manifest["files"]) == 4589


def test_cli_reports_errors_without_traceback(fixture_server, tmp_path, capsys):
    (fixture_server.root / "dialogue_emotion.jsonl").unlink()
    config = tmp_path / "config.json"
    overlay = {"data": {"upstream": {"url_template": fixture_server.url_template(), "retries": 0}}}
    config.write_text(json.dumps(overlay), encoding="utf-8")
    code = main(["fetch", "--config", str(config), "--results", str(tmp_path / "results")])
    err = capsys.readouterr().err
    assert code == 2
    assert "dialogue_emotion.jsonl: HTTP 404" in err
    assert "Traceback" not in err
    assert not (tmp_path / "results" / "data" / "manifest.json").exists()


def test_file_cut_mid_line_names_the_last_line(fixture_server, tmp_path):
    target = fixture_server.root / "dialogue_emotion.jsonl"
    data = target.read_bytes()
    target.write_bytes(data[: len(data) - 4])  # served whole, but the file ends inside its last line
    with pytest.raises(DataError, match=r"dialogue_emotion\.jsonl: line 99: not valid JSON"):
        fetch_release(tmp_path / "o", tmp_path / "m.json", source_for(fixture_server))
