"""Suggestors: the agents of a run. They read the context and only propose."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol, runtime_checkable

from engine.context import Context
from engine.effect import Effect
from engine.facts import Proposal

SuggestorOutput = Effect | list[Proposal] | tuple[Proposal, ...] | Proposal | None


@runtime_checkable
class Suggestor(Protocol):
    """An agent: rule code, a tool, an LLM call.

    ``name`` is unique within an engine; ``dependencies`` are the context keys it
    reads (it runs in the cycle after one of them changed; an empty set means
    "consider me every cycle", as in converge-core). ``accepts(ctx)`` may decline
    a cycle; ``execute(ctx)`` returns an :class:`Effect` (or a list of proposals)
    and may be ``async def``.

    Optional: ``deterministic`` (absent = True). A suggestor whose output cannot
    be reproduced from the context (a clock, a network call, sampling) sets it
    False: with a store, the proposals of each of its executions are recorded
    (``effect`` of its ``suggestor_executed`` event), and ``converge replay``
    re-uses them instead of executing it.
    """

    name: str
    dependencies: frozenset[str]

    def accepts(self, ctx: Context) -> bool: ...

    def execute(self, ctx: Context) -> Any: ...


class FunctionSuggestor:
    """A suggestor made from a function of the context (see :func:`suggestor`)."""

    __slots__ = ("_accepts", "_fn", "dependencies", "deterministic", "is_async", "name")

    def __init__(
        self,
        fn: Callable[[Context], Any],
        name: str,
        dependencies: Iterable[str] = (),
        accepts: Callable[[Context], bool] | None = None,
        deterministic: bool = True,
    ) -> None:
        self._fn = fn
        self.name = name
        self.dependencies = frozenset(dependencies)
        self._accepts = accepts
        self.is_async = inspect.iscoroutinefunction(fn)
        self.deterministic = deterministic

    def accepts(self, ctx: Context) -> bool:
        """Delegates to the ``accepts`` callable given to the decorator (default: yes)."""
        return True if self._accepts is None else self._accepts(ctx)

    def execute(self, ctx: Context) -> Any:
        """Calls the wrapped function (a coroutine when it is ``async def``)."""
        return self._fn(ctx)

    def __call__(self, ctx: Context) -> Any:
        return self._fn(ctx)

    def callables(self) -> tuple[Callable[[Context], Any], Callable[[Context], bool] | None]:
        """The wrapped function and the ``accepts`` callable (None: every context), for
        the registry to call without this wrapper's frame."""
        return self._fn, self._accepts

    def __repr__(self) -> str:
        return f"<suggestor {self.name} deps={sorted(self.dependencies)}>"


def suggestor(
    *,
    name: str | None = None,
    dependencies: Iterable[str] = (),
    accepts: Callable[[Context], bool] | None = None,
    deterministic: bool = True,
) -> Callable[
    [Callable[[Context], SuggestorOutput | Awaitable[SuggestorOutput]]], FunctionSuggestor
]:
    """Decorate a function of the context into a suggestor.

    The function returns an ``Effect``, a list of ``Proposal`` or ``None``; it may
    be ``async def``. ``name`` defaults to the function's name. ``deterministic=False``
    marks output the context does not determine (see :class:`Suggestor`): its
    proposals are recorded, and replayed by ``converge replay``.
    """

    def wrap(fn: Callable[[Context], Any]) -> FunctionSuggestor:
        return FunctionSuggestor(fn, name or fn.__name__, dependencies, accepts, deterministic)

    return wrap


def is_async_suggestor(s: Suggestor) -> bool:
    """True when ``s.execute`` is a coroutine function."""
    flag = getattr(s, "is_async", None)
    if isinstance(flag, bool):
        return flag
    return inspect.iscoroutinefunction(s.execute)
