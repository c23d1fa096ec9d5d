"""The review desk: a local web page where people do the study's human tasks, blind, each item by several raters.

The tasks come from the results tree (``collect``) and are kept, with who rates what and every rating, in the
desk's store (``h2htalk.desk_store``); ``app`` serves the page; ``offline`` writes and reads the CSV files of raters
who work offline, through the project's one strict importer (``h2htalk.ratings``).
"""
