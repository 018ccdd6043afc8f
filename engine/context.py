"""The shared context: the facts of a run, read-only for suggestors."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engine.effect import Usage, usage_problem
from engine.facts import Fact, content_key

if TYPE_CHECKING:  # a type only: the budget's models are built where a run is
    from engine.budget import RemainingBudget

_EMPTY: tuple[Fact, ...] = ()


class Context:
    """A read-only view of the facts promoted so far, in promotion order.

    ``ctx.get(key)`` gives the facts of a key (an empty tuple when none),
    ``ctx.has(key)``, ``ctx.keys()``, ``len(ctx)``, iteration over every fact,
    ``ctx.cycle`` (the cycle being executed; 0 before the first), ``ctx.fact(id)``,
    ``ctx.remaining_budget()``, ``ctx.suggestors`` (the run's suggestors),
    ``ctx.recorded_execution(name)`` (what a dead process recorded of a cycle a
    recovery runs again); ``ctx.record_usage(...)`` counts what a failed or cut
    execution spent. Only the engine adds facts (through its :class:`FactIndex`).
    """

    __slots__ = (
        "__weakref__",  # what converge keeps per run (converge.agents.served)
        "_by_id",
        "_by_key",
        "_facts",
        "_identities",
        "_index",
        "_recorded",
        "_tuples",
        "cycle",
    )

    def __init__(self, index: FactIndex | None = None, *, cycle: int = 0) -> None:
        # the index's own containers: the engine writes them, this view reads them
        index = FactIndex() if index is None else index
        self._facts = index.facts
        self._by_key = index.by_key
        self._tuples = index.tuples
        self._by_id = index.by_id
        self._identities = index.identities
        self._index = index
        self._recorded = index.recorded
        self.cycle = cycle

    @classmethod
    def of(
        cls, facts: Iterable[Fact], cycle: int = 0, remaining: RemainingBudget | None = None
    ) -> Context:
        """A context holding ``facts`` (in that order) at ``cycle``: a snapshot of a
        run's context rebuilt elsewhere, e.g. on a worker (docs/scale-out.md).
        ``remaining`` is what was left of the run's budgets when the snapshot was
        taken: :meth:`remaining_budget` returns it (None: unknown).

        Raises ``TypeError``/``ValueError`` for content that is not JSON-serialisable.
        """
        index = FactIndex()
        for fact in facts:
            index.promote(fact, (fact.key, content_key(fact.content)))
        ctx = cls(index)
        ctx.cycle = cycle
        if remaining is not None:
            index.remaining = lambda: remaining
        return ctx

    # -- reading ---------------------------------------------------------------
    def get(self, key: str) -> tuple[Fact, ...]:
        """The facts on ``key`` in promotion order; ``()`` when there are none."""
        facts = self._by_key.get(key)
        if facts is None:
            return _EMPTY
        cached = self._tuples.get(key)
        # facts are only ever appended, so a snapshot of the same length is current
        if cached is not None and len(cached) == len(facts):
            return cached
        snapshot = tuple(facts)
        self._tuples[key] = snapshot
        return snapshot

    def has(self, key: str) -> bool:
        """True when at least one fact is on ``key``."""
        return key in self._by_key

    def keys(self) -> list[str]:
        """The keys that hold facts, in order of their first fact."""
        return list(self._by_key)

    def fact(self, fact_id: str) -> Fact | None:
        """The fact with this id, or None."""
        by_id = self._by_id
        facts = self._facts
        # the id index is built lazily: the hot path of a run never pays for it
        for i in range(len(by_id), len(facts)):
            f = facts[i]
            by_id[f.id] = f
        return by_id.get(fact_id)

    def contains(self, key: str, content: Any) -> bool:
        """True when a fact equal in (key, content) exists."""
        return (key, content_key(content)) in self._identities

    def facts(self) -> list[Fact]:
        """Every fact in promotion order (a copy)."""
        return list(self._facts)

    def count(self, key: str) -> int:
        """How many facts are on ``key``."""
        facts = self._by_key.get(key)
        return len(facts) if facts is not None else 0

    def remaining_budget(self) -> RemainingBudget | None:
        """What is left of the run's budgets now, computed on each call (see
        :class:`~engine.budget.RemainingBudget`); ``None`` outside a run (a context
        built by hand, or rebuilt on a worker)."""
        source = self._index.remaining
        return None if source is None else source()

    @property
    def suggestors(self) -> tuple[str, ...]:
        """The names of the run's suggestors, in registration order (the same in
        every leg of a run: a resume refuses other suggestors); ``()`` outside a run."""
        return tuple(self._index.suggestors)

    def recorded_execution(self, suggestor: str) -> Mapping[str, Any] | None:
        """While a run recovered after its process died runs again a cycle that the
        dead process had recorded (those after its last checkpoint), what it recorded
        of ``suggestor``'s execution in this cycle: its ``suggestor_executed`` event's
        payload (an agent's model ``responses`` among its audit details), so that the
        execution can give back what it got then rather than ask again (converge's
        agents do: no model call of a recorded cycle is paid twice). None otherwise."""
        source = self._index.replayed
        return None if source is None else source(self.cycle, suggestor)

    def record_usage(self, suggestor: str, usage: Usage) -> None:
        """Record what an execution of ``suggestor`` spent (tokens, USD) but will not
        return in an :class:`~engine.effect.Effect`: one that raises, or that
        ``Engine.cancel()`` or the time budget cuts (record it, then re-raise the
        ``asyncio.CancelledError``).

        When the engine collects the cycle it adds the usage to the run's, so that it
        counts toward the token and cost budgets, and writes a ``usage_recorded``
        audit event. Usage an execution returns in its ``Effect`` must not be
        recorded too. Raises ``TypeError`` for a ``usage`` that is not a valid
        :class:`~engine.effect.Usage` (negative or non-integer token counts, a cost
        that is not a finite, non-negative USD amount).
        """
        problem = usage_problem(usage)
        if problem is not None:
            raise TypeError(f"record_usage({suggestor!r}): {problem}")
        if usage.input_tokens or usage.output_tokens or usage.cost_usd:
            self._recorded.append((str(suggestor), usage))

    def recorded_usage(self) -> list[tuple[str, Usage]]:
        """What :meth:`record_usage` recorded and the engine has not collected yet:
        ``(suggestor, usage)`` pairs, oldest first (a copy)."""
        return list(self._recorded)

    def __len__(self) -> int:
        return len(self._facts)

    def __iter__(self) -> Iterator[Fact]:
        return iter(tuple(self._facts))

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    def __repr__(self) -> str:
        return f"Context(facts={len(self._facts)}, keys={len(self._by_key)}, cycle={self.cycle})"


class FactIndex:
    """The facts behind a :class:`Context`, written by the engine only: ``facts`` in
    promotion order, ``by_key`` (key → its facts), ``identities`` ((key, content
    key) pairs, for deduplication), the lazily built ``by_id`` and the per-key
    ``tuples`` snapshots the context hands out, and the usage ``recorded`` by
    executions (``Context.record_usage``) that the engine has not collected yet;
    ``remaining``: what ``Context.remaining_budget()`` calls (None outside a run);
    ``suggestors``: the run's suggestor names; ``replayed``: what
    ``Context.recorded_execution`` calls with the cycle (None: nothing recorded).
    A context built on an index reads these very containers."""

    __slots__ = (
        "by_id",
        "by_key",
        "facts",
        "identities",
        "recorded",
        "remaining",
        "replayed",
        "suggestors",
        "tuples",
    )

    def __init__(self, facts: list[Fact] | None = None) -> None:
        self.facts: list[Fact] = []
        self.by_key: dict[str, list[Fact]] = {}
        self.tuples: dict[str, tuple[Fact, ...]] = {}
        self.by_id: dict[str, Fact] = {}
        self.identities: set[tuple[str, Any]] = set()
        # never replaced, only cleared: the context holds this very list
        self.recorded: list[tuple[str, Usage]] = []
        self.remaining: Callable[[], RemainingBudget] | None = None
        self.suggestors: Sequence[str] = ()
        self.replayed: Callable[[int, str], Mapping[str, Any] | None] | None = None
        if facts:  # loaded from a checkpoint or fact chunks, in order
            self.facts.extend(facts)
            by_key = self.by_key
            identities = self.identities
            for fact in facts:
                key = fact[1]
                bucket = by_key.get(key)
                if bucket is None:
                    by_key[key] = [fact]
                else:
                    bucket.append(fact)
                content = fact[2]
                c = type(content)
                identities.add(
                    (key, content if c is str or c is int or c is float else content_key(content))
                )

    def promote(self, fact: Fact, identity: tuple[str, Any]) -> None:
        """Add ``fact`` (whose identity is ``identity``) after the others."""
        key = fact.key
        self.facts.append(fact)
        bucket = self.by_key.get(key)
        if bucket is None:
            self.by_key[key] = [fact]
        else:
            bucket.append(fact)
        self.identities.add(identity)

    def has_identity(self, identity: tuple[str, Any]) -> bool:
        """True when a fact of this (key, content key) identity is in."""
        return identity in self.identities

    def next_id(self, key: str) -> str:
        """The id the next fact on ``key`` gets: ``{key}#{n}``."""
        facts = self.by_key.get(key)
        return f"{key}#{len(facts) if facts is not None else 0}"
