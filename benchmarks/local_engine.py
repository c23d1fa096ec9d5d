"""How close the laptop's local engine runs to the machine's limit, on the laptop's real generation requests.

    python benchmarks/local_engine.py [--model-file results/models/X.gguf]

1. The machine's two rates, measured first, in this run, the way llama.cpp's ``llama-bench`` does (pp512:
   evaluate a 512-token prompt; tg128: decode 128 tokens one at a time), with the server's thread count;
   beside them the same rates with logits kept for every prompt token, as llama_cpp.server does by default
   (the project's server turns that off).
2. The laptop config's generation (config/config.yaml + config/local.yaml): the demo instances of all 11
   subtasks in both variants, through the project's own ``generate_model`` and llama.cpp server, on an empty
   cache.
3. From the server's log and the answers: prompt tokens sent, prompt tokens the server evaluated (what its
   prefix reuse did not save), the fewest any engine must evaluate (every distinct prefix once: the size of
   the token trie of all prompts), decode tokens, and how often each distinct system prompt (persona or task
   line, with or without SAP) was evaluated.
4. Wall time against the floor: fewest prompt tokens / pp + decode tokens / tg.

Nothing is asserted; the figures go into the issue note.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from collections import Counter
from pathlib import Path

from h2htalk.config import load_registry, merge_layers, validate_config
from h2htalk.generation.generate import PromptFile, generate_model
from h2htalk.generation.provision import provision_gguf
from h2htalk.instances.sources import demo_instances
from h2htalk.io import read_jsonl
from h2htalk.llm.calls import EngineOptions
from h2htalk.llm.engines import open_endpoint
from h2htalk.prompts.render import write_prompts
from h2htalk.settings import VARIANTS, GenerationSettings
from h2htalk.subtasks import SUBTASK_KEYS

ROOT = Path(__file__).resolve().parents[1]
EVALUATED = re.compile(r"prompt eval time =\s+[\d.]+ ms /\s+(\d+) tokens")  # one line per request


def machine_rates(model_file: Path, threads: int, logits_all: bool = False) -> tuple[float, float]:
    """(prompt tokens/s, decode tokens/s) as llama-bench's pp512 and tg128 measure them; ``logits_all`` as
    llama_cpp.server's default has it (logits kept for every prompt token), for comparison."""
    from llama_cpp import Llama

    llm = Llama(str(model_file), n_threads=threads, n_ctx=1024, logits_all=logits_all, verbose=False)
    tokens = (llm.tokenize("我们今天去公园散步，然后喝一杯咖啡。".encode() * 64, add_bos=False) * 4)[:512]
    llm.eval(tokens[:16])  # warm up
    llm.reset()
    start = time.perf_counter()
    llm.eval(tokens)
    pp = len(tokens) / (time.perf_counter() - start)
    start = time.perf_counter()
    for _ in range(128):
        llm.eval([llm.sample(temp=0.0)])
    tg = 128 / (time.perf_counter() - start)
    del llm
    return pp, tg


def prompt_tokens(model_file: Path, messages_list: list[list[dict[str, str]]]) -> list[list[int]]:
    """Each request's prompt as the server sees it: the model's chat template, tokenised."""
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    llm = Llama(str(model_file), vocab_only=True, verbose=False)
    template = llm.metadata["tokenizer.chat_template"]
    eos = llm.detokenize([llm.token_eos()]).decode()
    formatter = Jinja2ChatFormatter(template, eos_token=eos, bos_token="")
    return [
        llm.tokenize(formatter(messages=messages).prompt.encode(), add_bos=False, special=True)
        for messages in messages_list
    ]


def trie_size(sequences: list[list[int]]) -> int:
    """Tokens in the trie of all sequences: each distinct prefix counted once (sorted neighbours share the
    longest prefix any earlier sequence shares)."""
    total, previous = 0, []
    for sequence in sorted(sequences):
        common = 0
        while common < min(len(sequence), len(previous)) and sequence[common] == previous[common]:
            common += 1
        total += len(sequence) - common
        previous = sequence
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-file", type=Path, help="the GGUF file (provisioned into a temp folder if absent)")
    args = parser.parse_args()
    config = validate_config(merge_layers([ROOT / "config" / "config.yaml", ROOT / "config" / "local.yaml"], []))
    name = config["models"][0]
    spec = load_registry(ROOT / config["model_registry"])[name]
    threads = spec["llamacpp"]["threads"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model_file = args.model_file
        if model_file is None or not model_file.exists():
            model_file = work / "model.gguf"
            provision_gguf(spec["gguf"], model_file)
        pp, tg = machine_rates(model_file, threads)
        pp_all, tg_all = machine_rates(model_file, threads, logits_all=True)
        files = []
        for variant in VARIANTS:
            for subtask in SUBTASK_KEYS:
                prompts = work / "prompts" / variant / f"{subtask}.jsonl"
                write_prompts(demo_instances(subtask), variant, prompts)
                files.append(PromptFile.read(prompts, work / "out" / variant / f"{subtask}.jsonl"))
        settings = GenerationSettings.from_config(
            {**config, "generation": {**config["generation"], "cache_dir": str(work / "cache")}}
        )
        log = work / "server.log"
        with open_endpoint(spec, model_file=str(model_file), log_path=log) as endpoint:
            start = time.perf_counter()
            generate_model(spec, files, settings, EngineOptions(settings.client, settings.seed, endpoint=endpoint))
            wall = time.perf_counter() - start
        records = [r for f in files for r in read_jsonl(f.out)]
        requests = [p["messages"] for f in files for p in read_jsonl(f.prompts)]
        tokenised = prompt_tokens(model_file, requests)
        systems = [m[0]["content"] for m in requests]
        distinct = sorted(set(systems))
        alone = prompt_tokens(model_file, [[{"role": "system", "content": s}] for s in distinct])
        system_lengths = {s: len(t) for s, t in zip(distinct, alone, strict=True)}
        evaluated = [int(n) for n in EVALUATED.findall(log.read_text(errors="replace"))]
    sent = sum(len(t) for t in tokenised)
    fewest = trie_size(tokenised)
    decode = sum(r["completion_tokens"] or 0 for r in records)
    prompt_evaluated = sum(evaluated)
    # the server took the requests in prefix order (as the generate stage sends them); a system prompt was
    # evaluated (again) whenever the prefix it reused was shorter than half of it
    order = sorted(range(len(requests)), key=lambda i: tuple(m["content"] for m in requests[i]))
    reused = [(i, len(tokenised[i]) - n) for i, n in zip(order, evaluated, strict=False)]
    again = Counter(systems[i] for i, hit in reused if hit < system_lengths[systems[i]] // 2)
    floor = fewest / pp + decode / tg
    print(f"model {name}, {threads} threads; {len(requests)} requests (demo instances, both variants)")
    print(f"machine: prompt evaluation {pp:.1f} tokens/s (pp512), decoding {tg:.1f} tokens/s (tg128)")
    print(f"  with logits for every token (llama_cpp.server's default): {pp_all:.1f} and {tg_all:.1f} tokens/s\n")
    print("| measure | value |\n|---|---|")
    print(f"| prompt tokens sent | {sent} |")
    print(f"| prompt tokens the server evaluated | {prompt_evaluated} ({prompt_evaluated / sent:.0%} of sent) |")
    print(f"| fewest any engine must evaluate (token trie) | {fewest} ({fewest / sent:.0%} of sent) |")
    print(f"| decode tokens | {decode} |")
    print(f"| system prompts evaluated (distinct: {len(system_lengths)}) | {sum(again.values())} |")
    print(f"| wall time | {wall:.1f} s |")
    print(f"| floor: fewest / pp + decode / tg | {floor:.1f} s |")
    print(f"| wall / floor | {wall / floor:.2f}x |")


if __name__ == "__main__":
    main()
