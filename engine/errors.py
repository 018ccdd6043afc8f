"""Every error converge raises, in one hierarchy under :class:`ConvergeError`.

Catch the family (``ConvergeError``) or one case. A run itself never raises for a
failing suggestor: it stops with a typed ``StopReason`` instead.
"""

from __future__ import annotations


class ConvergeError(Exception):
    """Base class of every error raised by converge."""


# --- configuration -------------------------------------------------------------


class ConfigurationError(ConvergeError):
    """The engine or a job was configured wrongly (duplicate names, bad budget...)."""


class JobFileError(ConfigurationError):
    """A job file is malformed; the message names the file, the line and the field."""

    def __init__(self, message: str, *, path: str = "", line: int | None = None) -> None:
        self.path = path
        self.line = line
        where = path + (f":{line}" if line is not None else "")
        super().__init__(f"{where}: {message}" if where else message)


class ImportReferenceError(ConfigurationError):
    """A ``module:attribute`` reference in a job file cannot be imported."""


# --- runs, gates and resume ----------------------------------------------------


class RunNotFound(ConvergeError):
    """No run with that id is known (to this engine or its store)."""


class ResumeError(ConvergeError):
    """A run cannot be resumed (unknown run, other suggestors, corrupted checkpoint)."""


class GateNotFound(ResumeError):
    """No gate with that id exists."""


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


# --- executors -----------------------------------------------------------------


class ExecutorUnavailable(ConvergeError):
    """An executor cannot dispatch a cycle's executions or read their results
    (broker or result backend unreachable) → ``Error(error_category="external")``."""
