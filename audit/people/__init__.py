"""The people who decide gates: people and groups, who acted on a run and
the access log (``_people``), API tokens (``_tokens``), quorum votes
(``_approvals``), a decision read and recorded in one transaction each
(``_deciding``), comments on a gate (``_comments``) and the tables they need
(``_schema``).
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
        actors_of,
        add_to_groups,
        groups_of,
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
    "groups_of",
    "knows",
    "log_access",
    "members",
    "record_actor",
    "record_decision",
    "remove_from_group",
    "revoke_tokens",
    "run_comments",
    "token_hash",
    "votes",
    "votes_on",
]

if not TYPE_CHECKING:
    __getattr__ = face(
        __name__,
        {
            "_approvals": (
                "MAX_REASON_CHARS",
                "Vote",
                "VoteOutcome",
                "deciding_vote",
                "votes",
                "votes_on",
                "VOTES_PER_QUERY",
                "cast_vote",
            ),
            "_deciding": (
                "Decider",
                "DecisionCase",
                "Recorded",
                "decision_case",
                "record_decision",
            ),
            "_comments": (
                "MAX_COMMENT_CHARS",
                "KIND",
                "Comment",
                "add_comment",
                "comments",
                "run_comments",
            ),
            "_people": (
                "MAX_DETAIL_CHARS",
                "add_to_groups",
                "remove_from_group",
                "groups_of",
                "members",
                "knows",
                "record_actor",
                "actors_of",
                "AccessEntry",
                "log_access",
                "access_entries",
            ),
            "_schema": (
                "INBOX_LOCK",
                "ensure_inbox_tables",
            ),
            "_tokens": (
                "Role",
                "ROLES",
                "TOKEN_PREFIX",
                "Principal",
                "token_hash",
                "add_token",
                "revoke_tokens",
                "authenticate",
            ),
        },
    )
