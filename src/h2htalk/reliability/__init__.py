"""The judges' reliability card: does each judge separate a good answer from a bad one, agree with itself, with
people, and with its own earlier runs?

``degrade`` makes the worse versions of a reference, ``ladder`` the items each judge scores and the ordered
pairs they make, ``judging`` asks the judge through the model-call seam, ``agreement`` computes Krippendorff's
alpha, ``canary`` keeps each run's canary verdicts and compares them with the previous verdicts of the same
slot's judge, and ``card`` writes ``paper_figures/judge_reliability.{md,csv}``.
"""
