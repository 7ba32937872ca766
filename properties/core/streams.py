"""Checkpoint streams whose writer yields at random: the schedule a racing asynchronous part needs.

A checkpoint's asynchronous part on a thread of its own races the task
thread's next steps only if the two threads interleave; CPython's GIL would
let one run for milliseconds. :class:`YieldingStreamFactory` wraps a stream
factory so that every ``write`` may first give the GIL up (or sleep a few
microseconds), seeded; an implementation in another language reads
``yield_seed`` and yields on its own side. :func:`yield_pause` is the task
thread's side: how long to pause before a step while a part runs.

>>> import random
>>> yield_pause(random.Random(1)) in YIELDS
True
"""

from __future__ import annotations

import random
import time
from typing import Optional

__all__ = ["YieldingStreamFactory", "YIELDS", "yield_pause"]

YIELDS = (0.0, 0.0, 0.0, 0.0, 0.00001, 0.0001, 0.0005)  # seconds; 0: give the GIL up and take it back


def yield_pause(r: random.Random) -> float:
    """A pause drawn from :data:`YIELDS`."""
    return r.choice(YIELDS)


class YieldingStreamFactory:
    """Checkpoint streams (``inner``, a ``CheckpointStreamFactory``) whose writer yields at random while it
    writes, seeded by ``yield_seed``: ``directory`` and ``threshold`` say where the bytes go (an
    implementation in another language reads these three and yields on its own side)."""

    def __init__(self, inner, yield_seed: int) -> None:
        self.inner = inner
        self.yield_seed = yield_seed

    @property
    def directory(self) -> Optional[str]:
        return self.inner.directory

    @property
    def threshold(self) -> int:
        return self.inner.threshold

    def create_stream(self, checkpoint_id: int, **options):
        return _YieldingStream(self.inner.create_stream(checkpoint_id, **options), random.Random(self.yield_seed))


class _YieldingStream:
    __slots__ = ("inner", "random")

    def __init__(self, inner, r: random.Random) -> None:
        self.inner = inner
        self.random = r

    def write(self, data: bytes) -> None:
        pause = self.random.choice(YIELDS)
        if pause or self.random.random() < 0.5:
            time.sleep(pause)
        self.inner.write(data)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)
