"""Consistency validation of bug artifacts (SSR section 2.3): eight named checks, run in sandboxes."""

from selfplay.validation.config import ValidationConfig
from selfplay.validation.report import CHECK_NAMES, CheckResult, ValidationReport
from selfplay.validation.runner import validate

__all__ = ["CHECK_NAMES", "CheckResult", "ValidationConfig", "ValidationReport", "validate"]
