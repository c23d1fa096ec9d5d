"""Figures 4-6 as PNG (and the CSV of the numbers each one draws), with a CJK font so no glyph is a box.

Each figure says what its texts are. Figures 4 and 5 (the dataset's words and verb-noun pairs) draw the released
references that curation keeps, the only texts the release holds; Figure 6 draws the lengths of the instances'
inputs, of the same instances' references, and of the released references, each in a panel of its own, so a
demo set of a few dozen hand-written items is never pooled with the release.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from h2htalk.errors import H2HTalkError
from h2htalk.figures import FIGURE_NAMES, FIGURES
from h2htalk.figures.stats import describe_lengths, token_lengths, verb_noun_pairs, word_frequencies
from h2htalk.instances.sources import run_notes
from h2htalk.io import iter_jsonl, write_png_atomic
from h2htalk.stages.declare import stage
from h2htalk.stages.declared import EARLY, RUN_NOTES
from h2htalk.stages.spec import Done, One, Over, Product, figure_files
from h2htalk.tabular import Files, records_frame, write_csv

FONT_CANDIDATES = (
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/noto-cjk/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
    "/System/Library/Fonts/PingFang.ttc",
    "C:/Windows/Fonts/msyh.ttc",
)
# Installed fonts whose file name says CJK; each must still have PROBE_CHARACTERS to be taken.
FONT_NAME_TAGS = ("cjk", "wqy", "hei", "song", "ming", "sourcehan", "notosanssc", "notoserifsc")
# The 100 most frequent Chinese characters: a font without all of them would draw the figures' words as boxes.
PROBE_CHARACTERS = (
    "的一是不了人我在有他这中大来上个们到说国和地也子时道出而要于就下得可你年生自会那后能对着事其里所去行过家"
    "十用发天如然作方成者多日都三小军二无同么经法当起与好看学进种将还分此心前面又定见只主没公从"
)
# Set to directories (os.pathsep between them) to search those instead of the system's fonts; empty: none.
FONT_DIRS_ENV = "H2HTALK_FONT_DIRS"
# The fallback a pip install brings: Noto Sans SC (SIL OFL 1.1), a plain file in the data-only wheel
# pylopdf-fonts-zh-cn (a dependency in pyproject.toml and envs/figures.yaml).
PACKAGED_FONT = ("pylopdf-fonts-zh-cn", "pylopdf_fonts_zh_cn", "NotoSansSC-Regular.otf")


def packaged_cjk_font() -> str | None:
    """The Chinese font file that ships in a Python package, or None where that package is not installed."""
    from importlib import resources

    _, package, name = PACKAGED_FONT
    try:
        path = resources.files(package) / name
    except ModuleNotFoundError:
        return None
    return str(path) if isinstance(path, Path) and path.is_file() else None


def _font_dirs(font_dirs: Iterable[str | os.PathLike[str]] | None) -> list[str] | None:
    """The directories to search instead of the system's fonts (the argument, else $H2HTALK_FONT_DIRS), or None."""
    if font_dirs is not None:
        return [os.fspath(d) for d in font_dirs]
    value = os.environ.get(FONT_DIRS_ENV)
    if value is None:
        return None
    return [d for d in value.split(os.pathsep) if d]


def _has_chinese(path: str) -> bool:
    try:
        return not missing_glyphs(path, PROBE_CHARACTERS)
    except (OSError, RuntimeError, ValueError):  # not a font FreeType can read
        return False


def find_cjk_font(configured: str | None = None, font_dirs: Iterable[str | os.PathLike[str]] | None = None) -> str:
    """A font file with Chinese glyphs: the configured file, else (``auto``) an installed font, else the packaged one.

    ``font_dirs`` (or $H2HTALK_FONT_DIRS) replaces the system font search with those directories.
    """
    if configured and configured != "auto":
        path = Path(configured).expanduser()
        if not path.is_file():
            raise H2HTalkError(
                f"figures.cjk_font {configured!r} is not a file: set it to a font file with Chinese glyphs, "
                "or to auto (an installed CJK font, else the one pip installs with h2htalk)"
            )
        if not _has_chinese(str(path)):
            raise H2HTalkError(f"figures.cjk_font {configured!r} lacks Chinese glyphs: the figures would show boxes")
        return str(path)
    dirs = _font_dirs(font_dirs)
    from matplotlib import font_manager

    if dirs is None:
        searched = "the known system paths, fontconfig and the system font folders"
        known = [path for path in FONT_CANDIDATES if Path(path).is_file()]
        found = sorted(font_manager.findSystemFonts())
    else:
        searched = f"the font folders {dirs} (from {'font_dirs' if font_dirs is not None else FONT_DIRS_ENV})"
        known = []
        found = sorted(font_manager.findSystemFonts(fontpaths=dirs)) if dirs else []
    tagged = [p for p in found if any(tag in Path(p).name.lower().replace("-", "") for tag in FONT_NAME_TAGS)]
    for path in (*known, *tagged):
        if _has_chinese(path):
            return path
    packaged = packaged_cjk_font()
    if packaged and _has_chinese(packaged):
        return packaged
    distribution, package, name = PACKAGED_FONT
    raise H2HTalkError(
        f"no CJK font found: searched {searched} for a font file named like {'/'.join(FONT_NAME_TAGS)} with "
        f"Chinese glyphs, then {package}/{name} from the Python package {distribution}, which is "
        f"{'not installed' if packaged is None else 'unreadable or without Chinese glyphs'}. "
        f"Fix: pip install -e . (it installs {distribution}), or install a system font "
        "(Debian: apt-get install fonts-noto-cjk), or set figures.cjk_font to a font file with Chinese glyphs"
    )


def missing_glyphs(font_path: str, text: str) -> set[str]:
    """Characters of ``text`` the font has no glyph for (they would render as boxes)."""
    from matplotlib.ft2font import FT2Font

    font = FT2Font(font_path)
    return {ch for ch in set(text) if not ch.isspace() and font.get_char_index(ord(ch)) == 0}


def _pyplot(font_path: str) -> Any:
    import logging

    import matplotlib

    matplotlib.use("Agg")
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)  # weight fallbacks are harmless
    import matplotlib.pyplot as plt
    from matplotlib import font_manager

    font_manager.fontManager.addfont(font_path)
    name = font_manager.FontProperties(fname=font_path).get_name()
    plt.rcParams["font.family"] = [name, "DejaVu Sans"]
    plt.rcParams["axes.unicode_minus"] = False
    return plt


def _save(fig: Any, path: Path) -> None:
    write_png_atomic(fig, path, dpi=150, bbox_inches="tight")


RELEASED = "the released references kept by curation"
INSTANCE_SOURCES = {"demo": "demo instances", "file": "instance files", "reconstructed": "reconstructed instances"}


def reference_texts(curated: Iterable[str | os.PathLike[str]]) -> list[str]:
    return [r["text"] for p in curated for _, r in iter_jsonl(p) if r.get("kept", True)]


def instance_references(instance_files: Iterable[str | os.PathLike[str]]) -> list[str]:
    """The instances' own references: the outputs that belong to their inputs."""
    return [record["reference"] for path in instance_files for _, record in iter_jsonl(path)]


def input_texts(instance_files: Iterable[str | os.PathLike[str]]) -> list[str]:
    """One text per instance: what the model is given, its fields' content joined."""
    texts = []
    for path in instance_files:
        for _, record in iter_jsonl(path):
            parts = []
            for value in record["fields"].values():
                if isinstance(value, list):
                    parts += [v["text"] if isinstance(v, dict) else v for v in value]
                else:
                    parts.append(value)
            texts.append("\n".join(parts))
    return texts


def figure4_wordcloud(
    texts: list[str], font: str, png: Path, csv_path: Path, top: int, source: str = RELEASED
) -> Counter[str]:
    """The word cloud of ``texts`` (``source`` says what they are, in the title)."""
    from wordcloud import WordCloud

    counts = word_frequencies(texts)
    rows = [{"rank": i, "word": w, "count": c} for i, (w, c) in enumerate(counts.most_common(top), start=1)]
    write_csv(records_frame(rows, ["rank", "word", "count"]), csv_path)
    cloud = WordCloud(
        font_path=font,
        width=1600,
        height=900,
        background_color="white",
        max_words=top,
        random_state=7,
        collocations=False,
    ).generate_from_frequencies(dict(counts.most_common(top)))
    plt = _pyplot(font)
    fig, ax = plt.subplots(figsize=(12, 6.75))
    ax.imshow(cloud, interpolation="bilinear")
    ax.axis("off")
    ax.set_title(f"Figure 4: word cloud of {source} ({len(texts)} texts, jieba words, stop words removed)")
    _save(fig, png)
    plt.close(fig)
    return counts


def figure5_verb_noun(texts: list[str], font: str, png: Path, csv_path: Path, top: int, source: str = RELEASED):
    """The most frequent verb-noun pairs of ``texts`` (``source`` says what they are, in the title)."""
    pairs, method = verb_noun_pairs(texts)
    best = pairs.most_common(top)
    rows = [
        {"rank": i, "verb": v, "noun": n, "count": c, "method": method} for i, ((v, n), c) in enumerate(best, start=1)
    ]
    write_csv(records_frame(rows, ["rank", "verb", "noun", "count", "method"]), csv_path)
    plt = _pyplot(font)
    fig, ax = plt.subplots(figsize=(9, max(4.0, 0.26 * len(best) + 1.5)))
    labels = [f"{v} {n}" for (v, n), _ in best][::-1]
    ax.barh(labels, [c for _, c in best][::-1], color="#4C72B0")
    ax.set_xlabel("count")
    ax.margins(y=0.01)
    ax.set_title(f"Figure 5: top {len(best)} verb-noun pairs of {source} ({len(texts)} texts)\n", fontsize=12)
    ax.text(0.5, 1.005, f"Method: {method}", transform=ax.transAxes, ha="center", va="bottom", fontsize=7, wrap=True)
    _save(fig, png)
    plt.close(fig)
    return pairs, method


def figure6_lengths(
    panels: dict[str, tuple[str, list[str]]], font: str, png: Path, csv_path: Path, notes: Sequence[str] = ()
) -> dict[str, dict[str, Any]]:
    """One length histogram per panel (key -> (what its texts are, the texts)), top to bottom; ``notes`` (e.g.
    the demo note) under the title. Returns each panel's length statistics."""
    lengths = {key: token_lengths(texts) for key, (_, texts) in panels.items()}
    stats = {key: describe_lengths(values) for key, values in lengths.items()}
    rows = []
    for key, values in lengths.items():
        for length, count in sorted(Counter(values).items()):
            rows.append({"panel": key, "tokens": length, "count": count, **{k: None for k in ("mean", "median")}})
        rows.append(
            {
                "panel": key,
                "tokens": "summary",
                "count": stats[key]["n"],
                "mean": stats[key]["mean"],
                "median": stats[key]["median"],
            }
        )
    write_csv(records_frame(rows, ["panel", "tokens", "count", "mean", "median"]), csv_path, float_format="{:.3f}")
    plt = _pyplot(font)
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 3.4 * len(panels)), squeeze=False)
    colours = ("#4C72B0", "#DD8452", "#55A868", "#C44E52")
    for index, (ax, (key, (label, _))) in enumerate(zip(axes[:, 0], panels.items(), strict=True)):
        values, description = lengths[key], stats[key]
        if values:
            ax.hist(values, bins=min(60, max(10, len(set(values)))), color=colours[index % 4], edgecolor="white")
            for statistic, style in (("mean", "--"), ("median", ":")):
                value = description[statistic]
                ax.axvline(value, color="black", linestyle=style, linewidth=1, label=f"{statistic} {value:.2f}")
            ax.legend(loc="upper right")
        ax.set_title(
            f"{label} (n={description['n']}): mean={description['mean']:.2f}, median={description['median']:.2f} tokens"
        )
        ax.set_xlabel("length (jieba tokens)")
        ax.set_ylabel("count")
    fig.suptitle("\n".join(["Figure 6: length distributions, one source a panel", *notes]))
    fig.tight_layout()
    _save(fig, png)
    plt.close(fig)
    return stats


@stage(
    "figure", "Figure 4 (word cloud), 5 (verb-noun pairs) or 6 (lengths), PNG and CSV", priority=EARLY,
    uses=("figures",), reads=("figures", *RUN_NOTES), jobs=Over(figure=lambda run: FIGURE_NAMES.values()),
    env="figures", memory_mb=2000, minutes=20, options=("font",),
    product=Product("figure", {name: f"Figure {n}" for n, (name, _) in FIGURES.items()}, dict(FIGURES.values()),
                    main="png", shown=("png",)),
    targets=lambda labels: labels["figure"].split("_")[0],  # snakemake fig4
    inputs={
        "curated": One("curated", over=("subtask", "subtasks")),
        "instances": One("instances", over=("subtask", "subtasks")),
    },
    outputs=figure_files("{figure}", png=".png", csv=".csv"),
)  # fmt: skip
def draw_figure(
    figure: str, curated: list[str], instances: list[str], config: Mapping[str, Any], outputs: Files
) -> Done:
    """Figure 4, 5 or 6 (``figure``: its name in ``FIGURE_NAMES``): its ``png``, and the ``csv`` of what it draws.
    The config's ``figures`` section says how; the run's notes (``run_notes``) go on Figure 6, the one built from
    the run's instances (Figures 4 and 5 draw the release alone)."""
    number = next(n for n, name in FIGURE_NAMES.items() if name == figure)
    if number not in (4, 5, 6):  # a figure listed and not drawn below: said, not drawn as another
        raise H2HTalkError(f"Figure {number} ({figure}) is listed (figures.FIGURES), but draw_figure draws none such")
    figures = config["figures"]
    font = find_cjk_font(figures["cjk_font"])
    released = reference_texts(curated)
    png, csv_path = Path(outputs["png"]), Path(outputs["csv"])
    if number == 4:
        counts = figure4_wordcloud(released, font, png, csv_path, top=figures["top_words"])
        drawn = f"{len(counts)} distinct words of {len(released)} released references"
    elif number == 5:
        pairs, method = figure5_verb_noun(released, font, png, csv_path, top=figures["top_pairs"])
        drawn = f"{len(pairs)} distinct verb-noun pairs ({method}) of {len(released)} released references"
    else:
        source = INSTANCE_SOURCES[config["instances"]["source"]]
        panels = {
            "inputs": (f"Inputs: {source}", input_texts(instances)),
            "outputs": (f"Outputs: the references of the same {source}", instance_references(instances)),
            "released": (f"Outputs: {RELEASED}", released),
        }
        stats = figure6_lengths(panels, font, png, csv_path, run_notes(config))
        drawn = ", ".join(f"{key} {value}" for key, value in stats.items())
    return Done(drawn, subject=str(number))
