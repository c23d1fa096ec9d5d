"""How many tokens a text is, estimated offline from its characters, without the model's tokenizer.

Chinese text is most of what the study sends and receives. Four kinds of characters: CJK (ideographs, their
punctuation and full-width forms), digits (one token each, as Qwen's and Llama's tokenizers split numbers), ASCII
letters (four a token, as English words go) and the rest (spaces, line breaks, ASCII punctuation). The CJK and
the rest's rates are fitted to Qwen2.5's tokenizer (the laptop model's GGUF vocabulary) on the release's 4,589
references, the persona, SAP and task prompts, the reconstruction prompts, and a rehearsal's rendered prompts
and judge prompts (``benchmarks/token_calibration.py``, whose output docs/cluster.md quotes). A chat request adds a
few tokens a message for the chat template.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

CJK_CHARS_PER_TOKEN = 1.44
OTHER_CHARS_PER_TOKEN = 1.63
LETTERS_PER_TOKEN = 4.0
MESSAGE_OVERHEAD = 4  # role markers and separators of the chat template, per message
REQUEST_OVERHEAD = 3  # the assistant turn's opening


def character_classes(text: str) -> tuple[int, int, int, int]:
    """(CJK, digits, ASCII letters, the rest): the characters of ``text`` by how they tokenize."""
    cjk = digits = letters = 0
    for character in text:
        if ord(character) >= 0x2E80:
            cjk += 1
        elif character.isdigit():
            digits += 1
        elif character.isascii() and character.isalpha():
            letters += 1
    return cjk, digits, letters, len(text) - cjk - digits - letters


@functools.lru_cache(maxsize=1 << 16)  # a plan counts the same persona and task texts thousands of times
def text_tokens(text: str | None) -> int:
    if not text:
        return 0
    cjk, digits, letters, rest = character_classes(text)
    return round(cjk / CJK_CHARS_PER_TOKEN + digits + letters / LETTERS_PER_TOKEN + rest / OTHER_CHARS_PER_TOKEN)


def prompt_tokens(messages: Iterable[dict[str, str]]) -> int:
    """The prompt tokens of a chat request: its messages' text and the template's markers."""
    return sum(text_tokens(m["content"]) + MESSAGE_OVERHEAD for m in messages) + REQUEST_OVERHEAD
