"""Verifier models: the registry that maps a policy's ``verifier.model`` name to a backend."""
