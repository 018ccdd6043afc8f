"""Deciders are people: who a decision names must be someone the store knows, and on
the command line, with ``require-token``, someone who proves it with their token.

- With nobody registered (``converge user add``), ``--by`` is free text, as before
  people existed: a store that never registered anyone keeps working unchanged.
  Once anyone is registered, every decision (CLI, inbox, Python through
  :func:`converge.decisions.decide`) must name a known person (registered,
  holding a token, or in a group: ``audit.people.Decider.known``), else
  :class:`UnknownPerson` (:func:`converge.governance.check_decision`).
- ``converge config set require-token true`` (:mod:`audit.settings`): ``converge
  approve`` / ``reject`` need the decider's API token (``--token`` or
  ``$CONVERGE_TOKEN``), an approver's and the ``--by`` person's
  (:func:`cli_decider`), so the command line cannot vote twice under two names for
  a quorum, nor decide as a gate's approver or around four eyes, any more than the
  inbox can.

Every refusal is a :class:`converge.errors.NotAllowed` (HTTP 403).
"""

from __future__ import annotations

from audit.people import authenticate
from audit.settings import REQUIRE_TOKEN, get_setting
from audit.store import SqlRunStore
from converge.errors import BadToken, TokenRequired, UnknownPerson

__all__ = ["cli_decider", "unknown_person"]


def unknown_person(store: SqlRunStore, name: str) -> UnknownPerson:
    """The refusal of a decision by ``name``, whom ``store`` does not know while
    people are registered there."""
    return UnknownPerson(
        f"{name!r} is not a person audit store {store.shown} knows: register them "
        f"with `converge user add {name}` (or give them a token)"
    )


def cli_decider(store: SqlRunStore, by: str, token: str | None) -> str:
    """The person a command-line decision is made by: ``by``, proven by ``token``
    when given (its person must be ``by`` and an approver); required when the store
    says ``require-token``. Raises :class:`BadToken` or :class:`TokenRequired`."""
    if token:
        who = authenticate(store, token.strip())
        if who is None:
            raise BadToken("the token is unknown, expired or revoked: nothing was recorded")
        if not who.may_decide:
            raise BadToken(f"the token is a viewer token of {who.name}: it may not decide gates")
        if who.name != by:
            raise BadToken(
                f"the token is {who.name}'s, and --by says {by}: a token decides as its "
                "own person only"
            )
        return who.name
    if get_setting(store, REQUIRE_TOKEN) == "true":
        raise TokenRequired(
            f"audit store {store.shown} requires the decider's token for decisions on "
            "the command line (setting require-token): give --token TOKEN or set "
            "$CONVERGE_TOKEN (converge token add NAME makes one)"
        )
    return by
