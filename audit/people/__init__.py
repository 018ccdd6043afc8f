"""The people who decide gates: people and groups, who acted on a run and
the access log (``_people``), API tokens (``_tokens``), quorum votes
(``_approvals``), comments on a gate (``_comments``), a decision read and recorded
in one transaction each (``_deciding``) and the tables they need (``_schema``).
"""

from __future__ import annotations

from audit.people._approvals import (
    MAX_REASON_CHARS,
    Vote,
    cast_vote,
    deciding_vote,
    votes,
    votes_on,
)
from audit.people._comments import (
    MAX_COMMENT_CHARS,
    Comment,
    add_comment,
    run_comments,
    run_with_comments,
)
from audit.people._deciding import Decider, DecisionCase, Recorded, decision_case, record_decision
from audit.people._people import (
    access_entries,
    actors_of,
    add_to_groups,
    failures_since,
    groups_of,
    knows,
    log_access,
    record_actor,
)
from audit.people._tokens import (
    ROLES,
    Principal,
    TokenInfo,
    add_token,
    authenticate,
    list_tokens,
    revoke_tokens,
    still_valid,
    token_hash,
)

__all__ = [
    "MAX_COMMENT_CHARS",
    "MAX_REASON_CHARS",
    "ROLES",
    "Comment",
    "Decider",
    "DecisionCase",
    "Principal",
    "Recorded",
    "TokenInfo",
    "Vote",
    "access_entries",
    "actors_of",
    "add_comment",
    "add_to_groups",
    "add_token",
    "authenticate",
    "cast_vote",
    "deciding_vote",
    "decision_case",
    "failures_since",
    "groups_of",
    "knows",
    "list_tokens",
    "log_access",
    "record_actor",
    "record_decision",
    "revoke_tokens",
    "run_comments",
    "run_with_comments",
    "still_valid",
    "token_hash",
    "votes",
    "votes_on",
]
