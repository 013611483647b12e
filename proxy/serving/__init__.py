"""Serving: one guarded call per request (upstream, guard, headers, trace) and the objects each
endpoint serves through.
"""
