"""Who may see and do what, through every surface (issue 54, docs/access.md).

- Every route of the app and every command of the CLI asks the access policy: the
  routes are walked with a recorder of the policy's questions (a route that asks
  nothing fails), the commands are each in :data:`COMMANDS` (what they ask) or in
  :data:`FOR_NOBODY` (they act for no person), and a new one in neither fails.
- The matrix: every role of docs/access.md's table against every surface (the JSON
  API and the pages of the real ``converge serve``, the real commands) and action,
  on SQLite and PostgreSQL, answered as the docs table says: a refusal is a 403 (exit
  2, one line) writing nothing but one access-log row; an allowed action succeeds.
  Then what ``visible_to`` and a gate's approvers narrow, and a restricted gate.
"""

from __future__ import annotations

import ast
import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from starlette.types import ASGIApp, Receive, Scope, Send

from audit import open_store
from converge.access import ASKED, PUBLIC_ROUTES, Action, Role
from converge.cli import app as cli_app
from converge.web import create_app
from tests import accessfixtures
from tests.accessfixtures import ROLES, SECRET, PageClient, Scene, build_scene, counts
from tests.faultfixtures import CliOutcome, run_cli
from tests.hitlfixtures import STORES, store_url_for
from tests.realserve import Served, served_cli
from tests.test_access_policy import doc_table


# -- every route and every command asks ------------------------------------------------
class AskRecorder:
    """ASGI wrapper: the policy's questions during each request, by method and route."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.asked: dict[tuple[str, str], list[Action]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        asked: list[Action] = []
        token = ASKED.set(asked)
        try:
            await self.app(scope, receive, send)
        finally:
            ASKED.reset(token)
            self.asked[(scope.get("method", ""), scope.get("path", ""))] = asked


def _routes(app: Any) -> list[tuple[str, str]]:
    found = []
    for route in app.router.routes:
        inner = getattr(getattr(route, "original_router", None), "routes", [route])
        for r in inner:
            if isinstance(r, APIRoute):
                found += [(m, r.path) for m in sorted(r.methods - {"HEAD"})]
    return found


def test_every_route_asks_the_access_policy(tmp_path: Path) -> None:
    scene = build_scene(str(tmp_path / "walk.db"), tmp_path)
    store = open_store(scene.url)
    app = create_app(store)
    recorder = AskRecorder(app)
    api = TestClient(recorder)
    page = TestClient(recorder)
    run, gate, stopped = scene.runs["open"], scene.gates["open"], scene.runs["stopped"]
    fill = {"{run_id}": stopped, "{other}": stopped, "{gate_id}": gate, "{fact_id}": "nofact"}
    bodies: dict[tuple[str, str], dict[str, Any]] = {
        ("POST", "/api/gates/{gate_id}/decision"): {"json": {"approved": True}},
        ("POST", "/api/gates/{gate_id}/statement"): {"json": {"approved": True}},
        ("POST", "/api/gates/{gate_id}/signed-decision"): {"json": {"statement": {}}},
        ("POST", "/api/gates/{gate_id}/comments"): {"json": {"text": "hello"}},
        ("POST", "/api/runs/{run_id}/fork"): {"json": {"cycle": 0}},
        ("POST", "/api/runs/{run_id}/facts/{fact_id}/redact"): {"json": {"reason": "x"}},
    }
    auth = {"Authorization": f"Bearer {scene.tokens['ada']}"}
    login = page.get("/login")
    csrf_login = login.text.split('name="csrf" value="')[1].split('"')[0]
    page.post("/login", data={"csrf": csrf_login, "token": scene.tokens["ada"], "next": "/"})
    csrf = page.get("/").text.split('name="csrf" value="')[1].split('"')[0]
    forms: dict[tuple[str, str], dict[str, str]] = {
        ("POST", "/gates/{gate_id}/decision"): {"decision": "approve"},
        ("POST", "/gates/{gate_id}/comments"): {"text": "hello"},
        ("POST", "/runs/{run_id}/fork"): {"cycle": "0"},
    }
    not_asked = []
    try:
        for method, path in _routes(app):
            if (method, path) in PUBLIC_ROUTES:  # sign-in, docs, probes: for nobody
                continue
            concrete = path
            for hole, value in fill.items():
                concrete = concrete.replace(hole, value)
            if path == "/api/runs/{run_id}/cancel" or path == "/runs/{run_id}/cancel":
                concrete = concrete.replace(stopped, scene.runs["queued"])
            if path.startswith("/api/"):
                api.request(method, concrete, headers=auth, **bodies.get((method, path), {}))
            elif method == "POST":
                page.post(concrete, data={"csrf": csrf, **forms.get((method, path), {})})
            else:
                page.get(concrete)
            if not recorder.asked.get((method, concrete)):
                not_asked.append(f"{method} {path}")
    finally:
        store.close()
    assert run and not_asked == [], f"routes that never ask the access policy: {not_asked}"


COMMANDS: dict[str, set[Action]] = {
    "run": {Action.START_RUN},
    "submit": {Action.START_RUN},
    "resume": {Action.START_RUN},
    "fork": {Action.FORK_RUN},
    "cancel": {Action.CANCEL_RUN},
    "approve": {Action.DECIDE},
    "reject": {Action.DECIDE},
    "comment": {Action.COMMENT},
    "runs": {Action.SEE_RUN},
    "show": {Action.SEE_RUN, Action.SEE_GATE},
    "facts": {Action.SEE_RUN},
    "lineage": {Action.SEE_RUN},
    "events": {Action.SEE_RUN, Action.SEE_GATE},
    "report": {Action.SEE_RUN},
    "diff": {Action.SEE_RUN},
    "replay": {Action.SEE_RUN},
    "watch": {Action.FOLLOW_RUN},
    "gates": {Action.READ_GATE},
    "export": {Action.EXPORT_RUN},
    "token add": {Action.MANAGE_PEOPLE},
    "token list": {Action.MANAGE_PEOPLE},
    "token revoke": {Action.MANAGE_PEOPLE},
    "user add": {Action.MANAGE_PEOPLE},
    "config set": {Action.MANAGE_PEOPLE},
    "access-log": {Action.MANAGE_PEOPLE},
    "prune": {Action.PRUNE},
    "redact": {Action.REDACT},
}
"""Each command that acts for a person (its ``--token``, else its ``--by`` or the
database's holder) and what it asks the policy."""
FOR_NOBODY = {
    "verify": "checks the store's hashes: no person's content is shown",
    "anchor": "prints the ledger's head",
    "checkpoint": "prints the ledger's signed checkpoint",
    "witness cosign": "a witness's signature over a checkpoint",
    "verify-bundle": "checks a bundle file offline, with no store",
    "keys generate": "writes a key pair to files",
    "schema": "prints the job files' JSON Schema",
    "serve": "the server: each request asks for its person",
    "worker": "executes what a person's request queued",
    "model serve": "a local model server",
    "config show": "prints the store's settings",
}
"""The commands that act for no person, and why."""


def _commands(group: Any, prefix: str = "") -> Iterator[str]:
    for name, command in group.commands.items():
        if hasattr(command, "commands"):  # a group (typer's own click)
            yield from _commands(command, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}"


def test_every_command_asks_the_policy_or_acts_for_nobody() -> None:
    every = set(_commands(typer.main.get_command(cli_app)))  # type: ignore[arg-type]
    unlisted = every - set(COMMANDS) - set(FOR_NOBODY)
    assert unlisted == set(), f"commands neither in COMMANDS nor in FOR_NOBODY: {unlisted}"
    assert set(COMMANDS) | set(FOR_NOBODY) <= every  # no stale entry


SURFACES = ("converge/web", "converge/cli", "converge/decisions", "converge/timetravel")
"""The code that answers people: no role or group is compared there."""


def _compares_who(tree: ast.AST) -> list[int]:
    """The lines of ``tree`` comparing a ``.role``, ``.groups`` or ``.approvers`` (or a
    membership test against them): the policy's business, not a surface's."""
    watched = {"role", "groups", "approvers", "may_decide"}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "may_decide":
            lines.append(node.lineno)  # a role's power asked of the person, not the policy
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(x, ast.Attribute) and x.attr in watched for x in sides):
                lines.append(node.lineno)
    return lines


def test_no_surface_compares_roles_or_groups_itself() -> None:
    root = Path(__file__).resolve().parent.parent
    found = []
    for folder in SURFACES:
        for path in sorted((root / folder).rglob("*.py")):
            for line in _compares_who(ast.parse(path.read_text())):
                found.append(f"{path.relative_to(root)}:{line}")
        for page in sorted((root / folder).rglob("*.html")):
            for n, text in enumerate(page.read_text().splitlines(), 1):
                if re.search(r"\.(role|groups|approvers)\s*(==|!=|\bin\b)", text):
                    found.append(f"{page.relative_to(root)}:{n}")
    assert found == [], f"surfaces deciding access themselves: {found}"


# -- the matrix through the real server and commands ----------------------------------
@dataclass(frozen=True)
class Outcome:
    """What one attempt gave: ``allowed`` (None: neither a success nor a refusal)."""

    allowed: bool | None
    detail: str


def _http(answer: httpx.Response, ok: tuple[int, ...]) -> Outcome:
    if answer.status_code == 403:
        return Outcome(False, answer.text)
    return Outcome(
        True if answer.status_code in ok else None, f"{answer.status_code} {answer.text[:300]}"
    )


def _cli(done: CliOutcome, ok: tuple[int, ...]) -> Outcome:
    if done.returncode == 2 and "may not" in done.message:
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1, done.stderr  # one line
        return Outcome(False, done.message)
    return Outcome(True if done.returncode in ok else None, str(done))


Attempt = Callable[["Matrix", str], Outcome]


class Matrix:
    """The scene served by a real ``converge serve``, tried as each person."""

    def __init__(self, scene: Scene, served: Served, workdir: Path) -> None:
        self.scene = scene
        self.base = served.base
        self.workdir = workdir
        self.pages: dict[str, PageClient] = {}
        self.n = 0
        made = run_cli(["keys", "generate", "--dir", str(workdir / "keys")])
        assert made.returncode == 0, made
        self.env = {"CONVERGE_SIGNING_KEY": str(workdir / "keys" / "converge.key")}

    def api(self, who: str, method: str, path: str, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.scene.tokens[who]}"}
        return httpx.request(method, self.base + path, headers=headers, timeout=60, **kw)

    def page(self, who: str) -> PageClient:
        if who not in self.pages:
            self.pages[who] = PageClient(self.base, self.scene.tokens[who])
        return self.pages[who]

    def cli(self, who: str, *args: str) -> CliOutcome:
        args = (*args, "--db", self.scene.url, "--token", self.scene.tokens[who])
        return run_cli(list(args), env=self.env)

    def fresh(self, stem: str) -> str:
        self.n += 1
        return str(self.workdir / f"{stem}-{self.n}")

    def close(self) -> None:
        for client in self.pages.values():
            client.close()


def _run(m: Matrix, name: str) -> str:
    return m.scene.runs[name]


def _gate(m: Matrix, name: str) -> str:
    return m.scene.gates[name]


def _api_on_run(method: str, run: str, ok: tuple[int, ...], tail: str = "") -> Attempt:
    """``METHOD /api/runs/{id}{tail}`` on the scene's run ``run``, successful with ``ok``."""
    return lambda m, who: _http(m.api(who, method, f"/api/runs/{_run(m, run)}{tail}"), ok)


def _cli_on_run(command: str, run: str) -> Attempt:
    """``converge COMMAND RUN`` on the scene's run ``run``, successful with exit code 0."""
    return lambda m, who: _cli(m.cli(who, command, _run(m, run)), (0,))


ATTEMPTS: dict[tuple[Action, str], Attempt] = {
    (Action.SEE_RUN, "api"): _api_on_run("GET", "open", (200,)),
    (Action.SEE_RUN, "page"): lambda m, who: _http(
        m.page(who).get(f"/runs/{_run(m, 'open')}"), (200,)
    ),
    (Action.SEE_RUN, "cli"): _cli_on_run("show", "open"),
    (Action.FOLLOW_RUN, "api"): _api_on_run("GET", "stopped", (200, 204), "/events"),
    (Action.FOLLOW_RUN, "cli"): _cli_on_run("watch", "stopped"),
    (Action.EXPORT_RUN, "cli"): lambda m, who: _cli(
        m.cli(who, "export", _run(m, "stopped"), "--proof", m.fresh("bundle") + ".json"), (0,)
    ),
    (Action.SEE_GATE, "api"): _api_on_run("GET", "open", (200,)),
    (Action.SEE_GATE, "cli"): _cli_on_run("events", "open"),
    (Action.READ_GATE, "api"): lambda m, who: _http(
        m.api(who, "GET", f"/api/gates/{_gate(m, 'open')}"), (200,)
    ),
    (Action.READ_GATE, "page"): lambda m, who: _http(
        m.page(who).get(f"/gates/{_gate(m, 'open')}"), (200,)
    ),
    (Action.READ_GATE, "cli"): lambda m, who: _cli(
        m.cli(who, "gates", _gate(m, "open"), "--history"), (0,)
    ),
    (Action.COMMENT, "api"): lambda m, who: _http(
        m.api(who, "POST", f"/api/gates/{_gate(m, 'open')}/comments", json={"text": f"by {who}"}),
        (201,),
    ),
    (Action.COMMENT, "page"): lambda m, who: _http(
        m.page(who).post(f"/gates/{_gate(m, 'open')}/comments", text=f"by {who}"), (303,)
    ),
    (Action.COMMENT, "cli"): lambda m, who: _cli(
        m.cli(who, "comment", _gate(m, "open"), f"by {who}"), (0,)
    ),
    (Action.START_RUN, "cli"): lambda m, who: _cli(
        m.cli(who, "run", str(m.scene.jobs["open"])), (10,)
    ),
    (Action.FORK_RUN, "api"): lambda m, who: _http(
        m.api(who, "POST", f"/api/runs/{_run(m, 'stopped')}/fork", json={"cycle": 0}), (202,)
    ),
    (Action.FORK_RUN, "page"): lambda m, who: _http(
        m.page(who).post(f"/runs/{_run(m, 'stopped')}/fork", cycle="0"), (303,)
    ),
    (Action.FORK_RUN, "cli"): lambda m, who: _cli(
        m.cli(who, "fork", _run(m, "stopped"), "--at-cycle", "0"), (0,)
    ),
    (Action.CANCEL_RUN, "api"): _api_on_run("POST", "queued", (202,), "/cancel"),
    (Action.CANCEL_RUN, "page"): lambda m, who: _http(
        m.page(who).post(f"/runs/{_run(m, 'queued')}/cancel"), (303,)
    ),
    (Action.CANCEL_RUN, "cli"): _cli_on_run("cancel", "queued"),
    (Action.DECIDE, "api"): lambda m, who: _http(
        m.api(
            who,
            "POST",
            f"/api/gates/{_gate(m, 'decide-api')}/decision",
            json={"approved": True, "reason": "fine"},
        ),
        (200,),
    ),
    (Action.DECIDE, "page"): lambda m, who: _http(
        m.page(who).post(
            f"/gates/{_gate(m, 'decide-page')}/decision", decision="approve", reason="fine"
        ),
        (303,),
    ),
    (Action.DECIDE, "cli"): lambda m, who: _cli(
        m.cli(who, "approve", _gate(m, "decide-cli"), "--reason", "fine"), (0, 10)
    ),
    (Action.MANAGE_PEOPLE, "cli"): lambda m, who: _cli(
        m.cli(who, "token", "add", f"new-{who}", "--role", "viewer"), (0,)
    ),
    (Action.PRUNE, "cli"): lambda m, who: _cli(m.cli(who, "prune", "--before", "2000-01-01"), (0,)),
    **accessfixtures.redact_attempts(_http, _run),
    (Action.READ_METRICS, "api"): lambda m, who: _http(m.api(who, "GET", "/metrics"), (200,)),
}
"""For each action and surface, one attempt as a person and what success looks like."""
HIDDEN: dict[tuple[Action, str], Attempt] = {
    (Action.SEE_RUN, "cli-hidden"): _cli_on_run("show", "hidden"),
}
"""``converge show`` of the run whose job shows its runs to ``legal`` only."""


@pytest.fixture(params=STORES)
def matrix(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Matrix]:
    with store_url_for(request.param, tmp_path) as url:
        scene = build_scene(url, tmp_path)
        with served_cli(url, tmp_path / "serve.log") as served:
            m = Matrix(scene, served, tmp_path)
            try:
                # the held run taken up by the server's pool, running until released
                deadline = time.monotonic() + 60
                while not scene.started():
                    assert time.monotonic() < deadline, served.output()[-3000:]
                    time.sleep(0.05)
                yield m
            finally:
                scene.release()
                m.close()


def _tried(m: Matrix, action: Action, surface: str, who: str) -> Outcome:
    """The attempt, checked: a refusal wrote nothing but one access-log row."""
    store = open_store(m.scene.url)
    try:
        before = counts(store, busy := accessfixtures.runs_in_flight(store))  # the pool's own
        outcome = {**ATTEMPTS, **HIDDEN}[(action, surface)](m, who)
        if outcome.allowed is False:
            after = counts(store, busy)
            assert after["access_log"] == before["access_log"] + 1, (action, surface, who)
            before.pop("access_log"), after.pop("access_log")
            assert after == before, f"{who} refused {action} on {surface} yet wrote: {after}"
        return outcome
    finally:
        store.close()


def test_every_role_on_every_surface_gets_the_answer_of_the_docs_table(matrix: Matrix) -> None:
    table = doc_table()
    wrong = []
    for action, surface in ATTEMPTS:
        for who, role in ROLES.items():
            want = table[action][Role(role)]
            got = _tried(matrix, action, surface, who)
            if got.allowed is not want:
                wrong.append(f"{role} {action} via {surface}: want {want}, got {got.detail}")
    assert wrong == []
    assert {s for _, s in ATTEMPTS} == {"api", "page", "cli"}
    assert {a for a, _ in ATTEMPTS} == set(Action)


# -- what a job's visible_to and a gate's approvers narrow, on every surface ----------
def _stream(m: Matrix, who: str, run_id: str, *, timeout: float = 10.0) -> tuple[int, str]:
    """The status and whole body of run ``run_id``'s event stream as ``who`` (a
    paused run's stream is read until ``timeout`` passes: what it sent so far)."""
    headers = {"Authorization": f"Bearer {m.scene.tokens[who]}"}
    url = f"{m.base}/api/runs/{run_id}/events"
    body: list[str] = []
    try:
        with httpx.stream("GET", url, headers=headers, timeout=timeout) as answer:
            if answer.status_code != 200:
                answer.read()
                return answer.status_code, answer.text
            for line in answer.iter_lines():
                body.append(line)
                if line.startswith("event: run_paused"):
                    break  # all of a paused run's events so far
    except httpx.ReadTimeout:
        pass
    return 200, "\n".join(body)


def test_a_jobs_visible_to_hides_its_runs_on_every_surface(matrix: Matrix) -> None:
    hidden = matrix.scene.runs["hidden"]

    for who in ("oscar", "victor"):
        assert matrix.api(who, "GET", f"/api/runs/{hidden}").status_code == 403
        listed = [r["run_id"] for r in matrix.api(who, "GET", "/api/runs").json()]
        assert hidden not in listed and matrix.scene.runs["open"] in listed
        assert matrix.page(who).get(f"/runs/{hidden}").status_code == 403
        assert _stream(matrix, who, hidden)[0] == 403
        assert _tried(matrix, Action.SEE_RUN, "cli-hidden", who).allowed is False
    for who in ("lena", "ada"):  # a member of legal, an admin
        assert matrix.api(who, "GET", f"/api/runs/{hidden}").status_code == 200
        assert _tried(matrix, Action.SEE_RUN, "cli-hidden", who).allowed is True
    runs = run_cli(
        ["runs", "--json", "--db", matrix.scene.url, "--token", matrix.scene.tokens["oscar"]]
    )
    assert hidden not in {r["run_id"] for r in json.loads(runs.stdout)}


def test_a_restricted_gate_shows_only_that_it_exists_and_its_status_on_every_surface(
    matrix: Matrix,
) -> None:
    run, gate = matrix.scene.runs["restricted"], matrix.scene.gates["restricted"]

    for who in ("oscar", "ada"):  # not among its approvers (an admin neither)
        seen = matrix.api(who, "GET", f"/api/runs/{run}")
        assert seen.status_code == 200 and SECRET not in seen.text
        [stub] = seen.json()["gates"]
        assert stub == {**{k: stub[k] for k in stub}, "gate_id": gate, "restricted": True}
        assert set(stub) <= {"gate_id", "run_id", "status", "cycle", "opened_at", "expires_at",
                             "decided_at", "restricted"}  # fmt: skip
        assert stub["status"] == "pending"
        status, streamed = _stream(matrix, who, run)
        assert status == 200 and "event: gate_opened" in streamed and SECRET not in streamed
        page = matrix.page(who).get(f"/runs/{run}")
        assert page.status_code == 200 and SECRET not in page.text and gate in page.text
        for args in (["show", run], ["show", run, "--json"], ["events", run, "--json"]):
            shown = matrix.cli(who, *args)
            assert shown.returncode == 0 and SECRET not in shown.stdout, shown
        assert matrix.api(who, "GET", f"/api/gates/{gate}").status_code == 403
        assert matrix.page(who).get(f"/gates/{gate}").status_code == 403
        comment = matrix.api(who, "POST", f"/api/gates/{gate}/comments", json={"text": "hi"})
        assert comment.status_code == 403
        decision = matrix.api(
            who, "POST", f"/api/gates/{gate}/decision", json={"approved": True, "reason": "ok"}
        )
        assert decision.status_code == 403 and "its approvers are legal" in decision.text
        listed = matrix.api(who, "GET", "/api/gates?status=all").json()
        assert gate not in {g["gate_id"] for g in listed}
    lena = matrix.api("lena", "GET", f"/api/runs/{run}")
    assert SECRET in lena.text and SECRET in _stream(matrix, "lena", run)[1]
    assert SECRET in matrix.cli("lena", "show", run).stdout
    assert matrix.api("lena", "GET", f"/api/gates/{gate}").status_code == 200
