"""The adversarial tally's ``attempt`` fixture: the attacks on the guarded-call API count there."""

from tests.adversarial.conftest import attempt

__all__ = ["attempt"]
