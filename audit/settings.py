"""Store settings (``converge config set NAME VALUE``), kept in ``converge_meta``.

``retention-days`` (a number of days, or ``off``, the default) is what
``converge prune`` removes when given no date (docs/audit.md, "Retention").
``require-token`` (``true``, ``false`` or ``auto``, the default:
true once anyone is registered with ``converge user add``): the command line must
prove who acts with their API token (``--token`` or ``$CONVERGE_TOKEN``), decisions
(``converge approve`` / ``reject``, or a signature instead) and runs (``run``,
``submit``, ``resume``, ``fork``) alike, so it cannot decide or run as someone else,
nor vote twice for a quorum under two names (``converge.governance``). A setting
is not chained: someone able to write the database can change it (docs/audit.md,
"Trust model"), which is why signed decisions exist.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import delete, insert, select

from audit.core import StoreCore
from audit.tables import meta
from engine.errors import ConfigurationError

__all__ = [
    "CHAIN_FORMAT",
    "REQUIRE_TOKEN",
    "RETENTION_DAYS",
    "SETTINGS",
    "Setting",
    "get_setting",
    "set_setting",
    "settings",
]

_PREFIX = "setting:"

REQUIRE_TOKEN = "require-token"
"""The command line proves who decides and runs with a token (``true`` / ``false`` /
``auto``: once anyone is registered)."""


def _boolean_or_auto(text: str) -> str:
    value = text.strip().lower()
    if value in ("true", "yes", "on", "1"):
        return "true"
    if value in ("false", "no", "off", "0"):
        return "false"
    if value == "auto":
        return "auto"
    raise ValueError(f"{text!r} is not true, false or auto")


RETENTION_DAYS = "retention-days"
"""``converge prune``'s default: stopped runs older than this many days are pruned
(``off``, the default: none unless ``--before`` or ``--keep-days`` is given)."""


def _days_or_off(text: str) -> str:
    value = text.strip().lower()
    if value in ("off", "none", "0", ""):
        return "off"
    if not value.isdigit():
        raise ValueError(f"{text!r} is not a whole number of days or off")
    return str(int(value))


CHAIN_FORMAT = "chain-format"
"""The chain format of the runs started from now on: ``1`` (facts chained by their
content, the default) or ``2`` (by salted commitments, so that a fact's content can
be redacted: docs/audit-format.md). Every run keeps the format it started with."""


def _chain_format(text: str) -> str:
    value = text.strip()
    if value not in ("1", "2"):
        raise ValueError(f"{text!r} is not a chain format (1 or 2)")
    return value


@dataclass(frozen=True, slots=True)
class Setting:
    """A store setting: its ``name``, ``default``, what it does (``help``) and the
    ``parse`` that turns given text into the stored value (``ValueError``)."""

    name: str
    default: str
    help: str
    parse: Callable[[str], str]


SETTINGS: dict[str, Setting] = {
    CHAIN_FORMAT: Setting(
        CHAIN_FORMAT,
        "1",
        "the chain format of runs started from now on: 1 (facts chained by their "
        "content) or 2 (by salted commitments: facts can be redacted); a run keeps its own",
        _chain_format,
    ),
    REQUIRE_TOKEN: Setting(
        REQUIRE_TOKEN,
        "auto",
        "approve / reject / run / submit / resume / fork need the token of who acts "
        "(--token or $CONVERGE_TOKEN); auto: once anyone is registered (converge user add)",
        _boolean_or_auto,
    ),
    RETENTION_DAYS: Setting(
        RETENTION_DAYS,
        "off",
        "converge prune's default: stopped runs older than this many days are pruned "
        "(off: only with --before or --keep-days)",
        _days_or_off,
    ),
}
"""Every setting, by name."""


def _known(name: str) -> Setting:
    setting = SETTINGS.get(name)
    if setting is None:
        raise ConfigurationError(
            f"no setting {name!r}: the settings are {', '.join(sorted(SETTINGS))}"
        )
    return setting


def get_setting(store: StoreCore, name: str) -> str:
    """The value of setting ``name`` (its default when never set); ``ConfigurationError``
    for an unknown name."""
    setting = _known(name)
    with store.transaction(write=False) as conn:
        value = conn.execute(select(meta.c.value).where(meta.c.key == _PREFIX + name)).scalar()
    return setting.default if value is None else str(value)


def set_setting(store: StoreCore, name: str, value: str) -> str:
    """Set ``name`` to ``value`` and return the value stored (``true`` for ``yes``...).
    Raises ``ConfigurationError`` for an unknown name or a value it does not take."""
    setting = _known(name)
    try:
        stored = setting.parse(value)
    except ValueError as exc:
        raise ConfigurationError(f"setting {name}: {exc}") from exc
    with store.transaction() as conn:
        conn.execute(delete(meta).where(meta.c.key == _PREFIX + name))
        conn.execute(insert(meta).values(key=_PREFIX + name, value=stored))
    store.reread_settings()
    return stored


def settings(store: StoreCore) -> dict[str, str]:
    """Every setting's value (defaults included), by name."""
    return {name: get_setting(store, name) for name in sorted(SETTINGS)}
