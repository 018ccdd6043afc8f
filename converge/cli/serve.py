"""``converge serve``: the approval inbox (FastAPI + uvicorn, extra ``web``)."""

from __future__ import annotations

from typing import Annotated

import typer

from audit.store import SqlRunStore
from converge.cli.commands import CommandGroup
from converge.cli.render import DbOption, fail, open_run_store

app = CommandGroup()


@app.command("serve")
def serve_cmd(
    host: Annotated[str, typer.Option("--host", help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="TCP port.")] = 8000,
    db: DbOption = None,
) -> None:
    """Serve the approval inbox: pending gates, gate and run pages, the JSON API."""
    try:
        import uvicorn

        from converge.web import create_app
    except ImportError as exc:
        fail(f"converge serve needs the 'web' extra: pip install 'converge[web]' ({exc})")
    store = open_run_store(db)
    assert isinstance(store, SqlRunStore)
    uvicorn.run(create_app(store), host=host, port=port, log_level="info")
