"""Job files: a run described in YAML, validated by pydantic.

::

    name: dependency-audit
    suggestors: [examples.dependency_audit:inventory, examples.dependency_audit:licenses]
    budget: {max_cycles: 20, max_seconds: 120}
    criteria: [examples.dependency_audit:all_classified]
    invariants: [examples.dependency_audit:no_forbidden_license]
    gates: [{hitl: {keys: [license.unknown], summary: "Classify {content[name]}"}}]
    stop_conditions: [{type: loop_detection, window: 4}]
    initial: {scope: [converge]}
    report: [{key: license, columns: [name, spdx, source], title: Licenses}]
    agents: [{name: reviewer, model: test, reads: [license.file], writes: license}]
    executor: {celery: {broker: "amqp://guest:guest@host:5672//", backend: "redis://host:6379/0"}}

References are ``module:attribute``; the attribute may be an object, a list of
objects, or a class / factory called with no arguments. Every error is a
:class:`JobFileError` naming the file, the line and the field.

The modules: :mod:`~converge.jobs.spec` (the pydantic models of the format),
:mod:`~converge.jobs.source` (the YAML text, read safely, with its lines),
:mod:`~converge.jobs.loading` (:func:`load_job`, :func:`parse_job`),
:mod:`~converge.jobs.job` (:class:`Job`, which builds the engine) and
:mod:`~converge.jobs.references` (where references import from: next to the job
file first; a job module named like one of converge's packages is loaded under a
private name, so it cannot shadow them).
"""

from __future__ import annotations

from converge.jobs.job import Job
from converge.jobs.loading import job_from_record, load_job, parse_job
from converge.jobs.references import (
    FRAMEWORK_PACKAGES,
    add_import_root,
    import_root,
    resolve_job_reference,
)
from converge.jobs.source import MAX_DEPTH, MAX_NODES
from converge.jobs.spec import (
    MODEL_ENV,
    AgentSpec,
    CelerySpec,
    ExecutorSpec,
    GateSpec,
    HitlSpec,
    JobSpec,
    MinConfidenceSpec,
    SchemaSpec,
)

__all__ = [
    "FRAMEWORK_PACKAGES",
    "MAX_DEPTH",
    "MAX_NODES",
    "MODEL_ENV",
    "AgentSpec",
    "CelerySpec",
    "ExecutorSpec",
    "GateSpec",
    "HitlSpec",
    "Job",
    "JobSpec",
    "MinConfidenceSpec",
    "SchemaSpec",
    "add_import_root",
    "import_root",
    "job_from_record",
    "load_job",
    "parse_job",
    "resolve_job_reference",
]
