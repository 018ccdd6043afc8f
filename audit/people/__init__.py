"""The people who decide gates: people and groups, who acted on a run and
the access log (``_people``), API tokens (``_tokens``), quorum votes
(``_approvals``), comments on a gate (``_comments``), a decision read and recorded
in one transaction each (``_deciding``) and the tables they need (``_schema``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from audit.lazy import face

if TYPE_CHECKING:
    from audit.people._approvals import (
        MAX_REASON_CHARS,
        VOTES_PER_QUERY,
        Vote,
        VoteOutcome,
        cast_vote,
        deciding_vote,
        locked_pending_gate,
        vote_in,
        votes,
        votes_on,
    )
    from audit.people._comments import (
        KIND,
        MAX_COMMENT_CHARS,
        Comment,
        add_comment,
        comments,
        run_comments,
    )
    from audit.people._deciding import (
        Decider,
        DecisionCase,
        Recorded,
        decision_case,
        record_decision,
    )
    from audit.people._people import (
        MAX_DETAIL_CHARS,
        AccessEntry,
        access_entries,
        actors_in,
        actors_of,
        add_to_groups,
        groups_in,
        groups_of,
        holds_token_or_group,
        knows,
        log_access,
        members,
        record_actor,
        remove_from_group,
    )
    from audit.people._schema import (
        INBOX_LOCK,
        ensure_inbox_tables,
    )
    from audit.people._tokens import (
        ROLES,
        TOKEN_PREFIX,
        Principal,
        Role,
        add_token,
        authenticate,
        revoke_tokens,
        token_hash,
    )

__all__ = [
    "INBOX_LOCK",
    "KIND",
    "MAX_COMMENT_CHARS",
    "MAX_DETAIL_CHARS",
    "MAX_REASON_CHARS",
    "ROLES",
    "TOKEN_PREFIX",
    "VOTES_PER_QUERY",
    "AccessEntry",
    "Comment",
    "Decider",
    "DecisionCase",
    "Principal",
    "Recorded",
    "Role",
    "Vote",
    "VoteOutcome",
    "access_entries",
    "actors_in",
    "actors_of",
    "add_comment",
    "add_to_groups",
    "add_token",
    "authenticate",
    "cast_vote",
    "comments",
    "deciding_vote",
    "decision_case",
    "ensure_inbox_tables",
    "groups_in",
    "groups_of",
    "holds_token_or_group",
    "knows",
    "locked_pending_gate",
    "log_access",
    "members",
    "record_actor",
    "record_decision",
    "remove_from_group",
    "revoke_tokens",
    "run_comments",
    "token_hash",
    "vote_in",
    "votes",
    "votes_on",
]

if not TYPE_CHECKING:
    __getattr__ = face(
        __name__,
        __all__,
        (
            "_approvals",
            "_comments",
            "_deciding",
            "_people",
            "_schema",
            "_tokens",
        ),
    )
