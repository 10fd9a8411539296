"""A command hook that withholds a tool's output showing a test card number.

It greps the hook's whole input, which also carries volatile values (ids, the call's start
on the monotonic clock), so it matches the number's own form, not a short run of its digits:
``4111`` alone once matched a clock reading and withheld an output that showed no card.
"""

from __future__ import annotations

#: Exit 1 (a failed hook: its output withheld) when the input shows 4111 1111 1111 1111,
#: with spaces, dashes or nothing between the groups.
CARD_NUMBER_GREP = "grep -Eq '4111[- ]?1111[- ]?1111[- ]?1111' && exit 1; exit 0"
