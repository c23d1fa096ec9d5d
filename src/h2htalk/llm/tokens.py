"""How many tokens a text is, estimated offline from its characters, without the model's tokenizer.

Chinese text is most of what the study sends and receives. Calibrated with Qwen2.5's tokenizer (the local
model's GGUF) on the release's 4,589 references and the persona, SAP and task prompts
(``benchmarks/token_calibration.py``): 1.43 CJK characters a token (CJK ideographs, their punctuation and full-width
forms) and 1.18 other characters a token (mostly digits and times, which it splits one digit a token). Over
those texts the estimate is 1.7 % above the tokenizer's count; for one text it is within 6 % (median).
A chat request adds a few tokens a message for the chat template.
"""

from __future__ import annotations

from collections.abc import Iterable

CJK_CHARS_PER_TOKEN = 1.43
OTHER_CHARS_PER_TOKEN = 1.18
MESSAGE_OVERHEAD = 4  # role markers and separators of the chat template, per message
REQUEST_OVERHEAD = 3  # the assistant turn's opening


def is_cjk(character: str) -> bool:
    return ord(character) >= 0x2E80


def text_tokens(text: str | None) -> int:
    if not text:
        return 0
    cjk = sum(1 for character in text if is_cjk(character))
    return round(cjk / CJK_CHARS_PER_TOKEN + (len(text) - cjk) / OTHER_CHARS_PER_TOKEN)


def prompt_tokens(messages: Iterable[dict[str, str]]) -> int:
    """The prompt tokens of a chat request: its messages' text and the template's markers."""
    return sum(text_tokens(m["content"]) + MESSAGE_OVERHEAD for m in messages) + REQUEST_OVERHEAD
