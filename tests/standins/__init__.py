"""Stand-ins for the engines and the hub the project talks to: test and rehearsal fixtures, not product code.

One OpenAI-protocol implementation, served three ways: ``vllm`` (an executable, like ``vllm serve``),
``api_server.py`` (remote APIs under path prefixes) and ``loopback.LoopbackAPI`` (in a thread, for unit tests).
README.md describes their behaviour.
"""
