"""``converge``: the command line.

It parses, calls the library, and renders with rich; every figure it shows is
reachable from Python. One module per command group, each with its own
``typer.Typer`` whose commands join the one :data:`app`
(:mod:`converge.cli.root`), each loaded when it is used
(:mod:`converge.cli.catalog` lists them):

- :mod:`converge.cli.run`: ``run``;
- :mod:`converge.cli.audit`: ``runs`` (:mod:`converge.cli.runs`), ``show``, ``facts``,
  ``lineage`` (:mod:`converge.cli.facts`), ``verify``, ``anchor``;
- :mod:`converge.cli.events`: ``events``;
- :mod:`converge.cli.gates`: ``gates``, ``approve``, ``reject``;
- :mod:`converge.cli.resuming`: ``resume``;
- :mod:`converge.cli.history`: ``comment`` and ``gates GATE --history``;
- :mod:`converge.cli.service`: ``submit``, ``cancel``, ``watch`` (runs as a service);
- :mod:`converge.cli.tokens`: ``token add``, ``token list``, ``token revoke``,
  ``user add``, ``access-log`` (people, their tokens and groups, the refusals);
- :mod:`converge.cli.config`: ``config set``, ``config show`` (the store's settings);
- :mod:`converge.cli.retention`: ``prune`` (stopped runs removed, tombstones kept),
  ``redact`` (a fact's content erased, its commitment kept);
- :mod:`converge.cli.serve`: ``serve`` (the approval inbox);
- :mod:`converge.cli.report`: ``report``;
- :mod:`converge.cli.schema`: ``schema``;
- :mod:`converge.cli.worker`: ``worker`` (a Celery worker, extra ``workers``);
- :mod:`converge.cli.model`: ``model serve`` (the local model, extra ``local``);
- :mod:`converge.cli.proofs`: ``keys generate``, ``export``, ``verify-bundle``;
- :mod:`converge.cli.checkpoints`: ``checkpoint``, ``witness cosign`` (C2SP formats);
- :mod:`converge.cli.timetravel`: ``fork``, ``diff``, ``replay``;
- :mod:`converge.cli.actors`: who acts (``--by``, ``--token``) and the access
  policy's questions (:mod:`converge.access`);
- :mod:`converge.cli.render`: the shared options, errors and rendering;
  :mod:`converge.cli.tables`: tables that fit the terminal;
  :mod:`converge.cli.budgets`: the ``--max-*`` budget options.

Exit codes of ``run``, ``approve`` and ``resume`` follow the stop reason
(docs/stop-reasons.md); a bad job file or bad input exits 2. A reader that closes
the pipe early (``converge run job.yaml | head``) changes no exit code.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["app", "main"]


def __getattr__(name: str) -> Any:
    """``converge.cli.app``: the root group (:mod:`converge.cli.root`), imported on
    first use so that ``converge --version`` needs no typer."""
    if name == "app":
        from converge.cli.root import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:  # pragma: no cover - the console script
    """Entry point of the ``converge`` console script.

    ``converge --version`` prints the version with nothing else imported;
    ``converge --help`` prints the root help kept from the last time
    (:mod:`converge.cli.helpcache`), rendering it only when nothing is kept. A reader
    that closes the pipe (``converge runs | head -1``) ends the output, quietly: the
    rest goes to the null device (:class:`~converge.cli.pipes.ClosedPipeGuard`) and
    the command exits with the code its result gives (``run``, ``approve`` and
    ``resume`` their stop's, :func:`converge.cli.results.render_result`; ``verify``
    0 for an intact store); ``watch`` stops following and exits 1.
    """
    if sys.argv[1:] == ["--version"]:
        from converge import __version__

        sys.stdout.write(f"converge {__version__}\n")
        return
    from converge.cli.pipes import ClosedPipeGuard, drop_stdout

    recorder = None
    if sys.argv[1:] == ["--help"]:  # the root help: kept as printed (converge.cli.helpcache)
        from converge.cli import helpcache

        text = helpcache.cached()
        if text is not None:
            sys.stdout.write(text)
            return
        recorder = helpcache.Recorder(sys.stdout)
        sys.stdout = recorder
    from converge.cli.root import app

    sys.stdout = ClosedPipeGuard(sys.stdout)
    try:
        app()
    except BrokenPipeError:
        drop_stdout()
        raise SystemExit(1) from None
    except SystemExit as done:
        if recorder is not None and done.code in (0, None):
            helpcache.remember(recorder.text)
        raise
