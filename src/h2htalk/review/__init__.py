"""The review desk: a local web page where people do the study's human tasks, blind, each item by several raters.

The tasks come from the results tree (``collect``); ``store`` keeps them, who rates what (``assign``) and every
rating in one SQLite file with an append-only log; ``app`` serves the page; ``offline`` writes and reads the CSV
files of raters who work offline, through the project's one strict importer (``h2htalk.ratings``). The workflow
reads the ratings from the store (``store.store_ratings``) as it reads filled-in CSV files.
"""
