"""What goes back: the rewritten text, the report and headers, unverified answers, several
choices, an answer guarded piece by piece.
"""
