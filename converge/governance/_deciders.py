"""Deciders and runners are people: who a decision or a run names must be someone the
store knows, and on the command line, when tokens are required, someone who proves
it with their token.

- With nobody registered (``converge user add``), ``--by`` is free text, as before
  people existed: a store that never registered anyone keeps working unchanged.
  Once anyone is registered, every decision (CLI, inbox, Python through
  :func:`converge.decisions.decide`) must name a known person (registered,
  holding a token, or in a group: ``audit.people.Decider.known``), else
  :class:`UnknownPerson` (:func:`converge.governance.check_decision`); so must
  whoever runs, submits, resumes or forks a run on the command line
  (:func:`cli_runner`).
- Tokens are required (:func:`tokens_required`) when the store says
  ``require-token true``, or, by default (``auto``), once anyone is registered:
  ``converge approve`` / ``reject`` then need the decider's API token (``--token``
  or ``$CONVERGE_TOKEN``), an approver's and the ``--by`` person's
  (:func:`cli_decider`), or a signature with ``--by``'s registered key; ``run``,
  ``submit``, ``resume`` and ``fork`` need the runner's token, and the runner
  recorded is its person. So the command line can neither vote twice under two
  names for a quorum, nor decide as a gate's approver, nor run under a name that
  four eyes would not recognise, any more than the inbox can.

Every refusal is a :class:`converge.errors.NotAllowed` (HTTP 403).
"""

from __future__ import annotations

from audit.people import Principal, authenticate, groups_of, knows
from audit.settings import REQUIRE_TOKEN, get_setting
from audit.signing import anyone_registered
from audit.store import SqlRunStore
from converge.errors import BadToken, TokenRequired, UnknownPerson

__all__ = [
    "cli_decider",
    "cli_runner",
    "token_person",
    "tokens_required",
    "unknown_person",
]


def unknown_person(store: SqlRunStore, name: str) -> UnknownPerson:
    """The refusal of a decision by ``name``, whom ``store`` does not know while
    people are registered there."""
    return UnknownPerson(
        f"{name!r} is not a person audit store {store.shown} knows: register them "
        f"with `converge user add {name}` (or give them a token)"
    )


def tokens_required(store: SqlRunStore) -> bool:
    """Whether the command line must prove who acts with a token: ``require-token``
    is ``true``, or ``auto`` (its default) and anyone is registered."""
    return _requiring(store) is not None


def _requiring(store: SqlRunStore) -> str | None:
    """Why tokens are required (None: they are not), for a refusal to say."""
    value = get_setting(store, REQUIRE_TOKEN)
    if value == "true":
        return "setting require-token"
    if value == "auto" and anyone_registered(store):
        return "setting require-token auto, and people are registered"
    return None


def token_person(store: SqlRunStore, token: str) -> Principal:
    """The person (name and role) ``token`` authenticates; what the role allows is
    the access policy's (:mod:`converge.access`). Raises :class:`BadToken`."""
    who = authenticate(store, token.strip())
    if who is None:
        raise BadToken("the token is unknown, expired or revoked: nothing was recorded")
    return who


def cli_decider(
    store: SqlRunStore,
    by: str | None,
    token: str | None,
    *,
    signed: bool = False,
    login: str = "unknown",
) -> Principal:
    """The person a command-line decision is made by: ``by`` (``--by`` or
    ``$CONVERGE_USER``), proven by ``token`` when given (its person must be ``by``,
    when named; its role is asked of the access policy by the decision); neither
    named: the token's person, else ``login`` (as ``run`` and ``resume`` default
    it, :func:`cli_runner`). Without a token the person holds the store itself
    (role ``admin``: the gate's approvers and four eyes still apply), and when
    :func:`tokens_required`, only a decision ``signed`` with ``--sign-with`` is
    taken (the signature is checked against ``by``'s registered key before
    anything is recorded). Raises :class:`BadToken` or :class:`TokenRequired`."""
    if token:
        who = token_person(store, token)
        if by is not None and who.name != by:
            raise BadToken(
                f"the token is {who.name}'s, and --by says {by}: a token decides as its "
                "own person only"
            )
        return who
    why = None if signed else _requiring(store)
    if why is not None:
        raise TokenRequired(
            f"audit store {store.shown} requires the decider's token for decisions on "
            f"the command line ({why}): give --token TOKEN or set "
            "$CONVERGE_TOKEN (converge token add NAME makes one), or sign with "
            "--sign-with KEY"
        )
    name = by or login
    return Principal(name, "admin", frozenset(groups_of(store, name)))


def cli_runner(
    store: SqlRunStore,
    named: str | None,
    token: str | None,
    login: str,
    *,
    doing: str = "run, submit, resume or fork a run",
) -> Principal:
    """The person who acts on a run from the command line (``doing``: what, for the
    refusals: runs, submits, resumes, forks, cancels it or comments on its gate), as
    it is recorded for four eyes (``audit.people.record_actor``).

    ``named``: ``--by`` or ``$CONVERGE_USER`` (None: neither given); ``token``: their
    API token (``--token``, ``$CONVERGE_TOKEN``); ``login``: the name used when
    neither names anyone. With a token: its person and role (``named`` must be
    them; what the role allows is the access policy's). Without: refused when
    :func:`tokens_required`; else ``named`` or ``login`` holding the store itself
    (role ``admin``), who must be a known person once anyone is registered.
    Raises :class:`BadToken`, :class:`TokenRequired` or :class:`UnknownPerson`."""
    if token:
        who = token_person(store, token)
        if named is not None and named != who.name:
            raise BadToken(
                f"the token is {who.name}'s, and --by (or $CONVERGE_USER) says {named}: "
                "a token acts as its own person only; nothing was recorded"
            )
        return who
    why = _requiring(store)
    if why is not None:
        raise TokenRequired(
            f"audit store {store.shown} requires a token to {doing} on the command "
            f"line ({why}): give --token TOKEN or set $CONVERGE_TOKEN (converge token "
            "add NAME makes one); nothing was recorded"
        )
    name = named or login
    if anyone_registered(store) and not knows(store, name):
        raise UnknownPerson(
            f"{name!r} is not a person audit store {store.shown} knows, and only its "
            f"people may {doing} there: register them with `converge user add {name}` "
            "(or give --by / $CONVERGE_USER a known name); nothing was recorded"
        )
    return Principal(name, "admin", frozenset(groups_of(store, name)))
