"""The license reviewer: an LLM agent that reads the license files a package ships.

For each package whose metadata gives no license (a ``license.unknown`` fact), the
audit reads the license file(s) the distribution ships (``importlib.metadata``
files named LICENSE, LICENCE, COPYING, NOTICE, UNLICENSE, COPYRIGHT...; for a
vendored component, those in its ``path``) into ``license.file`` facts, and the
``license_reviewer`` agent proposes a ``license`` {name, spdx, confidence, source:
"reviewer"} whose parents are those files. Its proposal is promoted at once only
when its ``spdx`` is a known SPDX license expression (ids of the SPDX license
list, license-expression's parser: :func:`spdx.known_expression`) and its
confidence is at least :data:`THRESHOLD`. Otherwise a HITL gate asks a human
(approve: the reviewer's answer stands; approve with ``--value SPDX`` or reject
with ``--reason SPDX``: the human's classification, through :func:`spdx_value`
and :func:`reviewer_decisions`). An answer that is no known SPDX license
expression (:func:`not_spdx`: ``NOASSERTION``, the reviewer's "I don't know";
any ``LicenseRef-*``; an id the list lacks; text that is no expression) waits at
that gate whatever its confidence, the model's text in the gate's summary;
approved as it is, ``NOASSERTION`` or a ``LicenseRef-*`` classifies the package,
anything else classifies nothing (:class:`AllReviewed`).

With no reviewer (the job file's agent left out for want of a model: the run has
no ``license_reviewer``) or no license file to read, a ``license.unknown`` goes
to the human gate as in ``job.yaml`` (:data:`needs_human`). Job file:
``reviewed.yaml``; from Python: :func:`reviewed_audit`.

========================  ========================  ======================================
suggestor                 reads                     proposes
========================  ========================  ======================================
``license_files``         ``license.unknown``       ``license.file`` {name, path, sha256,
                                                    text} per file found
``license_reviewer``      ``license.file``          ``license`` (one agent run per package)
``reviewer_decisions``    ``hitl.rejected``         ``license`` {source: human} for a
                                                    rejected review with an SPDX reason
========================  ========================  ======================================
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, Literal

from pydantic import BaseModel, Field

from engine import Blocked, Context, CriterionResult, Fact, Met, Proposal, Unmet, suggestor
from examples.dependency_audit import graph as g
from examples.dependency_audit.distributions import installed_distributions, normalise_name
from examples.dependency_audit.rules import risks_assessed, spdx_value
from examples.dependency_audit.spdx import canonical, from_human, known_expression
from examples.dependency_audit.suggestors import (
    VENDORED,
    DistributionSource,
    audit_suggestors,
)

FILE = "license.file"
REVIEWER = "license_reviewer"
THRESHOLD = 0.8
"""A review with a confidence below this asks a human."""
REVIEW_SUMMARY = "Review: {content[name]} is {content[spdx]}? (confidence {confidence})"
"""The summary of the review gate (:func:`uncertain`)."""
NOT_SPDX_SUMMARY = (
    "Review: the reviewer answered {content[spdx]!r} for {content[name]}, which is no known "
    "SPDX license expression (confidence {confidence}): approve --value SPDX or reject "
    "--reason SPDX"
)
"""The summary of the gate on an answer that is no known SPDX license expression
(:func:`not_spdx`)."""
NOT_SPDX_GATE = "review:not-spdx"
"""The name of that gate's policy (the review gate keeps the default name)."""
NOASSERTION = "NOASSERTION"
"""SPDX's "no license recognised": a valid answer of the reviewer, though no expression."""
MODEL_ENV = "CONVERGE_MODEL"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
"""The directory holding the ``examples`` package: a vendored component's relative
``path`` not found in the working directory is looked up here."""
MAX_TEXT_CHARS = 20_000
"""Longer license files are cut to this many characters in the ``license.file`` fact."""

LICENSE_FILE = re.compile(r"^(LICEN[CS]E|COPYING|NOTICE|UNLICEN[CS]E|COPYRIGHT)([-._].*)?$", re.I)

INSTRUCTIONS = (
    "You review software licenses. You are given the license file(s) one package "
    "ships. Answer with the package name, the SPDX identifier of its license (an "
    "SPDX expression such as 'MIT' or 'Apache-2.0 OR MIT'; 'NOASSERTION' when the "
    "text is no license you recognise) and your confidence between 0 and 1."
)


class LicenseVerdict(BaseModel):
    """The reviewer's answer for one package (the content of its ``license`` proposal)."""

    name: str = Field(description="the package name, as given")
    spdx: str = Field(
        description="SPDX license expression, or NOASSERTION",
        # also what the offline TestModel (`model: test`) answers: the first example
        examples=["MIT", "Apache-2.0", "BSD-3-Clause", "GPL-3.0-or-later OR MIT", "NOASSERTION"],
    )
    confidence: float = Field(ge=0, le=1, description="0..1")
    source: Literal["reviewer"] = "reviewer"


# -- the files -------------------------------------------------------------------------------
def license_files(name: str, ctx: Context) -> list[Path]:
    """The license files of package ``name``: those in a vendored component's
    ``path`` (see :func:`vendored_folder`), else those its installed distribution
    lists (``importlib.metadata``), sorted."""
    vendored = vendored_fact(name, ctx)
    if vendored is not None:
        folder = vendored_folder(vendored.content.get("path"))
        if folder is None:
            return []
        return sorted(p for p in folder.iterdir() if p.is_file() and _is_license(p))
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return []
    found = [Path(str(dist.locate_file(f))) for f in dist.files or () if _is_license(PurePath(f))]
    return sorted(p for p in found if p.is_file())


def vendored_fact(name: str, ctx: Context) -> Fact | None:
    """The ``vendored`` input fact of package ``name``, if it is a vendored component."""
    for fact in ctx.get(VENDORED):
        c = fact.content
        if isinstance(c, dict) and normalise_name(str(c.get("name", ""))) == name:
            return fact
    return None


def vendored_folder(path: Any) -> Path | None:
    """The folder of a vendored component's ``path``: absolute, or relative to the
    working directory, else to :data:`PROJECT_ROOT` (where ``reviewed.yaml``'s
    ``examples/dependency_audit/vendor/...`` is), so the job runs the same from
    any directory. None when there is no such folder."""
    if not isinstance(path, str) or not path:
        return None
    for folder in (Path(path), PROJECT_ROOT / path):
        if folder.is_dir():
            return folder
    return None


def _is_license(path: PurePath) -> bool:
    return LICENSE_FILE.match(path.name) is not None


@suggestor(name="license_files", dependencies=[g.UNKNOWN])
def license_files_suggestor(ctx: Context) -> list[Proposal]:
    """One ``license.file`` {name, path, sha256, text} per license file of each
    ``license.unknown`` package; its parents are the unknown fact (and the
    ``vendored`` fact that gave the component's path)."""
    out: list[Proposal] = []
    for fact in ctx.get(g.UNKNOWN):
        name = fact.content["name"]
        vendored = vendored_fact(name, ctx)
        parents = (fact.id,) if vendored is None else (fact.id, vendored.id)
        for path in license_files(name, ctx):
            data = path.read_bytes()
            content = {
                "name": name,
                "path": str(path),
                "sha256": hashlib.sha256(data).hexdigest(),
                "text": data.decode("utf-8", errors="replace")[:MAX_TEXT_CHARS],
            }
            out.append(Proposal(FILE, content, parents=parents))
    return out


# -- who decides -------------------------------------------------------------------------------
@dataclass
class NeedsHuman:
    """The ``when`` of the gate on ``license.unknown``: a human classifies a package
    when no reviewer is configured or the package ships no license file to read.
    ``reviewer`` None means: configured when the run has the ``license_reviewer``
    agent (a job file's agent with no model is left out of the run, in every leg of
    it, whatever a later leg's environment: ``ctx.suggestors``), or, outside a run,
    when ``$CONVERGE_MODEL`` is set."""

    reviewer: bool | None = None

    def reviewer_configured(self, ctx: Context | None = None) -> bool:
        """Whether the license reviewer runs (in ``ctx``'s run)."""
        if self.reviewer is not None:
            return self.reviewer
        if ctx is not None and ctx.suggestors:
            return REVIEWER in ctx.suggestors
        return bool(os.environ.get(MODEL_ENV, "").strip())

    def __call__(self, proposal: Proposal, ctx: Context) -> bool:
        if not self.reviewer_configured(ctx):
            return True
        return not license_files(proposal.content["name"], ctx)


needs_human = NeedsHuman()


def is_spdx_answer(spdx: Any) -> bool:
    """True when a reviewer's ``spdx`` is an SPDX expression (parsed by
    license-expression, see :func:`spdx.canonical`: ``LicenseRef-*`` too) or
    ``NOASSERTION``: once a human approved it as it is, it classifies the package."""
    return isinstance(spdx, str) and (spdx.strip() == NOASSERTION or canonical(spdx) is not None)


def not_spdx(proposal: Proposal, ctx: Context) -> bool:
    """The ``when`` of the gate on a reviewer's ``license`` whose ``spdx`` is no known
    SPDX license expression (:func:`spdx.known_expression`): ``NOASSERTION`` (the
    reviewer does not know), ``LicenseRef-*``, ``legacy-left-pad/license.file``,
    ``:{``. It waits for a human whatever its confidence: "I don't know" and "a
    license of its own" are what the gate is for."""
    content = proposal.content
    return not (isinstance(content, dict) and known_expression(content.get("spdx")) is not None)


def uncertain(proposal: Proposal, ctx: Context) -> bool:
    """The ``when`` of the review gate on the reviewer's ``license``: confidence
    below :data:`THRESHOLD`, or an answer that is no known SPDX license expression
    (:func:`not_spdx`; list its gate first for its summary)."""
    return proposal.confidence < THRESHOLD or not_spdx(proposal, ctx)


@suggestor(name="reviewer_decisions", dependencies=[g.REJECTED])
def reviewer_decisions(ctx: Context) -> list[Proposal]:
    """A rejected review whose reason is an SPDX id (or text the table maps) becomes
    a ``license`` fact with source ``"human"``; other reasons classify nothing."""
    out: list[Proposal] = []
    for fact in ctx.get(g.REJECTED):
        c = fact.content
        review = c.get("content")
        if c.get("key") != g.LICENSE or not isinstance(review, dict):
            continue
        if review.get("source") != "reviewer":
            continue
        spdx = from_human(c.get("reason"))
        if spdx is not None:
            content = {"name": review["name"], "spdx": spdx, "source": "human"}
            out.append(Proposal(g.LICENSE, content, parents=(fact.id,)))
    return out


@dataclass
class AllReviewed:
    """Met when every package has a ``license`` fact, or a ``license.unknown`` that
    went to a human (see :data:`needs_human`) and was approved. A package the
    reviewer has yet to answer, whose review a human rejected with no SPDX
    reason, or whose license is a reviewer's answer that is no SPDX expression
    (approved as it was), is unmet."""

    id: str = "all_reviewed"
    required: bool = True
    needs_human: NeedsHuman = field(default_factory=NeedsHuman)

    def evaluate(self, ctx: Context) -> CriterionResult:
        """Met, Unmet naming a package left, or Blocked on a human."""
        pkgs = g.packages(ctx)
        if not pkgs:
            return Unmet("no package in the inventory")
        lic = g.licenses(ctx)
        unknown = {f.content["name"]: f for f in ctx.get(g.UNKNOWN)}
        left: list[str] = []
        for name in sorted(pkgs):
            if name in lic and not _unclassified_review(lic[name]):
                continue
            fact = unknown.get(name)
            if fact is not None and self.needs_human(Proposal(fact.key, fact.content), ctx):
                continue  # promoted only once a human approved it
            left.append(name)
        if not left:
            return Met()
        for name in left:
            if name in lic:
                return Unmet(
                    f"{name}: the reviewer's answer {lic[name].content.get('spdx')!r} is no "
                    "SPDX expression; a human classifies it (approve --value SPDX or reject "
                    "--reason SPDX)"
                )
        for fact in ctx.get(g.REJECTED):
            review = fact.content.get("content")
            if isinstance(review, dict) and review.get("name") in left:
                return Unmet(
                    f"{review['name']}: review rejected by {fact.content.get('by')} with "
                    f"reason {fact.content.get('reason')!r}, which is no SPDX license"
                )
        if any(name not in unknown for name in left):
            return Unmet(f"{len(left)} package(s) unclassified: {', '.join(left[:5])}")
        return Blocked(
            f"{len(left)} package(s) await the license reviewer: {', '.join(left[:5])}",
            approval_ref=f"{g.UNKNOWN}:{left[0]}",
        )


def _unclassified_review(fact: Fact) -> bool:
    """True for a reviewer's ``license`` whose ``spdx`` is no SPDX expression."""
    content = fact.content
    return content.get("source") == "reviewer" and not is_spdx_answer(content.get("spdx"))


all_reviewed = AllReviewed(needs_human=needs_human)


# -- the whole job from Python -------------------------------------------------------------------
@dataclass
class ReviewedAudit:
    """Everything :class:`engine.Engine` needs for the reviewed audit."""

    suggestors: list[Any]
    gates: list[Any]
    criteria: list[Any]


def reviewed_audit(
    reviewer: Any | None,
    *,
    source: DistributionSource = installed_distributions,
    price: tuple[float, float] | None = None,
    extra_gates: Iterable[Any] = (),
) -> ReviewedAudit:
    """The audit of ``suggestors.audit_suggestors(source)`` with the license reviewer.

    ``reviewer`` is a ``pydantic_ai.Agent`` whose output is :class:`LicenseVerdict`
    (see :func:`reviewer_agent`), or None for the audit as ``job.yaml`` runs it
    (unknowns go to the human gate).
    """
    from gates.hitl import require_approval

    decide = NeedsHuman(reviewer=reviewer is not None)
    suggestors: list[Any] = [*audit_suggestors(source), license_files_suggestor, reviewer_decisions]
    if reviewer is not None:
        from converge.agents import agent_suggestor

        suggestors.append(
            agent_suggestor(
                reviewer, name=REVIEWER, reads=[FILE], writes=g.LICENSE, price=price, per="name"
            )
        )
    gates = [
        require_approval(
            keys=[g.UNKNOWN],
            when=decide,
            summary="Classify the license of {content[name]} {content[version]}",
        ),
        # the reviewer's answer waits for a person when it is no SPDX expression, or
        # when the reviewer is unsure; the person's answer must be SPDX
        *(
            require_approval(
                keys=[g.LICENSE],
                suggestors=[REVIEWER],
                when=when,
                summary=summary,
                name=name,
                validate_value=spdx_value,
            )
            for when, summary, name in (
                (not_spdx, NOT_SPDX_SUMMARY, NOT_SPDX_GATE),
                (uncertain, REVIEW_SUMMARY, None),
            )
        ),
        *extra_gates,
    ]
    return ReviewedAudit(suggestors, gates, [AllReviewed(needs_human=decide), risks_assessed])


def reviewer_agent(model: Any) -> Any:
    """The reviewer as a ``pydantic_ai.Agent`` on ``model`` (a model or model string)."""
    from pydantic_ai import Agent

    agent: Any = Agent(model, instructions=INSTRUCTIONS, output_type=LicenseVerdict)
    return agent
