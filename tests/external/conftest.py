"""The adversarial tally's ``attempt`` fixture: the attacks on the external core count there."""

from tests.adversarial.conftest import attempt

__all__ = ["attempt"]
