"""``converge model serve``: the packaged local model behind an OpenAI-compatible
server on 127.0.0.1 (extra ``local``; docs/agents.md, "A local model")."""

from __future__ import annotations

from typing import Annotated

import typer

from converge.cli.commands import CommandGroup
from converge.cli.render import fail, out
from converge.errors import ModelServerDied
from engine import ConfigurationError

SERVER_DIED = 5
"""The exit code of ``converge model serve`` when its server dies (the code of a
run stopped by an error)."""
COMMAND_END_S = 20.0
"""``--end-within``'s default (as :data:`converge.agents.supervise.COMMAND_END_S`:
that module needs the ``local`` extra's imports, this one none)."""

app = CommandGroup()
model = CommandGroup(
    help="The packaged local model (extra 'local'): an OpenAI-compatible server on 127.0.0.1.",
    no_args_is_help=True,
)
app.add_typer(model, name="model")


@model.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def serve(
    ctx: typer.Context,
    port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1 (0: a free one).")] = 8080,
    threads: Annotated[
        int | None, typer.Option("--threads", min=1, help="CPU threads (default: all).")
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, help="Seconds to wait for the server to answer.")
    ] = 120.0,
    end_within: Annotated[
        float,
        typer.Option(
            "--end-within",
            min=0,
            help="Seconds the command after -- has to end by itself once the server died "
            "(then it is stopped).",
        ),
    ] = COMMAND_END_S,
) -> None:
    """Serve the packaged Gemma 3 270M on http://127.0.0.1:PORT/v1 (model name
    gemma3-270m; `python -m llama_cpp.server ... --chat_format gemma`) until stopped
    (SIGTERM or Ctrl-C stops the server too). Its output goes to a log file
    ($XDG_CACHE_HOME/converge/model-server-PORT.log); when the server dies, this
    exits 5 naming how it ended, the log file and its last lines.

    With a command after `--`, run it once the server answers, with
    $CONVERGE_MODEL_BASE_URL set to the server and $CONVERGE_MODEL to
    openai:gemma3-270m (unless set), stop the server, and exit with the command's
    code: `converge model serve -- converge run examples/dependency_audit/reviewed.yaml`.
    When the server dies under the command, the command has --end-within seconds
    (20) to end by itself (a run's model call fails: it stops with an external error
    naming the model and URL, exit 5) and this exits with its code; a command still
    running then is stopped (exit 5).
    """
    from converge.agents.local import LocalModelServer
    from converge.agents.supervise import Supervisor

    command = ctx.args[1:] if ctx.args[:1] == ["--"] else list(ctx.args)
    server = LocalModelServer(port, threads=threads)

    def announce() -> None:
        pid = server.process.pid if server.process is not None else "?"
        out.print(
            f"serving {server.alias} at {server.base_url} (pid {pid}; Ctrl-C stops it; its log: "
            f"{server.log_path}): CONVERGE_MODEL=openai:{server.alias} "
            f"CONVERGE_MODEL_BASE_URL={server.base_url}",
            soft_wrap=True,
            highlight=False,
        )

    def quiet() -> None:
        """With a command, its output alone."""

    try:
        supervisor = Supervisor(server, command, end_s=end_within)
        code = supervisor.run(timeout, on_ready=quiet if command else announce)
    except ModelServerDied as exc:
        # a command that ended by itself (its run stopped on the dead server, typed): its code
        fail(str(exc), SERVER_DIED if exc.command_code is None else exc.command_code)
    except ConfigurationError as exc:
        fail(str(exc))
    raise typer.Exit(code)
