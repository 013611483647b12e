"""Symbolic checks of a claim against its evidence: values, units, periods, names, slots,
polarity, scope and framing.
"""
