"""The run's results in the formats other evaluation tools read and show.

``run_results``: one JSON file for the run (configuration and its hash, versions, every cell with n, value, CI
and measure, provenance), laid out after lm-evaluation-harness's ``results_*.json``. ``leaderboard``: the
Table 2 rows ranked by Overall. ``every_eval_ever``: every item's record in the Every Eval Ever schema, checked
by that project's own validator (``eee_validation``). ``viewer``: a static HTML bundle that shows every item
and opens from disk. ``items`` joins what each of them reads about one item: prompt, answer, scores, judge.
"""
