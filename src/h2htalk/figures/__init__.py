"""Dataset statistics figures (the paper's Figures 4-6): numbers first, then plots."""

FIGURES = {  # the dataset statistics' figures, by number: their name, and what each shows
    4: ("fig4_wordcloud", "word cloud of the kept references"),
    5: ("fig5_verb_noun", "the most frequent verb-noun pairs"),
    6: ("fig6_lengths", "length distributions of inputs and references"),
}
FIGURE_NAMES = {number: name for number, (name, _) in FIGURES.items()}
