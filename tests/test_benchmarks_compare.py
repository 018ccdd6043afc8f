"""``python -m benchmarks --compare REV``: the ratios, the table, and the temporary worktree.

No benchmark runs here: the sides are measured by fakes, the worktree is one of a
throwaway git repository.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from benchmarks.compare import (
    CompareError,
    Figure,
    Options,
    Side,
    check_side,
    collect,
    compare,
    cost_ratio,
    render_comparison,
    run_rounds,
    temporary_worktree,
    verdict,
)
from benchmarks.suite import main


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """Two commits of ``code.py`` (``old``, then ``new``) and an uncommitted ``newest``."""
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    for text in ("old", "new"):
        (root / "code.py").write_text(text)
        _git(root, "add", "code.py")
        _git(root, "commit", "-q", "-m", text)
    (root / "code.py").write_text("newest")
    return root


def _worktrees(repo: Path) -> list[str]:
    return [
        ln
        for ln in _git(repo, "worktree", "list", "--porcelain").splitlines()
        if ln.startswith("worktree ")
    ]


def _row(workload: str, size: str, median: float, higher: bool, unit: str = "u") -> dict[str, Any]:
    ours = {"median": median, "lo": median, "hi": median}
    return {
        "workload": workload,
        "size": size,
        "unit": unit,
        "higher_is_better": higher,
        "ours": ours,
    }


# -- the figures ---------------------------------------------------------------------
def test_the_ratio_is_new_cost_over_old_for_times_and_throughputs_alike() -> None:
    assert cost_ratio(10.0, 12.0, higher_is_better=False) == pytest.approx(1.2)  # µs: slower
    assert cost_ratio(300_000.0, 250_000.0, higher_is_better=True) == pytest.approx(1.2)  # facts/s
    assert cost_ratio(250_000.0, 300_000.0, higher_is_better=True) == pytest.approx(1 / 1.2)
    assert cost_ratio(0.0, 1.0, higher_is_better=False) is None


def test_the_verdict_says_slower_or_faster_and_when_the_ranges_overlap() -> None:
    assert verdict(1.2, [10.0, 10.5], [12.0, 12.5]) == "new is 20.0% slower"
    assert verdict(0.9, [10.0, 10.5], [9.0, 9.5]) == "new is 10.0% faster"
    assert verdict(1.02, [10.0, 10.5], [10.2, 10.6]) == "new is 2.0% slower (ranges overlap)"
    assert verdict(1.0, [10.0], [10.0]) == "new is the same (ranges overlap)"
    assert verdict(None, [], [1.0]) == "—"


def test_a_figure_is_the_median_of_the_round_medians_and_audit_rows_are_dropped() -> None:
    figures: dict[tuple[str, str], Figure] = {}
    for old, new in [(10.0, 13.0), (11.0, 12.0), (30.0, 11.0)]:  # one noisy old round
        collect(figures, "old", [_row("W1 chain", "K=250", old, False)], audit=False)
        collect(figures, "new", [_row("W1 chain", "K=250", new, False)], audit=False)
    sqlite = _row("W2 throughput, SQLite WAL", "100x100x2", 60_000.0, True)
    skipped = {**_row("W2 throughput, PostgreSQL", "100x100x2", 1.0, True), "ours": None}
    collect(figures, "old", [sqlite, skipped], audit=False)
    assert list(figures) == [("W1 chain", "K=250")]
    fig = figures[("W1 chain", "K=250")]
    assert fig.old == [10.0, 11.0, 30.0] and fig.new == [13.0, 12.0, 11.0]
    assert fig.ratio() == pytest.approx(12.0 / 11.0)
    collect(figures, "new", [sqlite, skipped], audit=True)
    assert ("W2 throughput, SQLite WAL", "100x100x2") in figures
    assert ("W2 throughput, PostgreSQL", "100x100x2") not in figures  # no figure: skipped


def test_the_table_shows_both_medians_the_ratio_and_the_verdict() -> None:
    w2 = Figure("W2 throughput, no store", "100x100x10", "facts/s", True)
    w2.old, w2.new = [300_000.0, 320_000.0, 310_000.0], [250_000.0, 240_000.0, 260_000.0]
    only_new = Figure("W9 new", "N=1", "ms", False, [], [1.0])
    table = render_comparison([w2, only_new])
    assert (
        "| old median (min-max) | new median (min-max) | new cost / old "
        "| paired, drift-corrected (min-max) | verdict |"
    ) in table
    assert (
        "| W2 throughput, no store | 100x100x10 | facts/s | 310,000 (300,000-320,000) "
        "| 250,000 (240,000-260,000) | 1.240x | 1.200x (1.192-1.333) | new is 24.0% slower |"
    ) in table
    assert "| W9 new | N=1 | ms | — | 1.00 (1.00-1.00) | — | — | — |" in table


def test_the_paired_ratio_takes_out_the_drift_of_each_round() -> None:
    """A round where the whole machine was 2x slower for the new side (the plain loop,
    the same code on both sides, says so) does not count against the new tree."""
    loop = Figure("limit: plain loop", "20,000", "facts/s", True)
    loop.old, loop.new = [100.0, 100.0, 100.0], [100.0, 50.0, 100.0]
    w1 = Figure("W1 chain", "K=250", "µs/invocation", False)
    w1.old, w1.new = [10.0, 10.0, 10.0], [10.5, 21.0, 10.5]
    assert w1.paired([1.0, 2.0, 1.0]) == pytest.approx([1.05, 1.05, 1.05])
    table = render_comparison([loop, w1])
    assert "| 1.050x (1.050-1.050) |" in table
    assert "| 1.000x (1.000-2.000) | drift: the new side's runs were" in table


def test_the_rounds_alternate_the_order_of_the_sides(tmp_path: Path) -> None:
    old, new = Side("old", "o", tmp_path), Side("new", "n", tmp_path)
    order: list[str] = []

    def run(side: Side, out: Path, quick: bool, audit: bool) -> list[dict[str, Any]]:
        order.append(side.name)
        return [_row("W3 wide-idle", "N=500", 10.0 if side.name == "old" else 11.0, False)]

    figures = run_rounds(old, new, 3, quick=True, audit=False, run=run)
    assert order == ["old", "new", "new", "old", "old", "new"]
    assert figures[0].old == [10.0] * 3 and figures[0].ratio() == pytest.approx(1.1)


# -- the worktree --------------------------------------------------------------------
def test_the_worktree_holds_the_revision_and_is_removed_afterwards(repo: Path) -> None:
    with temporary_worktree(repo, "HEAD~1") as tree:
        assert (tree / "code.py").read_text() == "old"
        assert len(_worktrees(repo)) == 2
    assert not tree.exists() and len(_worktrees(repo)) == 1
    assert (repo / "code.py").read_text() == "newest"  # the user's tree untouched
    assert _git(repo, "status", "--porcelain") == "M code.py"


def test_the_worktree_is_removed_when_the_block_fails(repo: Path) -> None:
    with pytest.raises(KeyboardInterrupt), temporary_worktree(repo, "HEAD~1") as tree:
        raise KeyboardInterrupt
    assert not tree.exists() and not tree.parent.exists() and len(_worktrees(repo)) == 1


def test_an_unknown_revision_is_refused_before_any_worktree(repo: Path) -> None:
    with pytest.raises(CompareError, match="not a commit"), temporary_worktree(repo, "nope"):
        pass
    assert len(_worktrees(repo)) == 1


def test_a_failing_measurement_leaves_no_worktree_behind(repo: Path) -> None:
    seen: list[Path] = []

    def run(side: Side, out: Path, quick: bool, audit: bool) -> list[dict[str, Any]]:
        seen.append(side.tree)
        if side.name == "new":
            raise CompareError("new failed")
        return []

    with pytest.raises(CompareError, match="new failed"):
        compare(Options("HEAD~1", rounds=2), ["--compare", "HEAD~1"], repo, run, lambda s, q: None)
    assert seen[0] != repo and not seen[0].exists() and seen[1] == repo
    assert len(_worktrees(repo)) == 1


def test_the_report_names_both_sides_and_the_command(repo: Path) -> None:
    def run(side: Side, out: Path, quick: bool, audit: bool) -> list[dict[str, Any]]:
        assert (side.tree / "code.py").read_text() == ("old" if side.name == "old" else "newest")
        return [_row("W1 chain", "K=250", 10.0 if side.name == "old" else 9.0, False)]

    options = Options("HEAD~1", rounds=2, quick=True)
    report, data = compare(
        options, ["--compare", "HEAD~1", "--quick"], repo, run, lambda s, q: None
    )
    commit = _git(repo, "rev-parse", "HEAD~1")
    assert f"- old: `HEAD~1` = `{commit[:12]}`" in report
    assert "+ uncommitted changes" in report and "--compare HEAD~1 --quick`" in report
    assert "| W1 chain | K=250 | u | 10.0 (10.0-10.0) | 9.00 (9.00-9.00) | 0.900x " in report
    assert data["old"]["commit"] == commit and data["rows"][0]["new_cost_over_old"] == 0.9


def test_an_old_suite_without_the_flags_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    """A tree whose ``python -m benchmarks`` knows ``--quick`` and ``--only`` only."""
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "__init__.py").write_text("")
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "__init__.py").write_text("")
    (tmp_path / "benchmarks" / "__main__.py").write_text(
        "import argparse\n"
        "p = argparse.ArgumentParser()\n"
        "p.add_argument('--quick', action='store_true')\n"
        "p.add_argument('--only')\n"
        "p.parse_args()\n"
    )
    with pytest.raises(CompareError, match="has no --json, --no-langgraph: --compare runs"):
        check_side(Side("old", "`v0`", tmp_path), quick=True)


def test_the_command_line_refuses_a_bad_revision_and_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--compare", "no-such-revision-xyz", "--rounds", "1"]) == 2
    assert "not a commit" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="--only and --profile do not apply"):
        main(["--compare", "HEAD", "--only", "w1"])
