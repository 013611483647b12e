"""The model of a request to a non-chat endpoint (``/v1/embeddings``, ``/v1/completions``).

The client's model name maps through the policy's ``upstream.models`` like a chat model;
a name the policy does not map goes to the provider of the policy's default model
(``openai/gpt-4o-mini`` → ``openai/<name>``), unless the policy restricts its models.
"""

from __future__ import annotations

from groundproxy.policies.schema import UpstreamPolicy
from groundproxy.proxy.upstream.client import resolve_model


def passthrough_model(upstream: UpstreamPolicy, client_model: str) -> str:
    """The litellm model for a non-chat endpoint (module docstring)."""
    if client_model in upstream.models or upstream.restrict_models:
        return resolve_model(upstream, client_model)  # unknown + restricted: 404
    provider, _, _ = upstream.model.rpartition("/")
    return f"{provider}/{client_model}" if provider else client_model
