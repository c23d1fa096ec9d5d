"""The machine's llama.cpp rates, as the run's jobs will get them: measured on the run's own server, kept per load
in the user's cache, and replaced by what a finished run's jobs achieved.

llama-bench names the two rates: pp512, 512 prompt tokens read in one evaluation, and tg128, tokens written one at a
time at no context. They are measured through the server a job starts (``llm.engines.llamacpp``: its command, its
threads, flash attention, context and environment, ``GOMP_SPINCOUNT`` included), as the best of a few short trials,
with the cores other processes keep busy read just before. The cache (``rates_cache_file``) holds records per
setting (``rates_key``): the machine's rates, measured or learned from a whole run, and those each kind of job ran at
in a finished run, each with when it was made and under what load. A record is used where the load now is within
``LOAD_TOLERANCE`` cores of its own (and, where the threads waiting to run are known, past the cores there are, about
as many wait as then: ``CROWD_TOLERANCE``); a finished run replaces one whose rates put its jobs' time more than
``DISAGREEMENT`` off.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from h2htalk.errors import H2HTalkError
from h2htalk.hardware import available_cores, cpu_name, one_core_share
from h2htalk.io import write_json_atomic

MACHINE = "machine"  # a record of the machine's rates, for any job kind without its own
LOAD_TOLERANCE = 0.5  # cores: records made at loads this close are of the same state of the machine
DISAGREEMENT = 0.25  # a record whose rates put a finished run's time further off than this is replaced
KEPT_PER_KIND = 4  # records of one kind at different loads; the oldest go first
# where the threads waiting to run are known, records whose share of a core for a one-thread job differs by more than
# this factor are of different states of the machine, though the busy cores read the same ("2.0 of 2" at 4 and at 38)
CROWD_TOLERANCE = 1.5

PROMPT_PROBE = "周末的计划：早上去博物馆，下午在湖边野餐，晚上回家做饭。"
CONTEXT_TEXT = "我们今天去公园散步，然后喝一杯咖啡，聊聊最近读的书和想去的地方。"
COUNTING = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,"  # a text any model goes on writing
TG_TOKENS = 128


@dataclass(frozen=True)
class Record:
    kind: str  # MACHINE, or the job kind (a stage's name, or "other jobs") whose jobs ran at these rates
    pp512: float
    tg128: float
    load: float | None  # cores other processes kept busy when it was made (None: not known on this system)
    cores: int  # the cores the jobs could use
    made: str  # ISO 8601, UTC
    source: str  # "measured" (on the run's server, best of its trials) or "run" (a finished run's jobs)
    runnable: float | None = None  # threads of other processes waiting to run when it was made (None: not known)

    def near(self, load: float | None, runnable: float | None = None) -> bool:
        if self.runnable is not None and runnable is not None:
            shares = one_core_share(self.runnable, None, self.cores), one_core_share(runnable, None, self.cores)
            if max(shares) > CROWD_TOLERANCE * min(shares):
                return False
        return self.load is None or load is None or abs(self.load - load) <= LOAD_TOLERANCE

    def describe(self) -> str:
        when = self.made[:16].replace("T", " ")
        load = "load unknown" if self.load is None else f"other processes using {self.load:.1f} of {self.cores} cores"
        how = "measured" if self.source == "measured" else "a finished run's jobs"
        waiting = "" if self.runnable is None else f", {self.runnable:.1f} threads of theirs ready to run"
        return f"{self.kind}: pp512 {self.pp512:.0f}, tg128 {self.tg128:.1f} ({how}, {when} UTC, {load}{waiting})"


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def measure_rates(
    model_file: str | os.PathLike[str], threads: int, flash_attn: bool, depths: Iterable[int] = (0,)
) -> list[tuple[int, float, float]]:
    """(depth, pp512, tg128) after each of ``depths`` tokens of context, as ``llama-bench -d`` measures them, in this
    process (the benchmarks' floor at depth; a run measures on its server, ``server_rates``)."""
    depths = list(depths)
    llm = _llama_cpp().Llama(
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
        for _ in range(128):
            llm.eval([llm.sample(temp=0.0)])
        tg = 128 / (time.perf_counter() - start)
        llm.n_tokens = depth
        rates.append((depth, pp, tg))
    del llm
    return rates


def rates_cache_file() -> Path:
    """Where rates are kept between runs: the user's cache folder (``XDG_CACHE_HOME``)."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "h2htalk" / "llamacpp_rates.json"


def rates_key(spec: dict[str, Any], model_file: str | os.PathLike[str] | None = None) -> str:
    """What the rates depend on: the CPU, the server's threads, flash attention, context and spin count, the model
    (its registry name and checksum, or its file's size) and llama.cpp."""
    from h2htalk.llm.engines.llamacpp import LlamaCpp

    settings = spec["llamacpp"]
    threads = min(settings["threads"], available_cores())
    spin = LlamaCpp().server_environment("").get("GOMP_SPINCOUNT", "default")
    weights = spec.get("gguf", {}).get("sha256") or spec.get("gguf", {}).get("size")
    if weights is None and model_file is not None and Path(model_file).is_file():
        weights = Path(model_file).stat().st_size
    return (
        f"{cpu_name()} | {threads} threads | flash_attn {settings['flash_attn']} | n_ctx {settings['n_ctx']}"
        f" | GOMP_SPINCOUNT {spin} | {spec['name']} {weights} | llama_cpp {_llama_cpp().__version__}"
    )


def _llama_cpp() -> Any:
    try:
        import llama_cpp
    except ModuleNotFoundError as exc:
        raise H2HTalkError("measuring llama.cpp's rates needs llama-cpp-python (pip install -e '.[local]')") from exc
    return llama_cpp


def read_cache(path: Path) -> dict[str, list[Record]]:
    """The cache's records per setting; an unreadable file, or one of an older layout, holds none."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    found: dict[str, list[Record]] = {}
    for key, records in data.items() if isinstance(data, dict) else ():
        try:  # an earlier layout (one dict per key, measured in-process with libgomp's default spin) is dropped
            found[key] = [Record(**record) for record in records]
        except TypeError:
            continue
    return found


def write_cache(path: Path, cache: dict[str, list[Record]]) -> None:
    write_json_atomic(path, {key: [asdict(r) for r in records] for key, records in cache.items()})


def reset_cache(path: Path) -> bool:
    """Forget every record; False where there was no cache."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def kept_rates(path: Path, reset: bool = False) -> list[str]:
    """What the cache at ``path`` keeps, each setting's records by kind (``h2htalk rates``); with ``reset``, it
    forgets them all, and says so."""
    if reset:
        return [f"{path}: removed" if reset_cache(path) else f"{path}: no rates kept"]
    cache = read_cache(path)
    lines = [f"{path}: " + (f"rates of {len(cache)} settings" if cache else "no rates kept")]
    for key, records in cache.items():
        lines += [f"\n{key}", *(f"  {r.describe()}" for r in sorted(records, key=lambda r: (r.kind, r.made)))]
    return lines


def nearest(records: Iterable[Record], kind: str, load: float | None, runnable: float | None = None) -> Record | None:
    """The record of ``kind`` made at the load closest to ``load``, within ``LOAD_TOLERANCE`` (and as crowded as
    ``runnable`` threads waiting to run make it, within ``CROWD_TOLERANCE``); the newest of equals."""
    near = [r for r in records if r.kind == kind and r.near(load, runnable)]
    distance = lambda r: 0.0 if r.load is None or load is None else abs(r.load - load)  # noqa: E731
    return min(near, key=lambda r: (distance(r), -datetime.fromisoformat(r.made).timestamp()), default=None)


def keep(records: list[Record], new: Record) -> list[Record]:
    """``new`` in place of the record of its kind it is nearest to in load (if any is near), the oldest of its kind
    dropped beyond ``KEPT_PER_KIND``."""
    replaced = nearest(records, new.kind, new.load, new.runnable)
    kept = [r for r in records if r is not replaced] + [new]
    same = sorted((r for r in kept if r.kind == new.kind), key=lambda r: r.made)
    too_old = set(map(id, same[: max(len(same) - KEPT_PER_KIND, 0)]))
    return [r for r in kept if id(r) not in too_old]


def learn(
    records: list[Record],
    found: Record,
    predicted_s: Callable[[Record], float],
    actual_s: float,
    used: Record | None = None,
) -> tuple[list[Record], str]:
    """Keep what a finished run's jobs of one kind achieved (``found``, made at the run's load): the record the run's
    estimate used for that kind (``used``, where it is one of ``records``), else the one of that kind nearest in load,
    stays where its rates put the run's time (``predicted_s``) within ``DISAGREEMENT`` of ``actual_s``; one further
    off is replaced, though it was made at another load (a moment's load the run did not keep to); where there is
    none, ``found`` is added. Returns the records and what happened: "kept", "replaced" or "added"."""
    before = used if used is not None and used.kind == found.kind and used in records else None
    before = before or nearest(records, found.kind, found.load, found.runnable)
    if before is None:
        return keep(records, found), "added"
    if abs(predicted_s(before) / actual_s - 1) <= DISAGREEMENT:
        return records, "kept"
    return keep([r for r in records if r != before], found), "replaced"


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
    spec: dict[str, Any],
    model_file: str | os.PathLike[str],
    most: int = 3,
    least: int = 2,
    budget_s: float = 20.0,
    log_path: Path | None = None,
) -> tuple[float, float, int]:
    """pp512 and tg128 on the server a job of ``spec`` starts (the engine's own command and environment): the best
    of ``least`` to ``most`` trials after a warm-up request. Returns (pp512, tg128, trials)."""  # fmt: skip
    from h2htalk.llm.engines.base import ServeOptions
    from h2htalk.llm.engines.llamacpp import LlamaCpp

    with LlamaCpp().endpoint(spec, ServeOptions(model_file=str(model_file), log_path=log_path)) as endpoint:
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


def measured(pp512: float, tg128: float, load: float | None, runnable: float | None = None) -> Record:
    return Record(
        MACHINE,
        round(pp512, 1),
        round(tg128, 1),
        _round(load),
        available_cores(),
        now_iso(),
        "measured",
        _round(runnable),
    )


def _round(load: float | None) -> float | None:
    return None if load is None else round(load, 2)


def from_run(kind: str, pp512: float, tg128: float, load: float | None, runnable: float | None = None) -> Record:
    return Record(
        kind, round(pp512, 1), round(tg128, 2), _round(load), available_cores(), now_iso(), "run", _round(runnable)
    )


def scaled(record: Record, factor: float) -> Record:
    return replace(record, pp512=record.pp512 * factor, tg128=record.tg128 * factor)
