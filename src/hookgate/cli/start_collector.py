"""The garbage collector while ``hookgate serve`` starts: paused through the imports and
the build, then everything alive frozen out of later collections (decision record 0015).

Starting allocates some 200,000 objects that all stay alive (modules, classes, the app);
the collector would scan them again and again on the way, for nothing to free.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_until_started() -> Iterator[None]:
    """No collection inside; on leaving it normally, what is alive is frozen (as the server's
    own ``tune_collector`` does on start) and collection resumes; on an error it resumes."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    except BaseException:
        if was_enabled:
            gc.enable()
        raise
    gc.freeze()
    if was_enabled:
        gc.enable()
