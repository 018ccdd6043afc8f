"""How ``converge approve`` / ``reject`` prove who decides: ``--token``,
``--sign-with``, ``--server`` (docs/audit.md, "Trust model").

- ``--token`` (or ``$CONVERGE_TOKEN``): the decider's API token; its person must
  be ``--by``. Required when the store says ``require-token``
  (:func:`converge.governance.cli_decider`).
- ``--sign-with KEY``: the decider's Ed25519 private key (``converge keys
  generate``); the decision is signed and the signature chained with it
  (:mod:`converge.governance`). The public key must be registered with
  ``converge user add NAME --public-key FILE``.
- ``--server URL``: decide through a running ``converge serve`` instead of the
  store: the statement to sign comes from the server, is signed here, and the
  signed decision is uploaded (:mod:`converge.web.signed`); the key never leaves
  this machine.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from audit.signing import Signer, load_signer
from converge.cli.markup import escape
from converge.cli.render import err, fail
from engine import ConvergeError

if TYPE_CHECKING:  # a type only: `converge gates` builds no decision model
    from engine import GateDecision

__all__ = ["Proof", "ServerOption", "SignWithOption", "TokenOption", "decide_remotely"]

TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="CONVERGE_TOKEN",
        show_envvar=True,
        help="Your API token (converge token add NAME): proves --by; required when the "
        "store says require-token (converge config set require-token true).",
    ),
]
SignWithOption = Annotated[
    Path | None,
    typer.Option(
        "--sign-with",
        help="Your Ed25519 private key (converge keys generate): sign the decision; "
        "verify checks it against the key of converge user add NAME --public-key FILE.",
    ),
]
ServerOption = Annotated[
    str | None,
    typer.Option(
        "--server",
        help="Decide through the converge serve at this URL (with --token), not the "
        "store: with --sign-with, signed here and uploaded; the key stays here.",
    ),
]


@dataclass(frozen=True, slots=True)
class Proof:
    """What a command-line decision carries to prove its decider: the token, the
    private key file that signs, the server to decide through (each None: not given)."""

    token: str | None = None
    sign_with: Path | None = None
    server: str | None = None

    def signer(self) -> Signer | None:
        """The signer of ``--sign-with`` (exits 2 when the file is no Ed25519 key)."""
        if self.sign_with is None:
            return None
        try:
            return load_signer(self.sign_with)
        except ConvergeError as exc:
            fail(f"--sign-with: {exc}")


_PENDING_EXIT = 10
"""Exit code while the gate still waits for approvals (as ``converge approve``)."""


def _detail(answer: Any) -> str:
    try:
        body = answer.json()
    except ValueError:
        return f"HTTP {answer.status_code}: {answer.text[:200]}"
    detail = body.get("detail") if isinstance(body, dict) else None
    return f"HTTP {answer.status_code}: {detail or body}"


def _checked(statement: Any, gate_id: str, decision: GateDecision) -> dict[str, Any]:
    """The server's statement, refused unless it is the decision asked for (a
    server cannot get another decision signed)."""
    if not isinstance(statement, dict):
        fail("the server's answer holds no statement to sign")
    asked = {
        "gate_id": gate_id,
        "by": decision.by,
        "approved": decision.approved,
        "reason": decision.reason,
        "answer": decision.value,
    }
    differs = sorted(k for k, v in asked.items() if statement.get(k) != v)
    if differs:
        fail(f"the server's statement is not this decision ({', '.join(differs)}): not signed")
    return statement


def decide_remotely(gate_id: str, decision: GateDecision, proof: Proof, as_json: bool) -> NoReturn:
    """``--server``: decide through the inbox's API as the token's person, signed
    here with ``--sign-with``; exit 0 when the gate is decided (its run resumes on
    the server's workers), 10 while a quorum still needs approvals, 2 when refused."""
    if not proof.token:
        fail("--server needs your API token: --token TOKEN or $CONVERGE_TOKEN")
    try:
        import httpx
    except ImportError as exc:
        fail(f"--server needs the 'web' extra: pip install 'converge-engine[web]' ({exc})")
    signer = proof.signer()
    assert proof.server is not None
    headers = {"Authorization": f"Bearer {proof.token.strip()}"}
    body = {"approved": decision.approved, "reason": decision.reason, "value": decision.value}
    try:
        with httpx.Client(base_url=proof.server.rstrip("/"), timeout=60) as client:
            if signer is None:
                answer = client.post(f"/api/gates/{gate_id}/decision", json=body, headers=headers)
            else:
                asked = client.post(f"/api/gates/{gate_id}/statement", json=body, headers=headers)
                if asked.status_code != 200:
                    fail(f"gate {gate_id}: {_detail(asked)}")
                statement = _checked(asked.json().get("statement"), gate_id, decision)
                signed = signer.sign(statement)
                answer = client.post(
                    f"/api/gates/{gate_id}/signed-decision",
                    json={"statement": signed},
                    headers=headers,
                )
    except httpx.HTTPError as exc:
        fail(f"cannot reach {proof.server}: {exc}")
    if answer.status_code not in (200, 202):
        fail(f"gate {gate_id}: {_detail(answer)}")
    data = answer.json()
    verb = "approved" if decision.approved else "rejected"
    how = " (signed)" if signer is not None else ""
    if as_json:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    elif answer.status_code == 200:
        err.print(escape(f"{verb} gate {gate_id} as {decision.by}{how}: more approvals needed"))
    else:
        run_id = data.get("run_id") or (data.get("run") or {}).get("run_id")
        done = f"{verb} gate {gate_id} as {decision.by}{how}; run {run_id} resumes on the server"
        err.print(escape(done))
    raise typer.Exit(_PENDING_EXIT if answer.status_code == 200 else 0)
