"""Data stage commands: validate-config, fetch, prefetch, curate, curation-report."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from h2htalk.cli.options import (
    REGISTRY_READS,
    add_command,
    add_results,
    embedder_settings,
    load_config,
    overrides,
    registry_entry,
)
from h2htalk.progress import summary
from h2htalk.subtasks import SUBTASK_KEYS


def register(sub: Any) -> None:
    p = add_command(
        sub, "validate-config", cmd_validate_config,
        "check config files against the schema, and that the environment holds the API keys of the models they use",
    )  # fmt: skip
    p.add_argument("configfiles", nargs="+", metavar="FILE", help="later files overlay earlier ones")

    p = add_command(
        sub, "fetch", cmd_fetch, "download (or copy) and check the 11 upstream reference files",
        reads=("data", "upstream_dir"),
    )  # fmt: skip
    add_results(p)
    p.add_argument("--upstream-dir", help="copy from this folder instead of downloading (overrides upstream_dir)")
    overrides(p, upstream_dir="upstream_dir")

    p = add_command(
        sub, "prefetch", cmd_prefetch, "fetch a model's or embedder's Hugging Face weights and record the commit",
        reads=(*REGISTRY_READS, "embedders"),
    )  # fmt: skip
    add_results(p)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--model", help="registry name (vLLM weights, and a LoRA adapter given as a hub id)")
    what.add_argument("--embedder", help="embedder name (BGE-M3 given as a hub id)")

    p = add_command(sub, "curate", cmd_curate, "curate one fetched upstream file into flagged JSONL", reads=("data",))
    add_results(p)
    p.add_argument("--subtask", required=True, choices=SUBTASK_KEYS)

    p = add_command(sub, "curation-report", cmd_curation_report, "combine the curation reports", ("subtasks",))
    add_results(p)


def cmd_validate_config(args: argparse.Namespace) -> int:
    from h2htalk.config import check_environment
    from h2htalk.config import load_config as load_files

    check_environment(load_files(args.configfiles))
    print(f"{' + '.join(args.configfiles)}: valid")
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    from h2htalk.data.fetch import fetch_release
    from h2htalk.settings import UpstreamSource

    config = load_config(args)
    out_dir = Path(args.results.path("upstream", file="-")).parent
    manifest_path = args.results.path("manifest")
    manifest = fetch_release(out_dir, manifest_path, UpstreamSource.from_config(config), config["upstream_dir"])
    lines = sum(f["lines"] for f in manifest["files"])
    summary(f"{len(manifest['files'])} files, {lines} lines", out=manifest_path)
    return 0


def cmd_curate(args: argparse.Namespace) -> int:
    from h2htalk.data.curate import curate_subtask
    from h2htalk.settings import CurateOptions
    from h2htalk.subtasks import get_subtask

    subtask = get_subtask(args.subtask)
    results = args.results
    report = curate_subtask(
        subtask,
        results.path("upstream", file=subtask.upstream_file),
        results.path("manifest"),
        results.path("curated", subtask=subtask.key),
        results.path("curation", subtask=subtask.key),
        CurateOptions.from_config(load_config(args)),
    )
    flagged = ", ".join(f"{f}={n}" for f, n in report["flags"].items() if n)
    kept = f"{report['released']} released, {report['kept']} kept" + (f" ({flagged})" if flagged else "")
    summary(kept, subject=args.subtask)
    return 0


def cmd_curation_report(args: argparse.Namespace) -> int:
    from h2htalk.data.curation_report import write_curation_report

    results = args.results
    reports = [results.path("curation", subtask=key) for key in load_config(args)["subtasks"]]
    out_md = results.path("curation_report_md")
    combined = write_curation_report(reports, results.path("curation_report"), out_md)
    summary(f"{combined['totals']['released']} released, {combined['totals']['kept']} kept", out=out_md)
    return 0


def cmd_prefetch(args: argparse.Namespace) -> int:
    from h2htalk.llm.engines import engine_of
    from h2htalk.prefetch import embedder_downloads, prefetch

    config = load_config(args)
    if args.model:
        spec = registry_entry(config, args.model)
        kind, name, downloads = "models", args.model, engine_of(spec).downloads(spec)
        out = args.results.path("prefetched_model", model=name)
    else:
        kind, name = "embedders", args.embedder
        downloads = embedder_downloads(embedder_settings(config, name))
        out = args.results.path("prefetched_embedder", embedder=name)
    record = prefetch(kind, name, downloads, out)
    fetched = ", ".join(f"{d['repo']}@{d['revision'][:12]} ({d['bytes']} bytes)" for d in record["downloads"])
    summary(fetched or "nothing to fetch", subject=name, out=out)
    return 0
