"""A machine's Hypothesis rules, made from its table of operations: one rule per operation.

Each rule draws the operation's arguments domain by domain
(:class:`~cowcheck.core.program.Domain`) and applies the step through the
machine's harness (:meth:`~cowcheck.core.machine.HarnessMachine.apply`).
Values come from the machine's :class:`RuleContext` (a strategy per domain
kind); ids of what the program made live in Hypothesis bundles, one per pool:
a ``new`` id is numbered by the machine (0, 1, 2... per pool) and joins its
pool, a ``live`` one is drawn from it, a ``taken`` one is consumed. An
operation may join its id to another pool after the step (``joins``: a
checkpoint completes), run only when its ``requires(harness)`` holds, or be
applied several times in a row (``repeat``). A machine whose arguments need
more than a strategy (the map's keys come from the example's world)
overrides the context's hooks, not the rules.

>>> from hypothesis import strategies as st
>>> from cowcheck.core.program import Domain, Operation, OperationTable
>>> NEW = Domain("sid", ids="new", pool="snapshots")
>>> table = OperationTable("demo", [Operation(name="snapshot", args=("sid",), domains=(NEW,)),
...                                 Operation(name="put", args=("value",), domains=(Domain("value"),))])
>>> class Values(RuleContext):
...     def value(self):
...         return st.integers(0, 9)
>>> sorted(operation_rules(table, Values(), pools("snapshots")))
['put', 'snapshot']
"""

from __future__ import annotations

from typing import Any, Callable

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, consumes, precondition, rule

from cowcheck.core.program import Domain, Operation

__all__ = ["RuleContext", "operation_rules", "pools", "new_id"]


def pools(*names: str) -> dict[str, Bundle]:
    """A Hypothesis bundle per pool of ids (put them in the machine class too)."""
    return {name: Bundle(name) for name in names}


def new_id(machine, pool: str) -> int:
    """The next id of ``pool`` in this example: 0, 1, 2..."""
    counters = machine.__dict__.setdefault("_new_ids", {})
    n = counters.get(pool, 0)
    counters[pool] = n + 1
    return n


class RuleContext:
    """How a machine's rules draw their values: a method per domain kind returning a
    Hypothesis strategy (or None: the value is not drawn, :meth:`resolve` makes it).
    The hooks below have defaults that fit a machine whose arguments are the values drawn."""

    def strategy(self, op: Operation, domain: Domain):
        """The strategy of ``op``'s argument of ``domain`` (default: the method named by its kind)."""
        return getattr(self, domain.kind)()

    def resolve(self, machine, op: Operation, domain: Domain, drawn) -> tuple:
        """The step arguments ``domain`` fills, from what was drawn for it."""
        return tuple(drawn) if domain.arity > 1 else (drawn,)

    def target(self, op: Operation) -> str:
        """The pool the rule's result joins ("" for none): ``joins``, or the pool of a new id."""
        return op.joins or next((d.pool for d in op.domains if d.ids == "new"), "")

    def result(self, op: Operation, drawn: dict, ident) -> Any:
        """What joins :meth:`target`: the step's id (the new one, or the one it named)."""
        return ident

    def condition(self, op: Operation) -> Callable | None:
        """The rule's precondition on the machine (default: ``op.requires`` on its harness)."""
        requires = op.requires
        return None if requires is None else (lambda machine: requires(machine.harness))

    def after(self, machine, op: Operation, args: tuple) -> None:
        """Bookkeeping after the step was applied."""


def _keywords(op: Operation) -> list[str]:
    """A rule keyword per domain: its kind, numbered when the operation has two of a kind."""
    kinds = [d.kind for d in op.domains]
    return [kind if kinds.count(kind) == 1 else f"{kind}_{kinds[:i].count(kind)}" for i, kind in enumerate(kinds)]


def _rule_for(op: Operation, context: RuleContext, bundles: dict[str, Bundle]):
    arguments: dict = {}
    slots: list = []  # (domain, keyword or None: numbered here or made by resolve)
    for domain, keyword in zip(op.domains, _keywords(op)):
        if domain.ids == "new":
            slots.append((domain, None))
            continue
        if domain.ids == "live":
            strategy = bundles[domain.pool]
        elif domain.ids == "taken":
            strategy = consumes(bundles[domain.pool])
        else:
            strategy = context.strategy(op, domain)
        slots.append((domain, None if strategy is None else keyword))
        if strategy is not None:
            arguments[keyword] = strategy
    if op.repeat is not None:
        arguments["times"] = st.integers(*op.repeat)
    target = context.target(op)

    def apply(self, **drawn):
        args: tuple = ()
        ident = None
        for domain, keyword in slots:
            if domain.ids == "new":
                value = new_id(self, domain.pool)
                args += (value,)
            else:
                value = drawn.get(keyword)
                args += context.resolve(self, op, domain, value)
            if domain.ids and ident is None:
                ident = value
        for _ in range(drawn.get("times", 1)):
            self.apply(op.name, *args)
        context.after(self, op, args)
        return context.result(op, drawn, ident) if target else None

    apply.__name__ = apply.__qualname__ = op.rule_name
    decorated = rule(**({"target": bundles[target]} if target else {}), **arguments)(apply)
    condition = context.condition(op)
    return decorated if condition is None else precondition(condition)(decorated)


def operation_rules(operations, context: RuleContext, bundles: dict[str, Bundle],
                    skip: Callable[[Operation], bool] = lambda op: False) -> dict:
    """A Hypothesis rule per operation of ``operations`` (but those ``skip`` names), by rule
    name, drawing with ``context`` and keeping ids in ``bundles`` (:func:`pools`)."""
    return {op.rule_name: _rule_for(op, context, bundles) for op in operations if not skip(op)}
