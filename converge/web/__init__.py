"""The approval inbox (``converge serve``, extra ``web``): FastAPI, Jinja2, uvicorn.

:func:`create_app` builds the app over an audit store: the pages (``/`` pending
gates, ``/gates/{id}``, ``/runs``, ``/runs/{id}``) and the JSON API under
``/api`` share the functions of :mod:`converge.web.views`; who decides is the
authenticated person (:mod:`converge.web.auth`), never a form field; decisions go
through :func:`converge.decisions.decide`, the path of ``converge approve``.
"""

from __future__ import annotations

try:
    import fastapi  # noqa: F401
    import jinja2  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "converge.web needs the 'web' extra: pip install 'converge-engine[web]' "
        f"(missing {exc.name})"
    ) from exc

from converge.web.app import create_app

__all__ = ["create_app"]
