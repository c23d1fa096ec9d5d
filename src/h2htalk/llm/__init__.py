"""Everything that talks to a language model: engines, the client, the response cache, answer parsing.

Generation, the judge, reconstruction and the studies all call models through ``ModelCalls`` (calls.py):
build requests with ``chat_request``, get every answer cached and content-addressed, read JSON out of the
answers with ``parse``.
"""
