"""The application's errors: job files, people and tokens, the web, workers, replay and
notifications, in the one hierarchy under :class:`engine.errors.ConvergeError`.

The engine's and the audit store's errors live in :mod:`engine.errors`; these are
raised by ``converge`` alone. Each error a web route may answer carries its HTTP
status on the class (``http_status``, as DBOS's errors carry theirs), so that the
routes map an error to its answer without a table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from engine.errors import ConfigurationError, ConvergeError

__all__ = [
    "ApplicationError",
    "BadToken",
    "InvalidValue",
    "JobFileError",
    "LoginRequired",
    "MissingReason",
    "ModelChanged",
    "ModelServerDied",
    "NotAllowed",
    "NotRecorded",
    "NotSent",
    "RemoteSuggestorError",
    "ReplayError",
    "ReplayedSuggestorError",
    "SignatureRefused",
    "TapeMissing",
    "TokenRequired",
    "TooManyStreams",
    "UnknownPerson",
]


class ApplicationError(ConvergeError):
    """Base of the application's errors; ``http_status`` is what the web API answers
    (400 unless a subclass says otherwise)."""

    http_status: ClassVar[int] = 400


# --- job files -------------------------------------------------------------------


class JobFileError(ConfigurationError):
    """A job file is malformed; the message names the file, the line and the field.

    A file with several errors is one error holding them all: ``problems`` is each
    (itself first, then ``more``), and its text is one line per problem, each with
    its own file and line (``job.yaml:3: budgit: unknown key ...``).
    """

    def __init__(
        self,
        message: str,
        *,
        path: str = "",
        line: int | None = None,
        more: Sequence[JobFileError] = (),
    ) -> None:
        self.path = path
        self.line = line
        self.detail = message
        where = path + (f":{line}" if line is not None else "")
        self.located = f"{where}: {message}" if where else message
        self.problems: tuple[JobFileError, ...] = (
            self,
            *(p for other in more for p in other.problems),
        )
        super().__init__("\n".join(p.located for p in self.problems))

    @classmethod
    def of(cls, problems: Sequence[JobFileError]) -> JobFileError:
        """One error holding every one of ``problems`` (at least one; each with the
        problems it holds), in order."""
        first, *rest = [p for error in problems for p in error.problems]
        return cls(first.detail, path=first.path, line=first.line, more=rest)


# --- decisions, people and tokens ------------------------------------------------


class InvalidValue(ApplicationError):
    """The value given with an approval is refused by the gate policy's hook."""

    http_status = 422


class NotAllowed(ApplicationError):
    """This person may not decide (or see) this gate: not an approver, the run's own
    submitter under four eyes, or a decision without a required reason."""

    http_status = 403


class MissingReason(ApplicationError):
    """The gate requires a reason for this decision (``reason_required``) and none was given."""

    http_status = 422


class UnknownPerson(NotAllowed):
    """The decision names nobody the store knows (once anyone is registered)."""


class TokenRequired(NotAllowed):
    """The store requires the decider's token for command-line decisions (``require-token``)."""


class BadToken(NotAllowed):
    """The token given is unknown, expired or revoked, a viewer's, or another person's."""


class SignatureRefused(NotAllowed):
    """A signed decision that cannot be recorded: no registered key, another key, a
    statement that is not this decision, or a signature that does not verify."""


# --- the web -----------------------------------------------------------------------


class LoginRequired(ApplicationError):
    """A page was asked for without a session: the app redirects to ``/login``."""

    http_status = 401


# --- workers -----------------------------------------------------------------------


# Not a ConvergeError: it stands for the suggestor's own exception (a ValueError on
# the worker), which converge does not raise and an ``except ConvergeError`` must
# not take for one of its own, as with the same exception raised in-process.
class RemoteSuggestorError(Exception):
    """Base of the exceptions rebuilt from a worker's reply.

    Each is a subclass named like the exception raised on the worker (``ValueError``
    → a ``ValueError`` subclass of this), so the stop message reads exactly as
    in-process: ``"name: ValueError: message"``. ``traceback_text`` is the
    worker's own traceback (recorded in the ``suggestor_failed`` event). The
    subclasses are made in :mod:`converge.workers.wire`.
    """

    traceback_text: str = ""


# --- agents and replay -------------------------------------------------------------


class TapeMissing(ApplicationError):
    """An agent asked its model more than the recording holds: replay cannot answer
    it without calling the model."""


class ReplayError(ApplicationError):
    """A run cannot be replayed: no job to run (none recorded, none given), a fork
    (its state at the fork point comes from its parent), or a recording that does
    not verify (its first bad seq named)."""


class NotRecorded(ApplicationError):
    """Replay needs an output the recorded run did not keep (a suggestor marked
    non-deterministic after the run, a store written before outputs were recorded)."""


# Not a ConvergeError, as RemoteSuggestorError: it replays a suggestor's own failure.
class ReplayedSuggestorError(Exception):
    """Base of the exceptions ``converge replay`` raises for a failure a run recorded:
    each is a subclass named like the recorded exception (``"ValueError: bad"`` → a
    ``ValueError`` subclass of this), so the replayed failure reads as the recorded
    one. The subclasses are made in :mod:`converge.timetravel._recorded`."""


# --- the local model server ------------------------------------------------------


class ModelChanged(ApplicationError, ConfigurationError):
    """A run would go on with another model than it recorded when it started, and
    the command did not ask for it (``--model NAME``, ``--allow-model-change``):
    ``recorded`` and ``asked`` name both (:mod:`converge.jobs.models`)."""

    http_status = 409

    def __init__(self, message: str, *, recorded: str, asked: str) -> None:
        self.recorded = recorded
        self.asked = asked
        super().__init__(message)


class ModelServerDied(ApplicationError):
    """The model server ``converge model serve`` supervises exited while it was
    wanted: ``why`` is ``"killed by SIGSEGV"`` or ``"exited with code N"``,
    ``log_path`` the file its output went to, ``tail`` its last lines;
    ``command_code``: the exit code of the command after ``--`` when it ended by
    itself once the server was gone (None: there was none, or it was stopped)."""

    def __init__(
        self,
        why: str,
        log_path: str,
        tail: list[str],
        *,
        note: str = "",
        command_code: int | None = None,
    ) -> None:
        self.why = why
        self.log_path = log_path
        self.tail = list(tail)
        self.command_code = command_code
        text = f"model server died: {why}{note} (its log: {log_path})"
        if self.tail:
            text += "; its last lines:\n" + "\n".join(f"  {line}" for line in self.tail)
        super().__init__(text)


# --- notifications -----------------------------------------------------------------


class NotSent(ApplicationError):
    """A notification that cannot be sent as configured (retrying will not help)."""


# --- the web's event streams ---------------------------------------------------------


class TooManyStreams(ApplicationError):
    """One more event stream would pass a server's caps: ``status`` 429 (the token's
    cap, :attr:`converge.web.feeds.StreamCaps.per_token`) or 503 (the server's,
    ``total``); ``retry_after_s`` (seconds) is the ``Retry-After`` the answer carries."""

    http_status: ClassVar[int] = 429

    def __init__(self, status: int, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s
