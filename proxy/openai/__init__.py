"""The OpenAI API's shapes in one place: request models and the fields each route types
(``chat_request``, ``requests``), the bounds on what a client sends (``bounds``), strict JSON
(``json_strict``), what an upstream's answer must hold (``upstream_bodies``) and the bodies
and stream chunks exactly as OpenAI's schema shapes them (``shape``).

It imports nothing else of the proxy: every other part of ``proxy/`` reads and writes
OpenAI's wire format through it.
"""
