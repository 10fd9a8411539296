"""The adversarial tally's ``attempt`` fixture: attacks through the adapters count there."""

from tests.adversarial.conftest import attempt

__all__ = ["attempt"]
