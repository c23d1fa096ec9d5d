"""Settings objects, built from a validated configuration only.

Defaults live in one place: the config schema (``schemas/config.schema.yaml``), which fills every missing key
while it validates. These classes carry no defaults of their own; ``from_config`` reads the validated
mapping with plain indexing, so a key the schema does not define is a programming error, not a silent
fallback. Tests and scripts that want the defaults use ``h2htalk.config.default_config()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, ClassVar, Self

Config = dict[str, Any]
VARIANTS: tuple[str, ...] = ("sap", "nosap")  # with and without the Secure Attachment Persona layer
WITH_SAP, WITHOUT_SAP = VARIANTS
VARIANT_NAMES = {WITH_SAP: "w/ SAP", WITHOUT_SAP: "w/o SAP"}  # as the paper's tables name them
STUDIES: tuple[str, ...] = ("safety", "instruction_following")  # the two studies, as config keys and file names
RUBRIC = "rubric"
JUDGE_ROLES: tuple[str, ...] = (RUBRIC, *STUDIES)  # the judges: Levels I-III's rubric judge, each study's judge
# A judge model's ladder in two parts, each a job: the rubric judge's, which Table 2 shows beside its judged cells
# in every run, and the studies' judges' known-answer sets, which the judges' card reads
LADDER_PARTS: dict[str, tuple[str, ...]] = {"rubric": (RUBRIC,), "studies": STUDIES}


def ladder_part(role: str) -> str:
    return next(part for part, roles in LADDER_PARTS.items() if role in roles)


GATE, SAMPLE = "gate", "sample"  # review.mode: what people's scores do to a judged cell
FULL_MODE, CASCADE_MODE = "full", "cascade"  # rubric_judge.mode, study_judge.mode: who judges every item
JUDGE_SECTIONS = {RUBRIC: "rubric_judge", STUDIES[0]: "study_judge", STUDIES[1]: "study_judge"}  # role -> section
JUDGE_SECTION_NAMES: tuple[str, ...] = tuple(dict.fromkeys(JUDGE_SECTIONS.values()))  # each judge's config section
PEOPLE_READINGS: tuple[str, ...] = ("J", "judge")  # the readings of a judged cell people's scores enter (not S)


class FromSection:
    """Settings whose fields are the keys of one config section (``SECTION``: its path in the config)."""

    SECTION: ClassVar[tuple[str, ...]]

    @classmethod
    def from_config(cls, config: Config) -> Self:
        section = config
        for key in cls.SECTION:
            section = section[key]
        return cls(**{field.name: section[field.name] for field in fields(cls)})  # type: ignore[arg-type]


@dataclass(frozen=True)
class UpstreamSource(FromSection):
    """Where the released reference files come from (data.upstream)."""

    SECTION = ("data", "upstream")

    repo: str
    commit: str
    url_template: str
    timeout_s: float
    retries: int
    backoff_s: float

    def url_for(self, file: str) -> str:
        return self.url_template.format(repo=self.repo, commit=self.commit, file=file)


@dataclass(frozen=True)
class CurateOptions:
    """data.curate: which flags drop an item, how identifiers are handled, the persona's own names."""

    exclude_flags: tuple[str, ...]
    anonymise: dict[str, str]
    persona_names: tuple[str, ...]

    @classmethod
    def from_config(cls, config: Config) -> CurateOptions:
        curate = config["data"]["curate"]
        return cls(tuple(curate["exclude_flags"]), dict(curate["anonymise"]), tuple(curate["persona_names"]))

    def as_dict(self) -> dict[str, Any]:
        return {
            "exclude_flags": list(self.exclude_flags),
            "anonymise": dict(self.anonymise),
            "persona_names": list(self.persona_names),
        }


@dataclass(frozen=True)
class ClientSettings(FromSection):
    """How the chat client talks to an endpoint (generation.*): concurrency, timeout, retries, backoff; the
    failures a job tolerates, and whether it sends the cached content refusals again; the providers' rate
    limits, and how often a submitted batch is looked at."""

    SECTION = ("generation",)

    concurrency: int
    timeout_s: float
    retries: int
    backoff_base_s: float
    backoff_max_s: float
    max_failure_rate: float
    retry_failed: bool
    rate_limits: dict[str, dict[str, int | None]]
    batch_poll_s: float


@dataclass(frozen=True)
class GenerationSettings:
    """generation.*: the client, greedy-by-default decoding with a seed, completion limits, the cache."""

    client: ClientSettings
    temperature: float
    top_p: float
    seed: int
    max_new_tokens: dict[str, int]
    cache_dir: str

    @classmethod
    def from_config(cls, config: Config, for_studies: bool = False) -> GenerationSettings:
        """Completion limits per subtask (generation.max_new_tokens), or with ``for_studies``, per study
        (studies.max_new_tokens): Table 2's generation and the studies' are separate jobs that read one each."""
        generation = config["generation"]
        decoding = generation["decoding"]
        if for_studies:
            limits = dict.fromkeys(STUDIES, config["studies"]["max_new_tokens"])
        else:
            limits = dict(generation["max_new_tokens"])
        return cls(
            client=ClientSettings.from_config(config),
            temperature=decoding["temperature"],
            top_p=decoding["top_p"],
            seed=decoding["seed"],
            max_new_tokens=limits,
            cache_dir=generation["cache_dir"],
        )

    def params(self, name: str) -> dict[str, Any]:
        """The sampling parameters of every request for one subtask (or study): part of its cache key."""
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": int(self.max_new_tokens[name]),
            "seed": self.seed,
        }

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class JudgeSettings(FromSection):
    """A judge model, its sampling (k samples an item) and its cache: the rubric judge's (rubric_judge.*)."""

    SECTION = ("rubric_judge",)

    model: str
    samples: int
    temperature: float
    max_new_tokens: int
    cache_dir: str
    batch: bool  # through the model's Batch API, where it has one


@dataclass(frozen=True)
class StudyJudgeSettings(JudgeSettings):
    """study_judge.*: the judge of the two studies."""

    SECTION = ("study_judge",)


AUTO = "auto"  # rubric_judge.sample_per_cell: the size a pilot asks for, to meet target_half_width


@dataclass(frozen=True)
class AutoSample:
    """rubric_judge.target_half_width/pilot_per_cell/assumed_correlation/assumed_sd: how ``sample_per_cell: auto``
    sizes each cell's sample (``h2htalk.judge.precision``)."""

    target_half_width: float  # of the cell's 95 % interval, in the judge reading's units (0-100)
    pilot_per_cell: int
    assumed_correlation: float  # where no pilot measured the cell: the plan before any run
    assumed_sd: float


@dataclass(frozen=True)
class JudgeMode:
    """mode/model/cheap_model of a judge's section (rubric_judge, study_judge): who judges the role's items. In full
    mode the section's model judges every item; in cascade mode the cheap model judges every item and the section's
    model a sample of each cell (``CascadeSettings``). Every reading of a judge's mode goes through here."""

    section: str
    mode: str
    model: str  # the role's own judge
    cheap_model: str  # the judge of every item in cascade mode

    @classmethod
    def from_config(cls, config: Mapping[str, Any], section: str) -> JudgeMode:
        keys = config[section]
        return cls(section, keys["mode"], keys["model"], keys["cheap_model"])

    @property
    def cascade(self) -> bool:
        return self.mode == CASCADE_MODE

    @property
    def judges(self) -> tuple[str, ...]:
        """The role's judge models in the order a job uses them: the cheap judge (cascade mode), then its own."""
        return tuple(dict.fromkeys([*([self.cheap_model] if self.cascade else []), self.model]))

    def every_item_judge(self, judge: JudgeSettings) -> JudgeSettings:
        """``judge`` (the role's settings) as the judge of every item: the cheap model in cascade mode."""
        return replace(judge, model=self.judges[0])


@dataclass(frozen=True)
class CascadeSettings:
    """sample_per_cell/sample_seed of a judge's section (rubric_judge, study_judge): the seeded sample of each cell
    its own judge judges in cascade mode (``JudgeMode`` says whether the role is in it). With ``auto``
    (``sample_per_cell: auto``), ``sample_per_cell`` is the pilot's size and each cell's sample grows from it."""

    sample_per_cell: int
    sample_seed: int
    auto: AutoSample | None = None  # None: every cell's sample is sample_per_cell

    @classmethod
    def from_config(cls, config: Config, section: str) -> CascadeSettings:
        keys = config[section]
        if keys["sample_per_cell"] != AUTO:
            return cls(keys["sample_per_cell"], keys["sample_seed"])
        auto = AutoSample(
            keys["target_half_width"], keys["pilot_per_cell"], keys["assumed_correlation"], keys["assumed_sd"]
        )
        return cls(auto.pilot_per_cell, keys["sample_seed"], auto)


@dataclass(frozen=True)
class GateSettings(FromSection):
    """rubric_judge.alpha/tau/max_spread/gate_on: J = alpha*(S/20) + (1-alpha)*J_judge, and the review gate."""

    SECTION = ("rubric_judge",)

    alpha: float
    tau: float
    max_spread: float
    gate_on: str


@dataclass(frozen=True)
class ReliabilitySettings:
    """judge_reliability.seed/ladder/canary: what each judge's ladder job judges and when its canary flags it."""

    seed: int
    ladder_items: int | None
    canary_items: int
    canary_min_alpha: float

    @classmethod
    def from_config(cls, config: Config) -> ReliabilitySettings:
        section = config["judge_reliability"]
        ladder, canary = section["ladder"], section["canary"]
        return cls(section["seed"], ladder["items"], canary["items"], canary["min_alpha"])


@dataclass(frozen=True)
class ReviewSettings(FromSection):
    """review.mode/sample_per_cell/sample_seed: what people's scores do to a judged cell (gate or sample)."""

    SECTION = ("review",)

    mode: str
    sample_per_cell: int
    sample_seed: int


@dataclass(frozen=True)
class BootstrapSettings(FromSection):
    """scoring.bootstrap: one setting for every interval (Table 2, J, Table 3, Figure 7)."""

    SECTION = ("scoring", "bootstrap")

    resamples: int
    seed: int
    confidence: float


@dataclass(frozen=True)
class LeakSettings(FromSection):
    """instances.reconstruct.leak: when a reconstructed input gives its reference away, and what happens then."""

    SECTION = ("instances", "reconstruct", "leak")

    threshold: float  # an instance whose overlap with its reference is above this share leaks
    ngram: int  # characters per n-gram of the containment measure
    action: str  # review (to the review file, status leak) or drop


@dataclass(frozen=True)
class ReconstructSettings:
    """instances.reconstruct.*: generator, verification voters, votes, attempts, sample, sampling, cache, leaks."""

    generator: str
    voters: tuple[str, ...]
    votes: int
    max_attempts: int
    temperature: float
    sample_per_subtask: int | None
    seed: int
    max_new_tokens: int
    vote_seed: int
    vote_max_new_tokens: int
    cache_dir: str
    leak: LeakSettings
    batch: bool

    @classmethod
    def from_config(cls, config: Config) -> ReconstructSettings:
        section = dict(config["instances"]["reconstruct"])
        section["voters"] = tuple(section["voters"])
        section["leak"] = LeakSettings.from_config(config)
        return cls(**{name: section[name] for name in cls.__dataclass_fields__})


@dataclass(frozen=True)
class StudySample(FromSection):
    """studies.sample: a seeded sample of scenarios per study (None: all of them)."""

    SECTION = ("studies", "sample")

    safety: int | None
    instruction_following: int | None
    seed: int

    def size(self, study: str) -> int | None:
        return getattr(self, study)
