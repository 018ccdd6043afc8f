"""Reading a job: from a file (:func:`load_job`), from text (:func:`parse_job`) or
from the record a run kept of it (:func:`job_from_record`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from converge.errors import JobFileError
from converge.jobs.errors import validation_error
from converge.jobs.job import Job, raw_reference_problems
from converge.jobs.models import models_from_record
from converge.jobs.references import add_import_root
from converge.jobs.source import read_yaml
from converge.jobs.spec import JobSpec
from engine import ConfigurationError

__all__ = ["job_from_record", "load_job", "parse_job"]


def load_job(path: str | os.PathLike[str], *, references: bool = False) -> Job:
    """Read and validate a job file. Raises :class:`JobFileError` (file, line, field),
    holding every error found. With ``references``, also every reference of its
    suggestors, criteria, invariants and gates' hooks that names nothing (their
    modules imported, nothing called: :meth:`Job.check_references`), reported with
    the others at once."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise JobFileError(f"cannot read job file: {exc.strerror or exc}", path=str(p)) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise JobFileError(
            f"not UTF-8 text: byte 0x{raw[exc.start]:02X} cannot be decoded", path=str(p), line=line
        ) from None
    job = parse_job(text, str(p), references=references)
    if references:
        job.check_references()
    return job


def parse_job(text: str, path: str = "<job>", *, references: bool = False) -> Job:
    """Validate job text (YAML). Raises :class:`JobFileError` (file, line, field),
    holding every error of the spec; with ``references``, also the references its
    ``suggestors``, ``criteria`` and ``invariants`` list that name nothing.

    Hostile input is refused with one line, not a traceback: YAML errors, nesting
    deeper than :data:`MAX_DEPTH`, more than :data:`MAX_NODES` nodes once aliases
    are expanded ("billion laughs"), values YAML cannot construct.
    """
    data, lines = read_yaml(text, path)
    if not isinstance(data, dict):
        raise JobFileError(
            "a job file must be a mapping (name, suggestors, ...)", path=path, line=1
        )
    try:
        spec = JobSpec.model_validate(data)
    except ValidationError as exc:
        invalid = validation_error(exc, path, lines)
        if not references:
            raise invalid from exc
        # every error at once: the spec's, and the references it lists that name nothing
        flagged = {str(e["loc"][0]) for e in exc.errors() if e["loc"]}
        more = raw_reference_problems(data, path, lines, flagged)
        raise JobFileError.of([invalid, *more]) from exc
    return Job(spec, path, data, lines)


def job_from_record(record: dict[str, Any]) -> Job:
    """Rebuild a job from :meth:`Job.record` (as stored with a run), with the models
    its agents were recorded with (:mod:`converge.jobs.models`).

    The recorded job file's :func:`~converge.jobs.references.import_root` goes on
    ``sys.path``, so its references (a gate's ``validate_value`` hook too) import
    from where the run found them, whichever the current directory."""
    raw = record.get("spec")
    if not isinstance(raw, dict):
        raise ConfigurationError("the run recorded no job spec")
    path = str(record.get("path") or "<recorded job>")
    add_import_root(path)
    try:
        spec = JobSpec.model_validate(raw)
    except ValidationError as exc:
        raise validation_error(exc, path, {}) from exc
    return Job(spec, path, raw, {}, models_from_record(record.get("models")))
