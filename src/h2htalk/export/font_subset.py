"""A font cut down to the characters a page shows: Noto Sans SC (8 MB, 30,000 glyphs) becomes a file of the few
thousand characters a bundle holds, so a page that must not reach the network still draws its Chinese."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

from h2htalk.errors import H2HTalkError
from h2htalk.io import atomic_writer

PRINTABLE_ASCII = "".join(chr(code) for code in range(0x20, 0x7F))


def subset_font(source: str | os.PathLike[str], characters: Iterable[str], out: str | os.PathLike[str]) -> Path:
    """Write the glyphs of ``source`` that ``characters`` (and printable ASCII) need to ``out``, with the layout
    features that shape them; the same characters give the same bytes."""
    from fontTools import subset

    logging.getLogger("fontTools").setLevel(logging.WARNING)  # it logs every glyph it keeps at INFO
    options = subset.Options()
    options.layout_features = ["*"]
    options.name_IDs = ["*"]  # keep the licence and the font's names
    options.notdef_outline = True
    try:
        font = subset.load_font(os.fspath(source), options)
    except OSError as exc:
        raise H2HTalkError(f"{source}: cannot read the font ({exc})") from None
    subsetter = subset.Subsetter(options)
    subsetter.populate(text="".join(sorted(set(characters) | set(PRINTABLE_ASCII))))
    subsetter.subset(font)
    with atomic_writer(out) as handle:
        font.save(handle)
    return Path(out)
