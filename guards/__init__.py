"""Pure verification logic over plain data: claims, evidence, verdicts, actions.

Nothing here imports a web framework or does I/O of its own; retrieval and model
inference reach it through the small protocols in :mod:`guards.types`.
"""
