"""Persistence: traces, answers, reviewers' labels, adapters and calibration — embedded
files/SQLite or PostgreSQL.
"""
