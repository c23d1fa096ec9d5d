"""Stages you add: a module here declares its stages at their functions (``@stage``), and the registry
(``h2htalk.stages.table``) collects it after the stages of ``PIPELINE``, with no list edited (a result of a new
kind: a line of ``layout.PATTERNS`` too). The workflow's own stages are declared in their packages, at the functions
that do their work."""
