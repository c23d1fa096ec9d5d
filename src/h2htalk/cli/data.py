"""Data stage commands: validate-config, fetch, prefetch, curate, curation-report."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from h2htalk.cli.options import add_config, load_config, overrides, registry_entry
from h2htalk.progress import summary
from h2htalk.subtasks import SUBTASK_KEYS


def register(sub: Any) -> None:
    p = sub.add_parser(
        "validate-config", help="check config files (later ones overlay earlier ones) against the schema"
    )
    p.add_argument("configfiles", nargs="+", metavar="FILE")
    p.set_defaults(handler=cmd_validate_config)

    p = sub.add_parser("fetch", help="download (or copy) and check the 11 upstream reference files")
    add_config(p)
    p.add_argument("--upstream-dir", help="copy from this folder instead of downloading (overrides upstream_dir)")
    p.add_argument("--out-dir", type=Path, required=True, help="where the 11 files go, under their upstream names")
    p.add_argument("--manifest", type=Path, required=True, help="the manifest, written last")
    overrides(p, upstream_dir="upstream_dir")
    p.set_defaults(handler=cmd_fetch)

    p = sub.add_parser("prefetch", help="fetch a model's or embedder's Hugging Face weights and record the commit")
    add_config(p)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--model", help="registry name (vLLM weights, and a LoRA adapter given as a hub id)")
    what.add_argument("--embedder", help="embedder name (BGE-M3 given as a hub id)")
    p.add_argument("--out", type=Path, required=True, help="the record (JSON): repositories, commits, sizes")
    p.set_defaults(handler=cmd_prefetch)

    p = sub.add_parser("curate", help="curate one fetched upstream file into a flagged JSONL and its report")
    add_config(p)
    p.add_argument("--subtask", required=True, choices=SUBTASK_KEYS)
    p.add_argument("--upstream", type=Path, required=True, help="the subtask's fetched upstream file")
    p.add_argument("--manifest", type=Path, required=True, help="the fetch manifest (its SHA-256 is checked)")
    p.add_argument("--out", type=Path, required=True, help="curated records (JSONL)")
    p.add_argument("--report", type=Path, required=True, help="counts per flag (JSON)")
    p.set_defaults(handler=cmd_curate)

    p = sub.add_parser("curation-report", help="combine per-subtask curation reports")
    p.add_argument("reports", nargs="+", type=Path)
    p.add_argument("--out-json", type=Path, required=True)
    p.add_argument("--out-md", type=Path, required=True)
    p.set_defaults(handler=cmd_curation_report)


def cmd_validate_config(args: argparse.Namespace) -> int:
    from h2htalk.config import load_config as load_files

    load_files(args.configfiles)
    print(f"{' + '.join(args.configfiles)}: valid")
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    from h2htalk.data.fetch import fetch_release
    from h2htalk.settings import UpstreamSource

    config = load_config(args)
    manifest = fetch_release(args.out_dir, args.manifest, UpstreamSource.from_config(config), config["upstream_dir"])
    lines = sum(f["lines"] for f in manifest["files"])
    summary(f"fetched {len(manifest['files'])} files, {lines} lines -> {args.manifest}")
    return 0


def cmd_curate(args: argparse.Namespace) -> int:
    from h2htalk.data.curate import curate_subtask
    from h2htalk.settings import CurateOptions
    from h2htalk.subtasks import get_subtask

    options = CurateOptions.from_config(load_config(args))
    report = curate_subtask(get_subtask(args.subtask), args.upstream, args.manifest, args.out, args.report, options)
    flagged = ", ".join(f"{f}={n}" for f, n in report["flags"].items() if n)
    summary(
        f"{args.subtask}: released {report['released']}, kept {report['kept']}" + (f" ({flagged})" if flagged else "")
    )
    return 0


def cmd_curation_report(args: argparse.Namespace) -> int:
    from h2htalk.data.curation_report import write_curation_report

    combined = write_curation_report(args.reports, args.out_json, args.out_md)
    summary(f"released {combined['totals']['released']}, kept {combined['totals']['kept']} -> {args.out_md}")
    return 0


def cmd_prefetch(args: argparse.Namespace) -> int:
    from h2htalk.errors import H2HTalkError
    from h2htalk.prefetch import embedder_downloads, model_downloads, prefetch

    config = load_config(args)
    if args.model:
        kind, name, downloads = "models", args.model, model_downloads(registry_entry(config, args.model))
    elif args.embedder in config["embedders"]:
        kind, name, downloads = "embedders", args.embedder, embedder_downloads(config["embedders"][args.embedder])
    else:
        raise H2HTalkError(f"embedder {args.embedder!r} is not defined under 'embedders'")
    record = prefetch(kind, name, downloads, args.out)
    fetched = ", ".join(f"{d['repo']}@{d['revision'][:12]} ({d['bytes']} bytes)" for d in record["downloads"])
    summary(f"prefetch {name}: {fetched or 'nothing to fetch'} -> {args.out}")
    return 0
