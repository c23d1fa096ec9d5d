"""How an engine whose server runs on this CPU (``Engine.timed_on_cpu``) measures its rates, as llama-bench names
them: pp512, 512 prompt tokens read in one evaluation, and tg128, tokens written one at a time at no context.

A run measures them through the server a job starts (``server_rates``: the engine's own command, threads and
environment), as the best of a few short trials; the benchmarks measure llama.cpp's in this process, after some
tokens of context (``in_process_rates``). ``h2htalk.plan.rates`` keeps what was measured.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Callable, Iterable
from typing import Any

from h2htalk.errors import H2HTalkError
from h2htalk.llm.engines.base import Engine, ServeOptions

PROMPT_PROBE = "周末的计划：早上去博物馆，下午在湖边野餐，晚上回家做饭。"
CONTEXT_TEXT = "我们今天去公园散步，然后喝一杯咖啡，聊聊最近读的书和想去的地方。"
COUNTING = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,"  # a text any model goes on writing
TG_TOKENS = 128


def best_of_trials(
    trial: Callable[[], tuple[float, float]],
    most: int = 3,
    least: int = 2,
    budget_s: float = 20.0,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[float, float, int]:
    """The best pp512 and tg128 of ``least`` to ``most`` trials: no trial starts after ``budget_s`` once ``least``
    are done. Returns (pp512, tg128, trials)."""  # fmt: skip
    start, pp, tg, done = clock(), 0.0, 0.0, 0
    while done < most and (done < least or clock() - start < budget_s):
        trial_pp, trial_tg = trial()
        pp, tg, done = max(pp, trial_pp), max(tg, trial_tg), done + 1
    return pp, tg, done


def server_rates(
    engine: Engine, spec: dict[str, Any], options: ServeOptions, most: int = 3, least: int = 2, budget_s: float = 20.0
) -> tuple[float, float, int]:
    """pp512 and tg128 on the server ``engine`` starts for ``spec`` as a job would: the best of ``least`` to ``most``
    trials after a warm-up request. Returns (pp512, tg128, trials)."""  # fmt: skip
    with engine.endpoint(spec, options) as endpoint:
        ask = lambda prompt, tokens: _completion(endpoint.base_url, endpoint.api_key, prompt, tokens)  # noqa: E731
        long_prompt = PROMPT_PROBE * (512 // ask(PROMPT_PROBE, 1)[1] + 1)
        count = iter(range(1, most + 2))

        def trial() -> tuple[float, float]:
            # each trial's prompt starts with other tokens: the server keeps the request before's and would read
            # only what follows what they share
            seconds, prompt_tokens, _ = ask(f"{next(count)}. {long_prompt}", 1)
            pp = prompt_tokens / seconds
            seconds, prompt_tokens, written = ask(COUNTING, TG_TOKENS)
            # the first token comes from the prompt's evaluation, each further one from one more
            return pp, (written - 1) / max(seconds - prompt_tokens / pp, 1e-6)

        return best_of_trials(trial, most, least, budget_s)


def _completion(base_url: str, key: str, prompt: str, tokens: int) -> tuple[float, int, int]:
    """Seconds of one completion of exactly ``tokens`` tokens at temperature 0, its prompt's and answer's tokens."""
    body = {"prompt": prompt, "max_tokens": tokens, "min_tokens": tokens, "temperature": 0.0}
    request = urllib.request.Request(
        f"{base_url}/completions", json.dumps(body).encode(),
        {"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
    )  # fmt: skip
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=600) as response:
        usage = json.load(response)["usage"]
    return time.perf_counter() - start, int(usage["prompt_tokens"]), int(usage["completion_tokens"])


def in_process_rates(
    model_file: str | os.PathLike[str], threads: int, flash_attn: bool, depths: Iterable[int] = (0,)
) -> list[tuple[int, float, float]]:
    """(depth, pp512, tg128) of llama.cpp after each of ``depths`` tokens of context, as ``llama-bench -d`` measures
    them, in this process (the benchmarks' floor at depth; a run measures on its server, ``server_rates``)."""
    depths = list(depths)
    llm = llama_cpp().Llama(
        str(model_file), n_threads=threads, n_threads_batch=threads, n_ctx=max(depths) + 1024, logits_all=False,
        flash_attn=flash_attn, verbose=False,
    )  # fmt: skip
    context = llm.tokenize(CONTEXT_TEXT.encode() * (max(depths) // 20 + 1), add_bos=False)[: max(depths)]
    probe = llm.tokenize(PROMPT_PROBE.encode() * 40, add_bos=False)[:512]
    llm.eval(probe[:16])  # warm up
    llm.n_tokens = 0
    rates = []
    for depth in depths:
        llm.n_tokens = min(llm.n_tokens, depth)
        llm.eval(context[llm.n_tokens : depth])
        start = time.perf_counter()
        llm.eval(probe)
        pp = len(probe) / (time.perf_counter() - start)
        llm.n_tokens = depth
        llm.eval(probe[:1])
        start = time.perf_counter()
        for _ in range(TG_TOKENS):
            llm.eval([llm.sample(temp=0.0)])
        tg = TG_TOKENS / (time.perf_counter() - start)
        llm.n_tokens = depth
        rates.append((depth, pp, tg))
    del llm
    return rates


def llama_cpp() -> Any:
    """The llama-cpp-python module, or an error saying how to install it."""
    try:
        import llama_cpp
    except ModuleNotFoundError as exc:
        raise H2HTalkError("measuring llama.cpp's rates needs llama-cpp-python (pip install -e '.[local]')") from exc
    return llama_cpp
