"""Upstream LLM clients: litellm and the direct OpenAI wire path, their error mapping and
transport.
"""
