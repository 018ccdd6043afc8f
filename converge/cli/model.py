"""``converge model serve``: the packaged local model behind an OpenAI-compatible
server on 127.0.0.1 (extra ``local``; docs/agents.md, "A local model")."""

from __future__ import annotations

from typing import Annotated

import typer

from converge.cli.commands import CommandGroup
from converge.cli.render import fail, out
from engine import ConfigurationError

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
) -> None:
    """Serve the packaged Gemma 3 270M on http://127.0.0.1:PORT/v1 (model name
    gemma3-270m; `python -m llama_cpp.server ... --chat_format gemma`) until stopped.

    With a command after `--`, run it once the server answers, with
    $CONVERGE_MODEL_BASE_URL set to the server and $CONVERGE_MODEL to
    openai:gemma3-270m (unless set), stop the server, and exit with the command's
    code: `converge model serve -- converge run examples/dependency_audit/reviewed.yaml`.
    """
    from converge.agents.local import LocalModelServer, run_with_server

    command = [a for a in ctx.args if a != "--"]
    server = LocalModelServer(port, threads=threads)
    try:
        server.start(quiet=bool(command))
        server.wait_ready(timeout)
    except ConfigurationError as exc:
        server.stop()
        fail(str(exc))
    try:
        if command:
            raise typer.Exit(run_with_server(server, command))
        out.print(
            f"serving {server.alias} at {server.base_url} (Ctrl-C stops it): "
            f"CONVERGE_MODEL=openai:{server.alias} CONVERGE_MODEL_BASE_URL={server.base_url}"
        )
        assert server.process is not None
        server.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
