"""Implementations that misbehave on purpose, to check a campaign's fault handling.

Each is the reference map until a ``put`` or ``put_and_get_old`` stores the
state ``[7, 7]`` (a few seeds in a hundred of the default walk), then:

- ``exits_on_77``: ends its process with ``os._exit(3)``, like a crashing
  native extension -> a CRASH outcome with code ``worker-exit``;
- ``hangs_on_77``: never returns -> a TIMEOUT outcome (``time-limit``): the
  step time limit interrupts it (a shrunk, replayable failure), or the seed's
  hard limit kills its process if that comes first;
- ``introspection_raises_on_77``: its white-box view raises -> a CRASH failure
  (``P7``) of the step after which the view was read, replayable.

Try a cluster setup with them before a long campaign (tests/zoo on every
worker's PYTHONPATH)::

    PYTHONPATH=tests/zoo cowcheck campaign --impl faults:exits_on_77 --seeds 0:200 --out /tmp/faults

Every seed gets a row; the seeds that trigger the fault are reported with
their seed number, and the campaign carries on.
"""

from __future__ import annotations

import copy
import os

from cowcheck.reference import CopyOnWriteStateMap

__all__ = ["TRIGGER", "exits_on_77", "hangs_on_77", "introspection_raises_on_77"]

TRIGGER = [7, 7]


class _Triggered(CopyOnWriteStateMap):
    def put(self, key, namespace, state):
        if state == TRIGGER:
            self.misbehave()
        return super().put(key, namespace, state)

    def put_and_get_old(self, key, namespace, state):
        if state == TRIGGER:
            self.misbehave()
        return super().put_and_get_old(key, namespace, state)

    def misbehave(self) -> None:
        raise NotImplementedError


class _Exits(_Triggered):
    def misbehave(self) -> None:
        os._exit(3)


class _Hangs(_Triggered):
    def misbehave(self) -> None:
        while True:
            pass


class _IntrospectionRaises(_Triggered):
    broken = False

    def misbehave(self) -> None:
        self.broken = True

    def introspect(self):
        if self.broken:
            raise RuntimeError("white-box view lost after a put of [7, 7]")
        return super().introspect()


def exits_on_77(capacity: int = 4, state_copier=copy.deepcopy) -> CopyOnWriteStateMap:
    return _Exits(capacity=capacity, state_copier=state_copier)


def hangs_on_77(capacity: int = 4, state_copier=copy.deepcopy) -> CopyOnWriteStateMap:
    return _Hangs(capacity=capacity, state_copier=state_copier)


def introspection_raises_on_77(capacity: int = 4, state_copier=copy.deepcopy) -> CopyOnWriteStateMap:
    return _IntrospectionRaises(capacity=capacity, state_copier=state_copier)
