"""Statistics for telling rows of a table apart: paired bootstrap differences, Holm's correction, rank
intervals and the smallest difference a run's item counts can detect."""
