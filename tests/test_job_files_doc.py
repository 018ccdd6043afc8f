"""docs/job-files.md against the code: every key, its examples, its error messages."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from converge.cli import app
from converge.cli.schema import job_file_schema
from converge.job_reference import BEGIN, END, MODELS, job_file_reference, undocumented
from converge.jobs import JobSpec, load_job, parse_job

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "job-files.md"
runner = CliRunner()


def test_the_page_holds_the_reference_generated_from_the_models() -> None:
    text = PAGE.read_text(encoding="utf-8")
    generated = text.split(BEGIN, 1)[1].split(END, 1)[0]
    assert generated.strip() == job_file_reference().strip(), (
        "regenerate: .venv/bin/python -c "
        "\"from converge.job_reference import write_reference as w; w('docs/job-files.md')\""
    )


def test_every_key_of_every_job_file_model_has_a_description() -> None:
    assert undocumented() == []
    keys = {info.alias or name for name, info in JobSpec.model_fields.items()}
    assert keys <= set(re.findall(r"^\| `(\w+)` \|", job_file_reference(), re.M))
    assert len(MODELS) == len({m for _, m in MODELS})


def test_the_example_job_of_the_page_is_valid_and_builds() -> None:
    example = re.search(r"```yaml\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    assert example is not None
    job = parse_job(example.group(1), "docs/job-files.md")
    job.build_engine()
    assert job.spec.report[0].columns == ["name", "spdx", "source"]


def test_the_error_messages_shown_are_those_converge_prints(tmp_path: Path) -> None:
    shown = re.findall(r"^error: job\.yaml:(.*)$", PAGE.read_text(encoding="utf-8"), re.M)
    jobs = [
        "name: x\nsuggestors: [tests.jobfixtures:tick]\n"
        "criteria: [tests.jobfixtures:NOT_A_CRITERION]\n",
        "name: x\nsuggestors: [tests.jobfixtures:tick]\nbudget: {max_cycles: many}\n",
    ]
    assert len(shown) == len(jobs)
    for text, expected in zip(jobs, shown, strict=True):
        path = tmp_path / "job.yaml"
        path.write_text(text)
        res = runner.invoke(app, ["run", str(path), "--no-audit"], terminal_width=300)
        assert res.exit_code == 2
        assert res.stderr.strip() == f"error: {path}:{expected}"


def test_converge_schema_describes_every_key_and_forbids_unknown_ones(tmp_path: Path) -> None:
    out = tmp_path / "job-file.schema.json"
    res = runner.invoke(app, ["schema", "--output", str(out)])
    assert res.exit_code == 0
    schema = json.loads(out.read_text())
    assert schema == job_file_schema()
    assert schema["$schema"].startswith("https://json-schema.org/draft/2020-12")
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"name", "suggestors"}
    spec_keys = {info.alias or name for name, info in JobSpec.model_fields.items()}
    assert set(schema["properties"]) == spec_keys
    gate = schema["$defs"]["GateSpec"]["properties"]
    assert "schema" in gate and "schema_" not in gate  # as written in YAML
    # every key the example job files use is in the schema
    for job in sorted((ROOT / "examples").glob("*/*.yaml")):
        assert set(load_job(job).raw) <= set(schema["properties"]), job
