"""``converge schema``: the JSON Schema of job files, for editors that validate YAML."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from converge.cli.commands import CommandGroup
from converge.jobs import JobSpec

app = CommandGroup()

SCHEMA_ID = "https://converge.invalid/job-file.schema.json"


def job_file_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a job file, generated from
    :class:`converge.jobs.JobSpec` (aliases as written in YAML, e.g. ``schema``)."""
    schema = JobSpec.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        **schema,
        "title": "converge job file",
    }


@app.command("schema")
def schema_cmd(
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write to this file instead of stdout."),
    ] = None,
) -> None:
    """Print the JSON Schema of job files, for editors that validate YAML."""
    text = json.dumps(job_file_schema(), indent=2) + "\n"
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
        typer.echo(f"wrote the JSON Schema of job files to {output}")
