"""SIGTERM / SIGINT: stop at the next safe point and checkpoint, instead of dying mid-step.

The first signal sets a flag that the round loop checks between phases; a second one
restores the default handler and re-raises, so an impatient user can still kill the run.
"""

from __future__ import annotations

import logging
import signal

log = logging.getLogger("unified")


class StopRequest:
    def __init__(self):
        self.signum: int | None = None
        self._previous = {}

    def __enter__(self) -> "StopRequest":
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum, _frame) -> None:
        if self.signum is not None:  # second signal: stop now
            signal.signal(signum, self._previous.get(signum, signal.SIG_DFL))
            signal.raise_signal(signum)
            return
        self.signum = signum
        log.warning(
            "%s received: stopping after the current phase with a checkpoint (press Ctrl-C again to stop at "
            "once). To continue later, run the same command with --resume auto",
            signal.Signals(signum).name,
        )

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def exit_code(self) -> int:
        return 128 + (self.signum or 0)
