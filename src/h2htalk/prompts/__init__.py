"""The prompts stage: the chat messages a model under test sees (persona, optional SAP layer, task)."""
