"""``python -m benchmarks --compare REV``: W1-W3 of two commits, alternately, and the ratios.

REV is any git revision of the repository the benchmarks run from. It is checked
out into a temporary ``git worktree add --detach``, removed afterwards (also on
an error or Ctrl-C); the user's work tree is never touched. Each of ``rounds``
rounds runs ``python -m benchmarks --only limits,w1,w2,w3 --no-langgraph --json
FILE [--quick]`` once in the old tree (REV) and once in the new one (the tree
this suite runs from, uncommitted changes included), each in a fresh subprocess
whose working directory and ``PYTHONPATH`` are the tree it measures, so the old
code really is the old code. The order alternates (old then new, new then old,
...) so a machine that drifts favours neither side. The plain-loop limit runs in
the same subprocesses: its ratio is the drift of the machine itself.

On a busy machine the medians of each side drift apart with the load; the
**paired** figure is steadier: each round's old and new ran back to back, so the
round's own ratio divided by that round's plain-loop ratio (the drift between
the two sides' subprocesses) is taken, and the median of those over the rounds
(with their range) is shown beside the ratio of the medians.

A figure is the median over the rounds of each round's median, with the range
of the round medians. The ratio is new cost / old cost: new / old for times,
old / new for throughputs, so that above 1 always means the new tree is slower.
Without ``--compare-audit`` the audited W2 rows and their limits are dropped
(and PostgreSQL is pointed at a closed port so its row is skipped at once).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from benchmarks.harness import environment, fmt, render_environment
from benchmarks.session import log

__all__ = [
    "CompareError",
    "Figure",
    "Side",
    "compare",
    "cost_ratio",
    "main_compare",
    "render_comparison",
    "temporary_worktree",
    "verdict",
]

SELECTION = "limits,w1,w2,w3"
"""What each side runs (``--only``): every name existed before ``--compare`` did."""
REQUIRED_FLAGS = ("--only", "--json", "--no-langgraph")
AUDIT_ROWS = frozenset(
    {
        "W2 throughput, SQLite WAL",
        "W2 throughput, PostgreSQL",
        "limit: sqlite3 executemany",
        "limit: sha256 chain",
        "W2 throughput, SQLite WAL, vs format floor",
        "W2 throughput, PostgreSQL, vs format floor",
        "limit: format, SQLite",
        "limit: format, PostgreSQL",
    }
)
"""Rows shown only with ``--compare-audit`` (the store-bound W2 rows and their floor)."""
CLOSED_PG_URL = "postgresql+psycopg://compare@127.0.0.1:1/skipped"
"""``CONVERGE_TEST_PG_URL`` of a side without ``--compare-audit``: the PG row skips at once."""
CHILD_TIMEOUT = 1800.0  # seconds for one side's run


class CompareError(Exception):
    """A comparison that cannot run: a bad revision, an old suite lacking a flag, a failed run."""


# -- the figures ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Side:
    """One of the two trees: ``name`` is ``old`` or ``new``; ``label`` says which commit."""

    name: str
    label: str
    tree: Path


@dataclass(slots=True)
class Figure:
    """One row (workload and size) of both sides: each round's median, in the row's unit."""

    workload: str
    size: str
    unit: str
    higher_is_better: bool
    old: list[float] = field(default_factory=list)
    new: list[float] = field(default_factory=list)

    def ratio(self) -> float | None:
        """New cost / old cost of the medians over the rounds (None when a side is missing)."""
        if not self.old or not self.new:
            return None
        old, new = statistics.median(self.old), statistics.median(self.new)
        return cost_ratio(old, new, self.higher_is_better)

    def paired(self, drift: Sequence[float | None] = ()) -> list[float]:
        """Each round's new cost / old cost, divided by that round's ``drift`` (the
        plain-loop limit's ratio) when given; rounds missing a figure are left out."""
        ratios = []
        for i, (old, new) in enumerate(zip(self.old, self.new, strict=False)):
            ratio = cost_ratio(old, new, self.higher_is_better)
            correction = drift[i] if i < len(drift) else 1.0
            if ratio is not None and correction:
                ratios.append(ratio / correction)
        return ratios

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form, with the medians and the ratio."""
        return {
            "workload": self.workload,
            "size": self.size,
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "old_rounds": self.old,
            "new_rounds": self.new,
            "old_median": statistics.median(self.old) if self.old else None,
            "new_median": statistics.median(self.new) if self.new else None,
            "new_cost_over_old": self.ratio(),
            "paired_rounds": self.paired(),
        }


def cost_ratio(old: float, new: float, higher_is_better: bool) -> float | None:
    """New cost / old cost: ``new / old`` for a time, ``old / new`` for a throughput.

    Above 1 the new tree is slower. None when a figure is not positive.
    """
    if old <= 0 or new <= 0:
        return None
    return old / new if higher_is_better else new / old


def verdict(ratio: float | None, old: Sequence[float], new: Sequence[float]) -> str:
    """``new is 12.0% slower`` / ``faster`` / ``the same``; ``(ranges overlap)`` when the
    min-max ranges of the two sides' round medians overlap, i.e. inside the noise."""
    if ratio is None:
        return "—"
    pct = (ratio - 1.0) * 100
    if round(pct, 1) == 0:
        text = "new is the same"
    else:
        text = f"new is {abs(pct):.1f}% {'slower' if pct > 0 else 'faster'}"
    if old and new and max(old) >= min(new) and max(new) >= min(old):
        text += " (ranges overlap)"
    return text


def collect(
    figures: dict[tuple[str, str], Figure], side: str, rows: Sequence[dict[str, Any]], audit: bool
) -> None:
    """Add one side's rows (the suite's JSON ``rows``) of one round to ``figures``."""
    for row in rows:
        ours = row.get("ours")
        if ours is None or (row["workload"] in AUDIT_ROWS and not audit):
            continue
        key = (row["workload"], row["size"])
        fig = figures.setdefault(
            key, Figure(row["workload"], row["size"], row["unit"], bool(row["higher_is_better"]))
        )
        (fig.old if side == "old" else fig.new).append(float(ours["median"]))


def _median_range(values: Sequence[float]) -> str:
    if not values:
        return "—"
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}-{fmt(max(values))})"


DRIFT_ROW = "limit: plain loop"
"""The row whose per-round ratio is the machine's drift between the two sides."""


def _ratio_range(values: Sequence[float]) -> str:
    if not values:
        return "—"
    return f"{statistics.median(values):.3f}x ({min(values):.3f}-{max(values):.3f})"


def render_comparison(figures: Sequence[Figure]) -> str:
    """The markdown table: old and new medians over the rounds, the ratio, the paired
    ratio corrected for the drift (median and range over the rounds), the verdict."""
    limit = next((f for f in figures if f.workload == DRIFT_ROW), None)
    drift: list[float | None] = (
        []
        if limit is None
        else [
            cost_ratio(o, n, limit.higher_is_better)
            for o, n in zip(limit.old, limit.new, strict=False)
        ]
    )
    lines = [
        "| workload | size | unit | old median (min-max) | new median (min-max) "
        "| new cost / old | paired, drift-corrected (min-max) | verdict |",
        "|" + "---|" * 8,
    ]
    for f in figures:
        ratio = f.ratio()
        said = verdict(ratio, f.old, f.new)
        paired = f.paired() if f is limit else f.paired(drift)
        if f.workload.startswith("limit:"):  # the same code on both sides: the machine
            said = said.replace("new is", "drift: the new side's runs were", 1)
        lines.append(
            f"| {f.workload} | {f.size} | {f.unit} | {_median_range(f.old)} "
            f"| {_median_range(f.new)} | {'—' if ratio is None else f'{ratio:.3f}x'} "
            f"| {_ratio_range(paired)} | {said} |"
        )
    return "\n".join(lines)


# -- the trees -----------------------------------------------------------------------
def git(repo: Path, *args: str) -> str:
    """``git -C repo args``; its stdout, stripped. A failure raises :class:`CompareError`."""
    proc = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise CompareError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


def resolve(repo: Path, rev: str) -> str:
    """The full commit id of ``rev`` in ``repo``; :class:`CompareError` when it names none."""
    try:
        return git(
            repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"
        )
    except CompareError:
        raise CompareError(f"{rev!r} is not a commit of the repository at {repo}") from None


@contextmanager
def temporary_worktree(repo: Path, rev: str) -> Iterator[Path]:
    """Check ``rev`` out into a detached worktree in a temporary directory; yield its path.

    The worktree is removed when the block ends, however it ends (an exception,
    Ctrl-C); ``repo``'s own work tree and index are never touched.
    """
    commit = resolve(repo, rev)
    parent = Path(tempfile.mkdtemp(prefix="converge-compare-"))
    tree = parent / "old"
    try:
        git(repo, "worktree", "add", "--detach", str(tree), commit)
        yield tree
    finally:
        try:
            git(repo, "worktree", "remove", "--force", str(tree))
            removed = True
        except CompareError:  # never added, or half-added (Ctrl-C during the checkout)
            removed = False
        shutil.rmtree(parent, ignore_errors=True)
        if not removed:  # forget its entry, now that its directory is gone
            with suppress(CompareError):
                git(repo, "worktree", "prune")


def new_label(repo: Path) -> str:
    """``abc1234`` of HEAD, ``+ uncommitted changes`` when the work tree differs from it."""
    head = git(repo, "rev-parse", "--short=12", "HEAD")
    dirty = bool(git(repo, "status", "--porcelain"))
    return f"work tree at `{head}`" + (" + uncommitted changes" if dirty else "")


# -- running one side ----------------------------------------------------------------
def child_env(tree: Path, audit: bool) -> dict[str, str]:
    """The environment of a side's subprocess: ``PYTHONPATH`` is its tree, nothing else."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    if not audit:
        env["CONVERGE_TEST_PG_URL"] = CLOSED_PG_URL
    return env


def _child(tree: Path, args: Sequence[str], audit: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=tree,
        env=child_env(tree, audit),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        check=False,
    )


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def check_side(side: Side, quick: bool) -> None:
    """The side imports its own ``benchmarks`` and ``engine``, and its suite has the flags."""
    probe = "import benchmarks, engine; print(benchmarks.__file__); print(engine.__file__)"
    proc = _child(side.tree, ["-c", probe], audit=False)
    if proc.returncode != 0:
        raise CompareError(
            f"{side.name} ({side.label}) cannot import its code:\n{_tail(proc.stderr)}"
        )
    tree = side.tree.resolve()
    for path in proc.stdout.split():
        if not Path(path).resolve().is_relative_to(tree):
            raise CompareError(
                f"{side.name} ({side.label}) imports {path}, outside its tree {tree}: "
                "an installed copy shadows it"
            )
    proc = _child(side.tree, ["-m", "benchmarks", "--help"], audit=False)
    if proc.returncode != 0:
        raise CompareError(
            f"`python -m benchmarks --help` fails in {side.name} ({side.label}):\n"
            f"{_tail(proc.stderr)}"
        )
    needed = (*REQUIRED_FLAGS, "--quick") if quick else REQUIRED_FLAGS
    missing = [f for f in needed if f not in proc.stdout]
    if missing:
        raise CompareError(
            f"the benchmark suite of {side.name} ({side.label}) has no {', '.join(missing)}: "
            f"--compare runs `python -m benchmarks --only {SELECTION} --no-langgraph --json FILE` "
            "in both trees; compare with a newer revision"
        )


def run_side(side: Side, out: Path, quick: bool, audit: bool) -> list[dict[str, Any]]:
    """One fresh ``python -m benchmarks`` run in ``side``'s tree; the rows of its JSON."""
    args = ["-m", "benchmarks", "--only", SELECTION, "--no-langgraph", "--json", str(out)]
    proc = _child(side.tree, [*args, *(["--quick"] if quick else [])], audit)
    if proc.returncode != 0 or not out.exists():
        raise CompareError(
            f"{side.name} ({side.label}) failed (exit {proc.returncode}):\n{_tail(proc.stderr)}"
        )
    rows: list[dict[str, Any]] = json.loads(out.read_text(encoding="utf-8"))["rows"]
    out.unlink()
    return rows


RunSide = Callable[[Side, Path, bool, bool], list[dict[str, Any]]]


def run_rounds(
    old: Side, new: Side, rounds: int, quick: bool, audit: bool, run: RunSide = run_side
) -> list[Figure]:
    """``rounds`` rounds, old-new then new-old alternately; the figures in first-seen order."""
    figures: dict[tuple[str, str], Figure] = {}
    with tempfile.TemporaryDirectory(prefix="converge-compare-json-") as tmp:
        for r in range(rounds):
            for side in (old, new) if r % 2 == 0 else (new, old):
                log(f"round {r + 1}/{rounds}: {side.name} ({side.label}) …")
                rows = run(side, Path(tmp) / f"{side.name}-{r}.json", quick, audit)
                collect(figures, side.name, rows, audit)
    return list(figures.values())


# -- the command ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Options:
    """What ``--compare`` was asked: the revision, rounds, sizes, audit rows, JSON file."""

    rev: str
    rounds: int = 4
    quick: bool = False
    audit: bool = False
    json_path: str | None = None


def compare(
    options: Options,
    argv: Sequence[str],
    repo: Path,
    run: RunSide = run_side,
    check: Callable[[Side, bool], None] = check_side,
) -> tuple[str, dict[str, Any]]:
    """Run the comparison of ``options.rev`` against ``repo``'s work tree; the report
    (markdown) and its JSON form. The old tree is a temporary worktree, removed at the end."""
    if options.rounds < 1:
        raise CompareError(f"--rounds must be >= 1, got {options.rounds}")
    top = Path(git(repo, "rev-parse", "--show-toplevel"))
    sub = repo.resolve().relative_to(top.resolve())  # where the suite sits in the repository
    commit = resolve(top, options.rev)
    new = Side("new", new_label(top), repo)
    with temporary_worktree(top, commit) as tree:
        old = Side("old", f"`{options.rev}` = `{commit[:12]}`", tree / sub)
        for side in (old, new):
            check(side, options.quick)
        figures = run_rounds(old, new, options.rounds, options.quick, options.audit, run)
    env = environment(argv)
    head = [
        "## converge benchmarks: new against old" + (" (--quick)" if options.quick else ""),
        "",
        render_environment(env),
        f"- old: {old.label} (a temporary detached worktree, removed)",
        f"- new: {new.label} ({repo})",
        f"- method: {options.rounds} round(s), old-new then new-old alternately; each side a "
        f"fresh `python -m benchmarks --only {SELECTION} --no-langgraph --json FILE"
        f"{' --quick' if options.quick else ''}` with PYTHONPATH at its tree; a figure is "
        "the median of the round medians (min-max of the round medians)",
        "- new cost / old: new / old for times, old / new for throughputs: above 1 the new "
        "tree is slower; the plain-loop limit is the same code on both sides, its ratio "
        "is the machine's drift",
        "",
        render_comparison(figures),
    ]
    data = {
        "environment": env,
        "old": {"rev": options.rev, "commit": commit},
        "new": {"label": new.label, "tree": str(repo)},
        "rounds": options.rounds,
        "quick": options.quick,
        "rows": [f.as_dict() for f in figures],
    }
    return "\n".join(head), data


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main_compare(options: Options, argv: Sequence[str], repo: Path) -> int:
    """``--compare``: print the report (and write its JSON); 2 on a :class:`CompareError`.

    SIGTERM is turned into ``KeyboardInterrupt`` meanwhile, so the worktree goes then too.
    """
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        report, data = compare(options, argv, repo)
    except CompareError as exc:
        print(f"python -m benchmarks --compare: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("python -m benchmarks --compare: interrupted (worktree removed)", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(report)
    if options.json_path:
        with open(options.json_path, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, ensure_ascii=False)
    return 0
