"""The stages of the workflow, one module per part of the pipeline: each declares its stages at their functions
(``@stage``); the registry (``h2htalk.stages.table``) collects them."""
