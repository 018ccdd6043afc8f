"""The shape of a proof bundle (docs/audit-format.md, "Bundle layout"), checked
before any check reads it.

A file of the wrong shape (``events`` a string, a ``cycle`` that is text, a
missing ``ledger``) is no bundle: ``converge verify-bundle`` exits 2 naming the
first field that is wrong (``events[3].cycle: ...``), so that exit 1 stays the
answer for a bundle of the right shape whose content was altered. Only the
types are checked here: whether the values fit together is what the checks of
:mod:`audit.proofs._bundle_check` say. Fields the layout does not name are
allowed (a later exporter may add some).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

__all__ = ["shape_problem"]


class _Shape(BaseModel):
    # strict: "1" is no integer and true no number; extra: a newer exporter's fields
    model_config = ConfigDict(strict=True, extra="allow")


class _Signed(_Shape):
    type: str
    key_id: str
    sig: str


class _RunStatement(_Signed):
    run_id: str
    chain: str
    last_seq: int
    head: str
    events_count: int
    events_root: str
    facts_count: int
    facts_root: str
    facts_merkle: str | None = None


class _AtStop(_Signed):
    run_id: str
    facts_root: str
    facts_count: int


class _Head(_Signed):
    size: int
    root: str


class _Entry(_Shape):
    seq: int
    run_id: str
    last_seq: int
    head: str


class _Ledger(_Shape):
    entry: _Entry
    index: int
    proof: list[str]


class _Common(_Shape):
    format: str
    kind: Literal["run", "fact"]
    run: _RunStatement
    facts_root_signature: _AtStop | None = None
    ledger: _Ledger
    signed_head: _Head
    ledger_checkpoint: str | None = None


class _Event(_Shape):
    cycle: int
    kind: str
    payload: str
    ts: str
    hash: str


class _Message(_Shape):
    message: str
    hash: str


class _RunBundle(_Common):
    events: list[_Event]
    initial_facts: list[str]
    checkpoint: str | None = None
    deciders: dict[str, str] | None = None


class _FirstRunBundle(_Common):
    events: list[_Message]
    facts: list[str]
    checkpoint: str | None = None
    deciders: dict[str, str] | None = None


class _Fact(_Shape):
    text: str
    index: int
    proof: list[str]


class _FactBundle(_Common):
    fact: _Fact


def _path(loc: tuple[int | str, ...]) -> str:
    """``("events", 3, "cycle")`` → ``events[3].cycle``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out or "(the bundle)"


def shape_problem(bundle: dict[str, Any], first_layout: bool) -> str | None:
    """``"FIELD.PATH: what is wrong"`` for the first field of ``bundle`` (a JSON
    object of format ``converge.bundle/2``, or ``/1`` when ``first_layout``) that
    is missing or not of its type; None when every field is."""
    kind = bundle.get("kind")
    model: type[_Common]
    if kind == "fact":
        model = _FactBundle
    elif kind == "run":
        model = _FirstRunBundle if first_layout else _RunBundle
    else:
        return f"kind: {kind!r:.40} where 'run' or 'fact' is expected"
    try:
        model.model_validate(bundle)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        return f"{_path(tuple(first['loc']))}: {first['msg'].lower()}"
    return None
