"""Verdicts: the verify stage, the verifier ladder, the decision per claim, its risk, logprobs,
calibration, the verdict cache and the trace walk-back.
"""
