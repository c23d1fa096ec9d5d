"""Dataset statistics figures (the paper's Figures 4-6): numbers first, then plots."""
