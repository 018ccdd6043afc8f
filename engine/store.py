"""The run store protocol: where the engine writes its audit trail and checkpoints.

``audit.SqlRunStore`` implements it (SQLite by default, any SQLAlchemy URL). A run
without a store pays nothing: the engine builds no events at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from engine.effect import Usage
from engine.facts import Fact, fact_to_dict
from engine.status import GateStatus

if TYPE_CHECKING:  # types only: a store's reader builds no stop or decision model
    from engine.hitl import GateDecision
    from engine.stop import StopReason

EVENT_KINDS = (
    "run_started",
    "cycle_started",
    "suggestor_executed",
    "suggestor_failed",
    "usage_recorded",
    "fact_promoted",
    "proposal_rejected",
    "invariant_violated",
    "gate_opened",
    "gate_decided",
    "gate_vote",
    "gate_escalated",
    "run_paused",
    "run_resumed",
    "stop_signal",
    "run_continued",
    "checkpoint_saved",
    "run_stopped",
    "run_requeued",
    "fact_redacted",
)
"""Every audit event kind (docs/audit.md, plus ``run_continued``, and ``gate_vote``:
one person's approval of a quorum gate, written by ``audit.people``,
``gate_escalated``: a pending gate's approvers widened, written by
``audit.notifications``, ``run_requeued``: a run its worker stopped as it was
itself stopping, put back in the queue, written by ``audit.run_queue``, and
``fact_redacted``: a fact's content erased, written by ``audit.redaction``)."""


class AuditEvent:
    """One entry of a run's audit trail, before the store numbers and chains it.

    ``kind`` is one of :data:`EVENT_KINDS`, ``cycle`` the cycle it belongs to (0 =
    before the first), ``payload`` a JSON-ready dict, ``ts`` unix time (seconds).
    A ``fact_promoted`` event carries its ``fact`` instead of a dict (the audited
    hot path): ``payload`` is then ``fact_to_dict(fact)``, built when read, and a
    store encodes it with ``engine.facts.fact_json`` (or takes ``text``, that JSON
    already computed by the engine). A ``run_started`` may carry ``fact_texts``: the
    canonical JSON of each of its ``initial_facts``, in order (a fork's, the parent's
    recorded texts), which a store may splice into the payload's JSON and keep as
    its fact chunk instead of encoding those facts again. Treat events as values.
    """

    __slots__ = ("_payload", "cycle", "fact", "fact_texts", "kind", "text", "ts")

    def __init__(
        self,
        kind: str,
        cycle: int,
        payload: dict[str, Any] | None,
        ts: float,
        fact: Fact | None = None,
        text: str | None = None,
        fact_texts: Sequence[str] | None = None,
    ) -> None:
        self.kind = kind
        self.cycle = cycle
        self._payload = payload
        self.ts = ts
        self.fact = fact
        self.text = text
        self.fact_texts = fact_texts

    @staticmethod
    def promoted(fact: Fact, ts: float) -> AuditEvent:
        """The ``fact_promoted`` event of ``fact`` (cycle from its provenance)."""
        return AuditEvent("fact_promoted", fact.provenance.cycle, None, ts, fact)

    @property
    def payload(self) -> dict[str, Any]:
        """The JSON-ready payload (for a fact event: ``fact_to_dict(fact)``)."""
        if self._payload is not None:
            return self._payload
        return fact_to_dict(self.fact) if self.fact is not None else {}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AuditEvent):
            return NotImplemented
        return (self.kind, self.cycle, self.payload, self.ts) == (
            other.kind,
            other.cycle,
            other.payload,
            other.ts,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"AuditEvent({self.kind!r}, {self.cycle}, {self.payload!r}, {self.ts!r})"


@dataclass(slots=True, eq=False)
class PromotedFacts:
    """The ``fact_promoted`` events of one stretch of a merge, as one batch item.

    Stands for one ``fact_promoted`` event per fact, in order, all at ``ts`` (unix
    seconds) in ``cycle``; ``texts[i]`` is ``engine.facts.fact_json(facts[i])``, the
    event's payload and the fact's Merkle leaf, encoded once; ``rows[i]`` the JSON of
    its checkpoint row (``engine._cycle.run.fact_row``), for a store's fact chunks. A
    store that sets ``promoted_facts_batches = True`` receives these items in its event batches and
    writes them in bulk; any other store receives :meth:`events` instead
    (:func:`expand_events`).
    """

    kind: ClassVar[str] = "fact_promoted"
    cycle: int
    ts: float
    facts: list[Fact] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    rows: list[str] = field(default_factory=list)
    commits: list[str] = field(default_factory=list)
    """(chain format 2) each fact's salted commitment, hex: its texts and rows carry
    the salt (``engine.hashing.commitment``); empty otherwise."""

    def events(self) -> list[AuditEvent]:
        """One ``fact_promoted`` :class:`AuditEvent` per fact."""
        cycle, ts = self.cycle, self.ts
        return [
            AuditEvent("fact_promoted", cycle, None, ts, f, t)
            for f, t in zip(self.facts, self.texts, strict=True)
        ]

    def __len__(self) -> int:
        return len(self.facts)

    def __repr__(self) -> str:
        return f"PromotedFacts(cycle={self.cycle}, facts={len(self.facts)})"


BatchItem = AuditEvent | PromotedFacts
"""One item of an event batch as the engine hands it to a batch-aware store."""


def expand_events(events: Sequence[BatchItem]) -> list[AuditEvent]:
    """``events`` with every :class:`PromotedFacts` replaced by its per-fact events."""
    out: list[AuditEvent] = []
    for ev in events:
        if isinstance(ev, PromotedFacts):
            out.extend(ev.events())
        else:
            out.append(ev)
    return out


@dataclass(frozen=True, slots=True)
class RunHeader:
    """What a store records when a run starts.

    ``job`` is the job's name and ``job_spec`` its parsed file (so that the CLI can
    rebuild the engine to resume it); ``suggestors`` are the registered names.
    ``queued``: recorded for another process to drive (``Engine.record_fork``): the
    row is ``queued``, with no writer, until a worker claims it.
    """

    run_id: str
    job: str | None
    job_spec: dict[str, Any] | None
    suggestors: tuple[str, ...]
    started_at: float
    parent_run_id: str | None = None
    queued: bool = False


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How a run (or one leg of it, up to a pause) ended.

    ``status`` is ``RunStatus.STOPPED`` or ``RunStatus.PAUSED``; ``facts_root`` is the sha256
    Merkle root over the facts in promotion order; ``duration_ms`` excludes pauses.
    """

    status: str
    stop_reason: StopReason
    cycles: int
    facts_count: int
    facts_root: str
    usage: Usage
    duration_ms: int
    ended_at: float


@dataclass(frozen=True, slots=True)
class GateRecord:
    """A HITL gate as stored: the proposal waiting, its state and its decision.

    ``status``: ``pending``, ``approved``, ``rejected`` or ``expired``; times are
    unix seconds; ``expires_at`` is None when the gate never times out.
    """

    gate_id: str
    run_id: str
    proposal_id: str
    proposal: dict[str, Any]
    suggestor: str
    summary: str
    cycle: int
    policy: str
    status: str = GateStatus.PENDING
    opened_at: float = 0.0
    expires_at: float | None = None
    on_timeout: str = "reject"
    decided_by: str | None = None
    decided_at: float | None = None
    reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Claim:
    """What a won claim on a run returns (``RunStore.claim_resume``).

    ``epoch`` is the run's new fencing epoch (its generation, bumped at each
    claim): the store refuses every later write of this process to the run once
    another claim has superseded it (``RunSuperseded``). ``was`` is the status
    the claim took the run from: ``paused``, ``stopped`` or ``crashed`` (left
    ``running`` by a dead writer); ``pid`` and ``hostname`` its writer then.
    """

    run_id: str
    epoch: int
    was: str
    pid: int | None = None
    hostname: str | None = None


@runtime_checkable
class RunStore(Protocol):
    """Durable runs: events in per-cycle batches, gates, checkpoints.

    Every method that writes does so in one transaction; a failure raises
    ``engine.errors.StoreError`` (the engine then stops with
    ``Error(error_category="storage")``). Event batches hold :class:`AuditEvent`
    items only, unless the store sets ``promoted_facts_batches = True``: then the
    promoted facts come as :class:`PromotedFacts` items (one per stretch of a merge).
    """

    def start_run(
        self,
        header: RunHeader,
        events: Sequence[BatchItem],
        checkpoint: dict[str, Any] | None = None,
    ) -> None:
        """Create the ``runs`` row (status ``running``) and write the first events,
        with ``checkpoint`` (cycle 0) in the same transaction when given (only
        with ``Engine(checkpoint_at_start=True)``). A run submitted to a queue has
        its row already (``queued``), taken by this process: the row becomes
        ``running``."""
        ...

    def append_events(self, run_id: str, events: Sequence[BatchItem]) -> None:
        """Append one cycle's events to the run's chain, in one transaction."""
        ...

    def finish_run(
        self,
        run_id: str,
        events: Sequence[BatchItem],
        outcome: RunOutcome,
        checkpoint: dict[str, Any] | None = None,
    ) -> None:
        """Write the last events and the outcome (and a checkpoint of a resumable stop)."""
        ...

    def pause_run(
        self,
        run_id: str,
        events: Sequence[BatchItem],
        outcome: RunOutcome,
        gate: GateRecord,
        checkpoint: dict[str, Any],
    ) -> None:
        """Write the events, the pending gate and the checkpoint; status ``paused``."""
        ...

    def get_gate(self, gate_id: str) -> GateRecord:
        """The gate (raises ``GateNotFound``)."""
        ...

    def decide_gate(self, gate_id: str, decision: GateDecision, status: str) -> GateRecord:
        """Compare-and-set ``pending`` → ``status``; raises ``GateAlreadyDecided``."""
        ...

    def claim_resume(
        self,
        run_id: str,
        expected_epoch: int | None = None,
        expected_seq: int | None = None,
        events: Sequence[BatchItem] = (),
    ) -> Claim:
        """Compare-and-set the run from paused/stopped (or crashed) to ``running``
        with a new fencing epoch.

        With ``expected_epoch`` (the ``run_epoch`` that :meth:`load_checkpoint`
        returned), the claim succeeds only if nobody claimed the run since its
        checkpoint was read; with ``expected_seq`` (its ``run_seq``, the chain's last
        seq then), only if nothing was recorded since either (a leg that was running
        then has since moved on). So the state read is the state claimed. Raises
        ``RunBusy``; ``events`` (the leg's ``run_resumed``) are appended in the
        claim's own transaction.
        (another process holds or claimed it first), ``RunFinished`` (a stop that
        leaves nothing to do) or ``RunNotFound``.
        """
        ...

    def release_claim(self, claim: Claim) -> None:
        """Give back a claim whose resume could not start (its status, writer as
        before; the epoch stays bumped). A superseded claim changes nothing."""
        ...

    def load_checkpoint(self, run_id: str) -> dict[str, Any]:
        """The latest checkpoint of the run, with ``run_epoch``, ``run_seq`` and
        ``run_status``: the run's fencing epoch, last seq and status when it was read.

        Raises ``ResumeError`` when missing, ``RunFinished`` when the run finished
        with nothing left to do."""
        ...

    def get_run_header(self, run_id: str) -> RunHeader:
        """The header the run was started with (raises ``RunNotFound``)."""
        ...


@dataclass(frozen=True, slots=True)
class RunHistory:
    """A recorded run up to one of its cycles: what a fork starts from.

    ``cycle``: the cycle asked for; ``cycles``: the cycles the run recorded in all;
    ``status``: its ``runs`` status; ``started``: its ``run_started`` payload;
    ``facts``: the facts promoted up to and including ``cycle`` (the initial ones
    first), as ``engine.facts.fact_to_dict`` dicts in promotion order, and
    ``texts[i]`` the canonical JSON of ``facts[i]`` as chained (its Merkle leaf's
    data); ``events``: the run's other events of cycles 1..``cycle`` (cycle
    starts, executions, failures, usage), in ``seq`` order; ``head``: ``(seq,
    chain_hash)`` of the run's last event of cycles up to ``cycle``, its chain
    verified up to there by the store (None from a store that does not verify).
    """

    run_id: str
    cycle: int
    cycles: int
    status: str
    started: dict[str, Any]
    facts: list[dict[str, Any]]
    texts: list[str]
    events: list[AuditEvent]
    head: tuple[int, str] | None = None


@runtime_checkable
class RunHistoryStore(Protocol):
    """A store that can rebuild a run's state at one of its cycles (``Engine.fork``)."""

    def run_history(self, run_id: str, until_cycle: int) -> RunHistory:
        """The run as recorded up to ``until_cycle`` (see :class:`RunHistory`).

        Raises ``RunNotFound``; ``ResumeError`` when the events of those cycles are
        not all there (a cycle the run never reached, a gap in its chain);
        ``UnverifiedParent`` when a store that verifies finds the run's chain (or
        the chain a fork's cycles come from) altered up to there.
        """
        ...
