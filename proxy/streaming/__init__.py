"""Streams: server-sent events and their chunks, metered and paced upstream streams (the
policy's deadlines), the Responses API's stream events. Which stream a request gets is
chosen by :func:`proxy.serving.stream_mode.choose_mode`; the sentence and relay streams
that guard while they send live with serving.
"""
