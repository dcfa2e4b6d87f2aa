"""Progress bars for the API: the native core's progress counts, drawn with tqdm when it is installed.

The core calls back from the calling thread (never from its workers) with
``(what, done, total, finished)``: ``what`` names the task ("quantize"), ``done`` and ``total`` are
source bytes. A new ``what`` closes the bar before it and opens the next.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Optional, Union

ProgressCallback = Callable[[str, int, int, bool], None]
ProgressArg = Union[bool, ProgressCallback]


class TqdmProgress:
    """A ProgressCallback that draws one tqdm bar per task, in bytes."""

    def __init__(self, tqdm: Any) -> None:
        self._tqdm = tqdm
        self._bar: Any = None
        self._what = ""

    def __call__(self, what: str, done: int, total: int, finished: bool) -> None:
        if self._bar is None or what != self._what:
            self.close()
            self._what = what
            self._bar = self._tqdm(total=total, desc=what, unit="B", unit_scale=True,
                                   unit_divisor=1024, leave=False)
        self._bar.update(done - self._bar.n)
        if finished:
            self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def callback_for(progress: ProgressArg) -> Optional[ProgressCallback]:
    """The callback for the ``progress`` argument: False -> none; True -> tqdm's bar when tqdm is
    installed (else none); a callable -> itself."""
    if callable(progress):
        return progress
    if not progress:
        return None
    try:  # imported by name: tqdm ships no type information
        tqdm = importlib.import_module("tqdm.auto").tqdm
    except ImportError:
        return None
    return TqdmProgress(tqdm)
