"""Plugins that bring groundproxy's guard to other gateways (over HTTP, never in process).

Nothing here imports the groundproxy server: each plugin calls ``POST /v1/groundproxy/check``
with only httpx (:mod:`groundproxy.integrations.check_client`).
"""
