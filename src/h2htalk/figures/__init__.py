"""Dataset statistics figures (the paper's Figures 4-6): numbers first, then plots."""

FIGURE_NAMES = {4: "fig4_wordcloud", 5: "fig5_verb_noun", 6: "fig6_lengths"}  # the dataset statistics, by number
