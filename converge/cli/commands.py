"""The typer classes every ``converge`` command group is built from.

typer's rich help (0.2x) prints a value placeholder beside every option, ``<bool>``
for a flag too (``--help <bool>``), as if a flag took a value; and it keeps the
line breaks of a docstring's first paragraph in the command list, so a summary
written over two source lines is shown broken mid-sentence; its later paragraphs
keep those line breaks in the help itself (a narrow terminal broke each line twice:
where it wraps, and where the source did). :class:`CommandGroup` (a ``typer.Typer``)
gives its commands :class:`Command` and its groups :class:`Group`, which show flags
bare, a command's summary as one paragraph and each paragraph of its help flowed
(:func:`flowed`), so all wrap to the terminal.

:func:`option_groups` lets commands that take the same options declare them once,
as the fields of a dataclass (:class:`converge.cli.budgets.BudgetFlags`).

typer (0.2x) coerces each parameter's value, a default's ``None`` too, through a
pydantic ``TypeAdapter`` it builds on the command's first call: about 10 ms of CPU a
parameter, and pydantic's schema machinery imported, for ``converge runs --db X``'s
eleven. :func:`defer_coercion` skips building one where it would hand the value back
unchanged (no value; a text parameter given text); any other value is coerced by
typer's own, built then.

The root group is a :class:`LazyGroup`: it knows its commands from the table
:data:`converge.cli.catalog.COMMANDS` and imports a command's module only when that
command runs (or its own help is asked), so ``converge runs`` does not import what
``converge serve`` or ``converge fork`` need.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import typing
from collections.abc import Callable, Collection
from typing import Any, TypeVar

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup, TyperOption
from typer.models import DefaultPlaceholder, TyperInfo

try:  # typer >= 0.2x: coercion through pydantic (see defer_coercion)
    from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
except ImportError:  # pragma: no cover - an older typer coerces through click
    RuntimeParam = None  # type: ignore[assignment,misc]

__all__ = [
    "Command",
    "CommandGroup",
    "Group",
    "LazyGroup",
    "bare_flags",
    "defer_coercion",
    "flowed",
    "one_command",
    "option_groups",
    "sub_commands",
    "summary",
]


def summary(help_text: str | None) -> str | None:
    """The first paragraph of ``help_text`` on one line (None when there is none)."""
    if not help_text:
        return None
    first = inspect.cleandoc(help_text).split("\n\n", 1)[0]
    return " ".join(first.split()) or None


def flowed(help_text: str | None) -> str | None:
    """``help_text`` with each paragraph on one line (the source's line breaks inside
    a paragraph dropped), paragraphs still apart; a paragraph whose later lines are
    indented or start a list item (``- ``, ``* ``) is kept as written."""
    if not help_text:
        return help_text
    paragraphs = inspect.cleandoc(help_text).split("\n\n")
    return "\n\n".join(_flow(p) for p in paragraphs)


def _flow(paragraph: str) -> str:
    lines = paragraph.split("\n")
    if any(line.startswith((" ", "- ", "* ")) for line in lines[1:]):
        return paragraph
    return " ".join(line.strip() for line in lines)


def bare_flags(params: list[Any]) -> list[Any]:
    """``params`` with each flag's value placeholder blanked (an empty metavar), so
    the help shows ``--json`` and not ``--json <bool>``; other options keep theirs."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
    return params


def defer_coercion(params: list[Any]) -> list[Any]:
    """``params`` (typer's click parameters), each set to coerce its value without a
    pydantic ``TypeAdapter`` where typer's would return it unchanged: ``None`` (no value
    given, no default) and a ``str`` given to a text parameter without a ``parser``;
    another value is coerced by typer's own coercion, built at that moment. A parameter
    of a typer without this machinery is left as it is."""
    if RuntimeParam is None:  # pragma: no cover - an older typer
        return params
    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        if isinstance(descriptor, TypeDescriptor) and getattr(param, "_runtime_param", 0) is None:
            param._runtime_param = _Deferred(
                parameter_info=descriptor.parameter_info,
                annotation=descriptor.annotation,
                descriptor=descriptor,
            )
    return params


if RuntimeParam is not None:

    @dataclasses.dataclass(frozen=True)
    class _Deferred(RuntimeParam):
        """typer's coercion of one parameter, built when a value needs it: ``None`` is
        handled by ``RuntimeParam.coerce`` (``None``, or ``()`` for several values), and
        text for a text parameter is returned as typer's str adapter returns it."""

        descriptor: TypeDescriptor

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            plain = (
                self.annotation is str
                and self.parameter_info.parser is None
                and self.descriptor.file_annotation is None
            )
            if plain and type(value) is str:
                return value
            param._runtime_param = built = build_runtime_param(self.descriptor)
            return built._coerce_value(value, param=param, ctx=ctx)


R = TypeVar("R")


class _Flowed:
    """What :class:`Command` and :class:`Group` add to typer's click classes: the
    help's paragraphs flowed, a one-paragraph summary, flags without placeholders,
    values coerced without pydantic where that changes nothing (:func:`defer_coercion`)."""

    help: str | None
    short_help: str | None
    params: list[Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        defer_coercion(self.params)
        self.help = flowed(self.help)
        if self.short_help is None:
            self.short_help = summary(self.help)

    def get_params(self, ctx: Any) -> list[Any]:
        """The parameters, ``--help`` (and a group's ``--version``) included, flags
        shown bare, ``--help`` coerced as the others (:func:`defer_coercion`)."""
        return defer_coercion(bare_flags(super().get_params(ctx)))  # type: ignore[misc]


class Command(_Flowed, TyperCommand):
    """A ``converge`` command: flags without placeholders, a one-paragraph summary,
    its help's paragraphs flowed."""


class Group(_Flowed, TyperGroup):
    """A ``converge`` command group (the root and ``token``), as :class:`Command`."""


class CommandGroup(typer.Typer):
    """``typer.Typer`` whose commands are :class:`Command` and whose group is :class:`Group`.

    Takes the same arguments as ``typer.Typer``.
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cls", Group)
        super().__init__(**kwargs)

    def command(  # type: ignore[override]
        self, name: str | None = None, **kwargs: Any
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """As ``typer.Typer.command``, with :class:`Command` as the default ``cls``."""
        kwargs.setdefault("cls", Command)
        return super().command(name, **kwargs)


def option_groups(
    *, leave_out: Collection[str] = ()
) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """A decorator for a command whose parameter is annotated with a dataclass (an
    option group: each field annotated with a typer option, with its default): typer
    sees the group's options in that parameter's place, in the fields' order (but
    the fields named in ``leave_out``, which keep their default), and the command
    is called with the group built from them.

    Raises ``TypeError`` when a field's name is already a parameter's."""

    def decorate(command: Callable[..., R]) -> Callable[..., R]:
        signature = inspect.signature(command, eval_str=True)
        params: list[inspect.Parameter] = []
        groups: dict[str, tuple[type[Any], list[str]]] = {}
        for param in signature.parameters.values():
            group = param.annotation
            if not (isinstance(group, type) and dataclasses.is_dataclass(group)):
                params.append(param)
                continue
            hints = typing.get_type_hints(group, include_extras=True)
            fields = [f for f in dataclasses.fields(group) if f.name not in leave_out]
            groups[param.name] = (group, [f.name for f in fields])
            params += [
                inspect.Parameter(f.name, param.kind, default=f.default, annotation=hints[f.name])
                for f in fields
            ]
        names = [p.name for p in params]
        if len(set(names)) != len(names):
            raise TypeError(f"{command.__name__}: an option group repeats a parameter's name")

        @functools.wraps(command)
        def with_groups(**kwargs: Any) -> R:
            for name, (group, fields) in groups.items():
                kwargs[name] = group(**{f: kwargs.pop(f) for f in fields})
            return command(**kwargs)

        with_groups.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        with_groups.__annotations__ = {p.name: p.annotation for p in params}
        return with_groups

    return decorate


def sub_commands(app: typer.Typer, rich_markup_mode: Any = None) -> dict[str, Any]:
    """The click commands of ``app`` (a command module's ``typer.Typer``) by name, built
    as ``converge``'s root builds the commands of a sub-app added without a name."""
    mode = app.rich_markup_mode if rich_markup_mode is None else rich_markup_mode
    if isinstance(mode, DefaultPlaceholder):
        mode = mode.value
    group = typer.main.get_group_from_info(
        TyperInfo(app),
        pretty_exceptions_short=app.pretty_exceptions_short,
        suggest_commands=True,
        rich_markup_mode=mode,
    )
    return dict(group.commands)


def one_command(app: typer.Typer, name: str, rich_markup_mode: Any = None) -> Any:
    """The click command ``name`` of ``app``, built as :func:`sub_commands` builds it
    but alone (its module's other commands are not); None when ``name`` is not one of
    ``app``'s own commands (a sub-group such as ``token``: :func:`sub_commands`)."""
    mode = app.rich_markup_mode if rich_markup_mode is None else rich_markup_mode
    if isinstance(mode, DefaultPlaceholder):
        mode = mode.value
    for info in app.registered_commands:
        callback = info.callback
        if callback is None:
            continue
        if (info.name or typer.main.get_command_name(callback.__name__)) == name:
            return typer.main.get_command_from_info(
                info, pretty_exceptions_short=app.pretty_exceptions_short, rich_markup_mode=mode
            )
    return None


class LazyGroup(Group):
    """The root ``converge`` group: its commands are those of
    :data:`converge.cli.catalog.COMMANDS`, each imported from its module when it is
    resolved (``converge NAME``, ``converge NAME --help``); the root's help lists
    them from the table's one-line summaries, importing none. ``commands`` (all of
    them, built) imports every module."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._built: dict[str, Any] = {}
        self._listing = False
        super().__init__(*args, **kwargs)

    @property  # type: ignore[override]
    def commands(self) -> dict[str, Any]:
        """Every command, built (imports every command module), in the help's order."""
        from converge.cli.catalog import COMMANDS

        for entry in COMMANDS:
            self._build(entry.name)
        return {e.name: self._built[e.name] for e in COMMANDS if e.name in self._built}

    @commands.setter
    def commands(self, value: dict[str, Any]) -> None:
        self._built.update(value or {})

    def list_commands(self, ctx: Any) -> list[str]:
        """The commands' names, in the help's order (none imported)."""
        from converge.cli.catalog import COMMANDS

        return [entry.name for entry in COMMANDS]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """The command ``cmd_name``, its module imported (None when there is none); while
        the root's help is written, a stand-in with the table's summary."""
        if self._listing:
            from converge.cli.catalog import COMMANDS

            entry = next((e for e in COMMANDS if e.name == cmd_name), None)
            if entry is None:
                return None
            return TyperCommand(name=entry.name, short_help=entry.summary, help=entry.summary)
        return self._build(cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """The root's help: its options and the commands listed from the table."""
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def _build(self, name: str) -> Any:
        if name in self._built:
            return self._built[name]
        from converge.cli.catalog import COMMANDS

        entry = next((e for e in COMMANDS if e.name == name), None)
        if entry is None:
            return None
        app = importlib.import_module(f"converge.cli.{entry.module}").app
        command = one_command(app, name, self.rich_markup_mode)
        if command is not None:  # its siblings (approve beside gates...) are not built
            self._built[name] = command
            return command
        for built_name, built in sub_commands(app, self.rich_markup_mode).items():
            self._built.setdefault(built_name, built)
        return self._built.get(name)
