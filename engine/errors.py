"""Every exception of converge in one module: the errors, in one hierarchy under
:class:`ConvergeError`, and the control-flow signals apart from them.

Catch the family (``ConvergeError``) or one case. A run itself never raises for a
failing suggestor: it stops with a typed ``StopReason`` instead. The signals
(:class:`StopRun`, :class:`ToolBudgetHit`) are not errors: they unwind code on
purpose and derive from ``BaseException``, so that ``except Exception:`` in a
suggestor, a tool or a library between the raise and its catcher cannot swallow
them (as ``KeyboardInterrupt``). The application's own errors (job files, tokens,
the web, workers, replay) live in ``converge.errors``, in the same hierarchy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.stop import InvocationBudgetExhausted

__all__ = [
    "AmbiguousGateId",
    "AmbiguousRunId",
    "AuditKeyError",
    "BundleError",
    "ChainError",
    "CheckpointError",
    "ConfigurationError",
    "ConvergeError",
    "CorruptRow",
    "DuplicateVote",
    "ExecutorUnavailable",
    "ExportError",
    "FactNotFound",
    "ForkError",
    "GateAlreadyDecided",
    "GateExpired",
    "GateNotFound",
    "ImportReferenceError",
    "InvalidRunId",
    "LedgerForked",
    "NotFound",
    "ParentMissing",
    "PruneError",
    "RedactionError",
    "ResumeError",
    "RunBusy",
    "RunFinished",
    "RunNotFound",
    "RunSuperseded",
    "SchemaVersionError",
    "SigningKeyError",
    "StopRun",
    "StoreError",
    "TamperedRow",
    "ToolBudgetHit",
    "UnverifiedParent",
    "WitnessRefused",
]


class ConvergeError(Exception):
    """Base class of every error raised by converge."""


# --- control-flow signals ------------------------------------------------------
# BaseException, so that no `except Exception` between the raise and its one catcher
# (the engine's collection for StopRun, the agent call for ToolBudgetHit) swallows it.


class StopRun(BaseException):
    """Raise inside a suggestor to stop the run on purpose → ``StopRequested``.

    ``context`` is attached to the stop reason for diagnosis (JSON-serialisable).
    A ``BaseException``: a suggestor's own ``except Exception:`` does not catch it.
    """

    def __init__(self, message: str, *, context: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.context: dict[str, Any] = dict(context or {})


class ToolBudgetHit(BaseException):
    """Raised inside the agent run before a tool call past its limit (never escapes
    :func:`converge.agents.call_agent`, which returns ``reason`` as its signal).
    A ``BaseException``: pydantic-ai's and the tools' ``except Exception`` let it through."""

    def __init__(self, reason: InvocationBudgetExhausted) -> None:
        super().__init__(str(reason))
        self.reason = reason


# --- configuration -------------------------------------------------------------


class ConfigurationError(ConvergeError):
    """The engine or a job was configured wrongly (duplicate names, bad budget...)."""


class ImportReferenceError(ConfigurationError):
    """A ``module:attribute`` reference in a job file cannot be imported."""


class InvalidRunId(ConfigurationError, ValueError):
    """A run id given to converge is not one (``engine.run_ids``): ``field`` names
    where it was given (``run_id``, ``--run``...), ``value`` is what was given."""

    def __init__(self, message: str, *, field: str, value: object) -> None:
        super().__init__(message)
        self.field = field
        self.value = value


# --- runs and gates not found ---------------------------------------------------


class NotFound(ConvergeError):
    """Base of what was asked for by an id that names nothing known."""


class RunNotFound(NotFound):
    """No run with that id is known (to this engine or its store)."""


class AmbiguousRunId(RunNotFound):
    """A run id prefix that starts the ids of several runs; ``candidates`` holds
    them, sorted (at most :data:`audit.queries.CANDIDATES`)."""

    def __init__(self, message: str, candidates: Sequence[str]) -> None:
        super().__init__(message)
        self.candidates = tuple(candidates)


class GateNotFound(NotFound):
    """No gate with that id exists."""


class AmbiguousGateId(GateNotFound):
    """A gate id prefix (or a run's id) that names several gates; ``candidates``
    holds them (at most :data:`audit.queries.CANDIDATES`)."""

    def __init__(self, message: str, candidates: Sequence[str]) -> None:
        super().__init__(message)
        self.candidates = tuple(candidates)


# --- resume ------------------------------------------------------------------------


class ResumeError(ConvergeError):
    """A run cannot be resumed (unknown run, other suggestors, corrupted checkpoint)."""


class GateAlreadyDecided(ResumeError):
    """The gate was decided before; carries who decided it, when and how."""

    def __init__(
        self, gate_id: str, status: str, by: str | None = None, at: str | None = None
    ) -> None:
        self.gate_id = gate_id
        self.status = status
        self.by = by
        self.at = at
        who = f" by {by}" if by else ""
        when = f" at {at}" if at else ""
        super().__init__(f"gate {gate_id} was already decided ({status}{who}{when})")


class GateExpired(ResumeError):
    """The gate's ``timeout_s`` passed; it was decided by its ``on_timeout`` policy."""


class RunBusy(ResumeError):
    """Another process is resuming this run right now, or claimed it first."""


class RunFinished(ResumeError):
    """The run already finished with a stop that leaves nothing to continue
    (success, validation, error or human intervention): it is not claimable."""


class ForkError(ConvergeError):
    """A run cannot be forked at the cycle asked: no store or one that cannot read a
    run's history, an unknown run, a cycle it never reached, events missing."""


class UnverifiedParent(ForkError):
    """The run to fork (or replay) does not verify up to the fork point: its hash
    chain fails at ``first_bad_seq`` for ``reason`` (``payload changed``, ``row
    missing``...), so nothing is taken from it and nothing is recorded. ``run_id``
    names the run whose chain fails (a fork's parent, or that parent's parent)."""

    def __init__(self, run_id: str, first_bad_seq: int | None, reason: str | None) -> None:
        self.run_id = run_id
        self.first_bad_seq = first_bad_seq
        self.reason = reason
        super().__init__(
            f"run {run_id} does not verify: seq {first_bad_seq}: {reason}; refusing to "
            f"take its state (`converge verify {run_id}`)"
        )


class ParentMissing(ResumeError):
    """A fork's facts up to its fork point are its parent's, referred to (not
    copied): the parent ``parent`` of fork ``run_id`` is no longer in the store, so
    they cannot be read (to resume, fork again, show, diff or export the fork). The
    fork's own chain still verifies alone; a proof bundle exported before the parent
    was deleted carries those facts and verifies standalone. ``pruned`` says who
    pruned the parent, when and why (None: it was deleted otherwise)."""

    def __init__(self, run_id: str, parent: str, pruned: str | None = None) -> None:
        self.run_id = run_id
        self.parent = parent
        self.pruned = pruned
        """``pruned by NAME at T: REASON`` when ``converge prune`` removed the parent."""
        gone = "which is not in the store" if pruned is None else f"which was {pruned}"
        super().__init__(
            f"run {run_id} is a fork of run {parent}, {gone}: the facts it took from it "
            "cannot be read (its own chain still verifies)"
        )


# --- storage -------------------------------------------------------------------


class StoreError(ConvergeError):
    """The audit store cannot be opened, read or written."""


class RunSuperseded(StoreError):
    """This process's claim on a run was superseded by a later claim (a higher
    fencing epoch): its writes to that run are refused, nothing is written."""


class SchemaVersionError(StoreError):
    """The database holds another or a newer schema than this version understands."""


class ChainError(StoreError):
    """An audit chain does not verify (tampering or corruption)."""


class TamperedRow(ChainError):
    """A stored row differs from what its run's hash chain recorded (a cell edited
    outside converge): ``run_id`` and ``column`` name it, and nothing is read from
    it (a resume refuses the run; ``converge verify RUN`` reports it)."""

    def __init__(self, run_id: str, column: str, detail: str = "") -> None:
        self.run_id = run_id
        self.column = column
        more = f" ({detail})" if detail else ""
        super().__init__(
            f"run {run_id}: {column} differs from the run's audit chain{more}; refusing "
            f"to use it (`converge verify {run_id}` reports it)"
        )


class CorruptRow(StoreError):
    """A stored cell cannot be read (not JSON, not of its column's type, not the
    shape its readers expect): ``table``, ``row`` (the row's key) and ``column``
    name it."""

    def __init__(self, table: str, row: str, column: str, why: str) -> None:
        self.table = table
        self.row = row
        self.column = column
        self.why = why
        super().__init__(f"{row}: cannot read {table}.{column}: {why}")


class AuditKeyError(StoreError):
    """The store is keyed and this process's ``CONVERGE_AUDIT_KEY`` is missing or is
    not its key: the write was refused before anything was recorded.

    ``problem`` is :data:`audit.trail._store_key.KEY_REQUIRED` or
    :data:`audit.trail._store_key.WRONG_KEY`.
    """

    def __init__(self, message: str, problem: str) -> None:
        super().__init__(message)
        self.problem = problem


# --- executors -----------------------------------------------------------------


class ExecutorUnavailable(ConvergeError):
    """An executor cannot dispatch a cycle's executions or read their results
    (broker or result backend unreachable) → ``Error(error_category="external")``."""


# --- the audit's proofs, keys, bundles and votes -------------------------------


class ExportError(ConvergeError):
    """The run cannot be exported: not stopped yet, its chain does not verify, an
    unknown fact id."""


class RedactionError(ConvergeError):
    """A fact cannot be redacted: its run is not stopped or paused, the run's chain
    format commits to its content (format 1), or it was redacted already."""


class FactNotFound(NotFound):
    """No fact of that id in the run (``fact_id`` names it)."""

    def __init__(self, message: str, fact_id: str = "") -> None:
        super().__init__(message)
        self.fact_id = fact_id


class PruneError(ConvergeError):
    """Runs cannot be pruned as asked: no date or retention given, an archive without
    a signing key, an archive folder that cannot be written."""


class LedgerForked(ConvergeError):
    """The ledger's tree no longer has the root a head signed earlier says it had."""


class SigningKeyError(ConvergeError):
    """A key file is missing, unreadable, not an Ed25519 key, or would be overwritten."""


class BundleError(ConvergeError):
    """The file is not a proof bundle (not JSON, another format)."""


class CheckpointError(ConvergeError):
    """A checkpoint, verifier key or proof file (C2SP signed-note, tlog-checkpoint,
    tlog-cosignature) that is not one, or whose signature does not verify."""


class WitnessRefused(CheckpointError):
    """A witness does not cosign: the checkpoint is not signed by the log's key, is of
    another log, or is not consistent with the last checkpoint it cosigned."""


class DuplicateVote(ConvergeError):
    """This person already approved or rejected this gate: a quorum needs distinct people."""

    def __init__(self, gate_id: str, voter: str) -> None:
        self.gate_id = gate_id
        self.voter = voter
        super().__init__(f"{voter} already voted on gate {gate_id}; another person must approve")
