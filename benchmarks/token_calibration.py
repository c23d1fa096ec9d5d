"""Calibrate the offline token estimate (``h2htalk.llm.tokens``) against a real tokenizer, and compare both with
the stand-in engines' count.

    python benchmarks/token_calibration.py --gguf results/models/qwen2.5-coder-0.5b-instruct-q4km.gguf \
        --upstream-dir /path/to/H2HTalk/data [--results DIR]

Tokenizes with the GGUF file's own vocabulary (llama.cpp, vocabulary only: Qwen2.5's tokenizer for the laptop
model): the release's references, the persona, SAP and task prompts, the judges' and the reconstruction's
prompts, and, with ``--results`` (a run's results tree: a rehearsal's), the rendered prompts of every subtask and
study and the rubric and study judges' prompts built from its answers. Fits the characters a token of CJK text
and of other non-letter characters (digits are one token each, ASCII letters four a token), and prints, by kind
of text, how far the estimate, and the stand-ins' count, is from the tokenizer. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from llama_cpp import Llama

from h2htalk.instances.reconstruct import reconstruction_messages
from h2htalk.io import iter_jsonl
from h2htalk.judge.rubric import judge_messages
from h2htalk.judge.study import need_messages, safety_messages
from h2htalk.llm.tokens import character_classes, text_tokens
from h2htalk.prompts.render import persona_text, sap_text, task_assistant_text
from h2htalk.subtasks import JUDGED, SUBTASK_KEYS


def released(upstream: Path) -> Iterator[str]:
    for path in sorted(upstream.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8-sig").splitlines():
            if line.strip():
                yield json.loads(line)["response"]


def run_prompts(results: Path) -> Iterator[tuple[str, str]]:
    """(kind, text) of the prompts a run sent: its rendered prompts, and its judges' prompts."""
    for path in sorted(results.glob("prompts/*/*.jsonl")) + sorted(results.glob("studies/*/prompts/*.jsonl")):
        for _, record in iter_jsonl(path):
            for message in record["messages"]:
                yield "generation prompt", message["content"]
            for turn in record.get("user_turns", []):
                yield "generation prompt", turn
    for path in sorted(results.glob("generations/*/*/*.jsonl")):
        subtask, variant = path.stem, path.parent.name
        if subtask in JUDGED:
            prompts = {r["id"]: r for _, r in iter_jsonl(results / "prompts" / variant / f"{subtask}.jsonl")}
            instances = {r["id"]: r for _, r in iter_jsonl(results / "instances" / f"{subtask}.jsonl")}
            for _, answer in iter_jsonl(path):
                system, task = (m["content"] for m in prompts[answer["id"]]["messages"])
                reference = instances[answer["id"]]["reference"]
                for message in judge_messages(subtask, system, task, answer["response"], reference):
                    yield "rubric judge prompt", message["content"]
        elif subtask in ("safety", "instruction_following"):
            items = {r["id"]: r for _, r in iter_jsonl(results / "studies" / subtask / "items" / f"{variant}.jsonl")}
            build = safety_messages if subtask == "safety" else need_messages
            for _, answer in iter_jsonl(path):
                item = items[answer["id"]]
                seen = {**item, "turns": answer["conversation"]} if answer.get("conversation") else item
                for message in build(seen, answer["response"]):
                    yield "study judge prompt", message["content"]


def standin_tokens(text: str) -> int:
    """The stand-ins' count (tests/standins/messages.py): 1.5 CJK characters or 4 others a token."""
    return math.ceil(sum(8 if ord(ch) >= 0x2E80 else 3 for ch in text) / 12)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf", required=True, type=Path)
    parser.add_argument("--upstream-dir", required=True, type=Path)
    parser.add_argument("--results", type=Path, help="a run's results tree, for its prompts")
    args = parser.parse_args()
    vocabulary = Llama(model_path=str(args.gguf), vocab_only=True, verbose=False)
    texts = [("reference", text) for text in released(args.upstream_dir)]
    texts += [("system prompt", text) for text in (persona_text(), sap_text(), task_assistant_text())]
    texts += [("reconstruction prompt", m["content"]) for key in SUBTASK_KEYS for m in reconstruction_messages(key, "")]
    if args.results:
        texts += list(run_prompts(args.results))
    texts = list(dict.fromkeys(texts))
    real = np.array([len(vocabulary.tokenize(t.encode("utf-8"), add_bos=False)) for _, t in texts], dtype=float)
    classes = np.array([character_classes(t) for _, t in texts], dtype=float)  # cjk, digit, letter, other
    fixed = classes[:, 1] + classes[:, 2] / 4
    (cjk, other), *_ = np.linalg.lstsq(classes[:, [0, 3]], real - fixed, rcond=None)
    print(f"fit: {1 / cjk:.3f} CJK characters a token, {1 / other:.3f} other characters a token "
          f"(digits 1 a token, ASCII letters 4 a token); {len(texts)} texts, {real.sum():,.0f} tokens")  # fmt: skip
    estimate = np.array([text_tokens(t) for _, t in texts], dtype=float)
    standin = np.array([standin_tokens(t) for _, t in texts], dtype=float)
    print(f"{'kind':24} {'texts':>6} {'tokens':>11} {'estimate':>9} {'|one text|':>10} {'stand-ins':>9}")
    for kind in dict.fromkeys(k for k, _ in texts):
        rows = [i for i, (k, _) in enumerate(texts) if k == kind]
        tokens = real[rows].sum()
        spread = statistics.median(abs(estimate[rows] - real[rows]) / np.maximum(real[rows], 1))
        print(f"{kind:24} {len(rows):6,} {tokens:11,.0f} {estimate[rows].sum() / tokens - 1:+9.1%} {spread:10.1%} "
              f"{standin[rows].sum() / tokens - 1:+9.1%}")  # fmt: skip
    sys.stdout.flush()


if __name__ == "__main__":
    main()
