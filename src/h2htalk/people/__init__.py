"""What people's ratings become: one value per item (``consensus``), how far raters and the judge agree
(``agreement``), and cell means that rest on a random sample of people's scores (``prediction_powered``); the
report of it all is ``h2htalk.tables.human_review``.

Everything here works on ``h2htalk.ratings.Rating`` lists, whatever read them (the CSV importer, the review desk).
"""
