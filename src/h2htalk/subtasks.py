"""The 11 H2HTalk subtasks and how they map onto the upstream release.

Two upstream file names are swapped relative to the paper's Table 1: ``itinerary_initialize.jsonl``
holds the 533 DialogueSchedule references and ``dialogue_schedule.jsonl`` the 76
ItineraryInitialization references (counts and content both say so). The mapping below is the
project's and every table shows it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Subtask:
    key: str
    paper_name: str
    table2_column: str
    upstream_file: str
    released: int
    dimension: str
    score: str  # "S" (metrics only) or "J" (metrics mixed with a rubric judge)
    upstream_template: str


SUBTASKS: tuple[Subtask, ...] = (
    Subtask("dialogue_base", "DialogueBase", "Standard", "dialogue_base.jsonl", 1882, "dialogue", "S", "chat_general"),
    Subtask(
        "dialogue_emotion", "DialogueEmotion", "Emotional", "dialogue_emotion.jsonl", 99, "dialogue", "S", "chat_psy"
    ),
    Subtask(
        "dialogue_schedule",
        "DialogueSchedule",
        "Schedule",
        "itinerary_initialize.jsonl",
        533,
        "dialogue",
        "S",
        "chat_routine",
    ),
    Subtask(
        "recollection_synthesis",
        "RecollectionSynthesis",
        "Synthesis",
        "recollection_synthesize.jsonl",
        412,
        "recollection",
        "S",
        "mem_sum",
    ),
    Subtask(
        "recollection_refinement",
        "RecollectionRefinement",
        "Refinement",
        "recollection_refine.jsonl",
        589,
        "recollection",
        "S",
        "mem_rewrite",
    ),
    Subtask(
        "recollection_initialization",
        "RecollectionInitialization",
        "Initialization",
        "recollection_initialize.jsonl",
        41,
        "recollection",
        "S",
        "mem_greet",
    ),
    Subtask(
        "itinerary_basic", "ItineraryBasic", "Basic", "itinerary_basic.jsonl", 207, "itinerary", "J", "routine_level_I"
    ),
    Subtask(
        "itinerary_middle",
        "ItineraryMiddle",
        "Middle",
        "itinerary_middle.jsonl",
        444,
        "itinerary",
        "J",
        "routine_level_II",
    ),
    Subtask(
        "itinerary_advanced",
        "ItineraryAdvanced",
        "Advance",
        "itinerary_advanced.jsonl",
        143,
        "itinerary",
        "J",
        "routine_level_III",
    ),
    Subtask(
        "itinerary_response",
        "ItineraryResponse",
        "Response",
        "itinerary_feedback.jsonl",
        163,
        "itinerary",
        "S",
        "routine_feedback",
    ),
    Subtask(
        "itinerary_initialization",
        "ItineraryInitialization",
        "Initiation",
        "dialogue_schedule.jsonl",
        76,
        "itinerary",
        "S",
        "routine_greet",
    ),
)

SUBTASK_KEYS: tuple[str, ...] = tuple(s.key for s in SUBTASKS)
DIMENSIONS: tuple[str, ...] = ("dialogue", "itinerary", "recollection")

_BY_KEY = {s.key: s for s in SUBTASKS}


def get_subtask(key: str) -> Subtask:
    try:
        return _BY_KEY[key]
    except KeyError:
        raise KeyError(f"unknown subtask {key!r}; known: {', '.join(SUBTASK_KEYS)}") from None
