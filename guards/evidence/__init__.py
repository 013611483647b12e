"""Claim → evidence: the request's own context, passage vectors, BM25 / TF-IDF selection."""
