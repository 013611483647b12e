"""The ``groundproxy`` command line and its offline jobs (ingest, check, eval, calibrate, fit,
serve).
"""
