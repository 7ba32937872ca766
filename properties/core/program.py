"""Programs as data: steps, and the table of operations each machine declares once.

A program is a list of :class:`Step` (an operation's name and its JSON-able
arguments). The same list is produced by the Hypothesis machines and by
seeded walks, applied by a harness, shrunk by deleting and simplifying
steps, stored as JSON and printed as runnable Python.

Each machine declares its operations once, in an :class:`OperationTable` of
:class:`Operation` records: the name, the arguments, how a step prints as
Python, how its arguments are checked when read from a file and how they
simplify when shrinking, and the :class:`Domain` of each argument, from which
generators draw them (the Hypothesis rules of every machine are made from the
table: :func:`cowcheck.core.rules.operation_rules`). A machine's package
extends :class:`Operation` and :class:`Domain` with what its own consumers need
(the encoding of the Flink bridge's batches, regression rendering), so that
adding an operation is a change to that package alone.

>>> table = OperationTable("demo", [Operation(name="put", args=("key", "value"), template="m.put({0!r}, {1!r})")])
>>> table.render(Step("put", (1, [7])))
'm.put(1, [7])'
>>> table.parse({"op": "get", "args": []})
Traceback (most recent call last):
...
ValueError: unknown operation 'get' of the demo machine; known: put
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

import attrs

from cowcheck.core.keys import decode_value, encode_value

__all__ = ["Step", "Domain", "Operation", "OperationTable", "domains_checker", "domains_simplifier", "draw_args",
           "step_to_json"]


@attrs.frozen
class Step:
    """One operation: ``op`` (a name in its machine's table) and its JSON-able ``args``."""

    op: str = attrs.field(validator=attrs.validators.instance_of(str))
    args: tuple = attrs.field(converter=tuple, factory=tuple)


def step_to_json(step: Step) -> dict[str, Any]:
    """The step as JSON data (keys and namespaces beyond JSON as tagged objects, :mod:`cowcheck.core.keys`)."""
    return {"op": step.op, "args": encode_value(list(step.args))}


@attrs.frozen
class Domain:
    """A kind of argument of a machine's operations. ``kind`` names the method a
    context (Hypothesis strategies, a seeded walk) draws it with; ``arity`` is
    how many step arguments it fills (a pair fills two); ``check`` finds a
    problem with values read from a file; ``simpler`` proposes simpler values
    (shrinking). The id of
    something the program made (a snapshot, a checkpoint) says how the step uses
    it (``ids``): ``new`` makes one (the program numbers it; it then lives in the
    pool named ``pool``), ``live`` names one of ``pool``, ``taken`` names one of
    ``pool`` and takes it out."""

    kind: str
    arity: int = 1
    check: Callable[[tuple], str | None] = lambda values: None
    simpler: Callable[[tuple], Iterable[tuple]] = lambda values: ()
    ids: str = attrs.field(default="", validator=attrs.validators.in_(("", "new", "live", "taken")))
    pool: str = ""

    def draw(self, context) -> tuple:
        """Values drawn by ``context`` (a method per kind), as a tuple of ``arity``."""
        got = getattr(context, self.kind)()
        return got if self.arity > 1 else (got,)


def domains_checker(domains: tuple):
    """An operation's ``check``: each domain's check on its arguments, the first problem."""
    def check(args: tuple):
        at = 0
        for domain in domains:
            problem = domain.check(args[at: at + domain.arity])
            if problem:
                return problem
            at += domain.arity
        return None
    return check


def domains_simplifier(domains: tuple):
    """An operation's ``simplify``: each domain's simpler values in place of its arguments."""
    def simplify(args: tuple):
        at = 0
        for domain in domains:
            for values in domain.simpler(args[at: at + domain.arity]):
                yield args[:at] + tuple(values) + args[at + domain.arity:]
            at += domain.arity
    return simplify


def draw_args(op: "Operation", context) -> tuple:
    """The arguments of ``op`` drawn by ``context`` (a method per domain kind), domain by domain, in order."""
    out: tuple = ()
    for domain in op.domains:
        out += domain.draw(context)
    return out


@attrs.frozen(kw_only=True)
class Operation:
    """One operation of a machine.

    ``template``: the step as a line of Python (``str.format`` with the
    arguments), unless ``render_with`` builds the line itself;
    ``check``: a problem with arguments read from a file, or None;
    ``simplify``: simpler argument tuples, simplest first (for shrinking);
    ``legacy``: the arguments of an older file's form of the step in today's form
    (None: not an older form), so stored counterexamples keep replaying.

    What generators need (:func:`cowcheck.core.rules.operation_rules`): ``domains``,
    the arguments' :class:`Domain` in order; ``rule``, the Hypothesis rule's name (the
    operation's by default); ``joins``, the pool the step's id joins after it (a completed
    checkpoint; a new id joins its own pool anyway); ``requires(harness)``, whether the step
    may run now (None: always); ``repeat``, ``(least, most)`` steps a rule makes in a row.
    """

    name: str
    args: tuple = ()
    template: str = ""
    render_with: Callable[[tuple], str] | None = None
    check: Callable[[tuple], str | None] | None = None
    simplify: Callable[[tuple], Iterable[tuple]] | None = None
    legacy: Callable[[list], list | None] | None = None
    domains: tuple = ()
    rule: str = ""
    joins: str = ""
    requires: Callable[[Any], bool] | None = None
    repeat: tuple | None = None

    @property
    def rule_name(self) -> str:
        return self.rule or self.name

    def render(self, args: tuple) -> str:
        if self.render_with is not None:
            return self.render_with(tuple(args))
        return self.template.format(*args)

    def simpler(self, args: tuple) -> Iterator[tuple]:
        return iter(self.simplify(tuple(args))) if self.simplify is not None else iter(())


class OperationTable:
    """A machine's operations, by name, in declaration order (the order is an
    interface: the Flink bridge numbers operations by it)."""

    def __init__(self, machine: str, operations: Iterable[Operation]) -> None:
        self.machine = machine
        self.operations: dict[str, Operation] = {}
        for op in operations:
            if op.name in self.operations:
                raise ValueError(f"{machine} operation {op.name!r} declared twice")
            self.operations[op.name] = op

    def __getitem__(self, name: str) -> Operation:
        return self.operations[name]

    def __contains__(self, name: object) -> bool:
        return name in self.operations

    def __iter__(self) -> Iterator[Operation]:
        return iter(self.operations.values())

    def __len__(self) -> int:
        return len(self.operations)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.operations)

    def render(self, step: Step) -> str:
        """The step as a line of Python."""
        return self.operations[step.op].render(step.args)

    def simpler_steps(self, step: Step) -> Iterator[Step]:
        """Candidate replacements for one step, simplest first."""
        op = self.operations.get(step.op)
        if op is not None:
            for args in op.simpler(step.args):
                yield Step(step.op, args)

    def parse(self, data: Any) -> Step:
        """One step from its JSON form; ValueError naming the problem for anything malformed."""
        if not isinstance(data, dict) or "op" not in data or "args" not in data:
            raise ValueError(f"a step must be an object with 'op' and 'args', got {data!r:.80}")
        name, args = data["op"], data["args"]
        op = self.operations.get(name) if isinstance(name, str) else None
        if op is None:
            raise ValueError(f"unknown operation {name!r} of the {self.machine} machine; known: "
                             f"{', '.join(self.operations)}")
        if isinstance(args, list) and len(args) != len(op.args) and op.legacy is not None:
            args = op.legacy(args) or args
        if not isinstance(args, list) or len(args) != len(op.args):
            raise ValueError(f"{name}: expected arguments {list(op.args)}, got {args!r:.80}")
        args = decode_value(args)
        problem = op.check(tuple(args)) if op.check is not None else None
        if problem:
            raise ValueError(f"{name}: {problem}")
        return Step(name, tuple(args))
