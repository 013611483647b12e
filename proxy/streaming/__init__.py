"""Streams: server-sent events, sentence-by-sentence guarding, relayed streams and their
deadlines.
"""
