"""Evals: run cases against agents with hooks bypassed on purpose, and report pass or fail."""

from hookgate.evals.runner import CaseResult, EvalEngine, check, run_suite
from hookgate.evals.suite import EvalCase, EvalSuite, EvalSuiteError, load_suite

__all__ = ["CaseResult", "EvalCase", "EvalEngine", "EvalSuite", "EvalSuiteError", "check",
           "load_suite", "run_suite"]
