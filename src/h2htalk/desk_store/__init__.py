"""The review desk's store: its four tasks and the values each takes (``tasks``), who rates what (``assign``), and
one SQLite file with the items, the raters and an append-only, hash-chained log of every rating (``store``,
``chain``).

It sits below the importer of ratings (``h2htalk.ratings``), which reads the store's ratings beside people's CSV
files, and below the desk that serves it (``h2htalk.review``); it builds on the sheets (``h2htalk.sheets``) and the
instance schema alone.
"""
