"""What people's ratings become: one value per item (``consensus``), how far raters and the judge agree
(``agreement``), cell means that rest on a random sample of people's scores (``prediction_powered``), and the
report of it all (``report``).

Everything here works on ``h2htalk.ratings.Rating`` lists, whatever read them (the CSV importer, the review desk).
"""
