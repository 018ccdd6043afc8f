"""The registered suggestors, indexed for scheduling.

Registration order is the merge order. Each suggestor is filed under the context
keys it reads (its *subscriptions*), so finding the eligible suggestors of a cycle
costs O(subscribers of the dirty keys + dependency-free suggestors), never
O(all suggestors) (docs/concepts.md (step 3)).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from engine.context import Context
from engine.errors import ConfigurationError
from engine.suggestor import FunctionSuggestor, Suggestor, is_async_suggestor


class SuggestorRegistry:
    """Suggestors by index (registration order), with the lookups the cycle needs.

    ``execute[i]`` and ``accepts[i]`` are the callables the loop invokes:
    a decorator suggestor's own function (no wrapper frame on the hot path), and
    ``None`` for an ``accepts`` that always says yes. ``records_effect[i]``: the
    suggestor is not deterministic (its ``deterministic`` attribute is False, or
    :meth:`mark_nondeterministic` named it), so its proposals are recorded.
    """

    def __init__(self) -> None:
        self.suggestors: list[Suggestor] = []
        self.names: list[str] = []
        self.index: dict[str, int] = {}
        self.is_async: list[bool] = []
        self.execute: list[Callable[[Context], Any]] = []
        self.accepts: list[Callable[[Context], bool] | None] = []
        self.records_effect: list[bool] = []
        self.any_async = False
        self.any_accepts = False
        self.subscribers: dict[str, list[int]] = {}
        self.dependency_free: list[int] = []

    def add(self, *suggestors: Suggestor) -> None:
        """Register ``suggestors`` after those already registered.

        Raises :class:`ConfigurationError` for a duplicate name or an object that
        is not a suggestor (no name, no ``execute(ctx)`` or ``accepts(ctx)``).
        """
        for s in suggestors:
            name = getattr(s, "name", None)
            if not isinstance(name, str) or not name:
                raise ConfigurationError(f"{s!r} has no suggestor name")
            if not callable(getattr(s, "execute", None)) or not callable(
                getattr(s, "accepts", None)
            ):
                raise ConfigurationError(f"suggestor {name!r} lacks execute(ctx) or accepts(ctx)")
            if name in self.index:
                raise ConfigurationError(f"suggestor name {name!r} is registered twice")
            deps: frozenset[str] = frozenset(getattr(s, "dependencies", ()) or ())
            i = len(self.suggestors)
            self.suggestors.append(s)
            self.names.append(name)
            self.index[name] = i
            self.is_async.append(is_async_suggestor(s))
            # decorator suggestors are called without their wrapper's extra frame
            if type(s) is FunctionSuggestor:
                fn, accepts = s.callables()
                self.execute.append(fn)
                self.accepts.append(None if accepts is None else s.accepts)
            else:
                self.execute.append(s.execute)
                self.accepts.append(s.accepts)
            self.records_effect.append(getattr(s, "deterministic", True) is False)
            self.any_async = self.any_async or self.is_async[-1]
            self.any_accepts = self.any_accepts or self.accepts[-1] is not None
            if deps:
                for key in deps:
                    self.subscribers.setdefault(key, []).append(i)
            else:
                self.dependency_free.append(i)

    def mark_nondeterministic(self, names: Iterable[str]) -> None:
        """Record the proposals of the suggestors ``names`` (a job file's
        ``nondeterministic:``), as if their ``deterministic`` were False.

        Raises :class:`ConfigurationError` for a name not registered.
        """
        for name in names:
            i = self.index.get(name)
            if i is None:
                raise ConfigurationError(f"no suggestor {name!r} is registered")
            self.records_effect[i] = True

    def any_async_in(self, indices: list[int]) -> bool:
        """True when one of the suggestors at ``indices`` is async."""
        if not self.any_async:
            return False
        is_async = self.is_async
        return any(is_async[i] for i in indices)
