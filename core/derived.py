"""The table of derived state: which change of the graph brings which derived structure up to date.

Apps ``declare`` their structures in their ``derived`` module; a cell per ``Change`` says how it
follows (``Kinds``, ``ReadTime``, ``Expires``, ``Unaffected``), plus a reconcile. Tests check every
cell; docs/architecture.md#the-table-of-derived-state shows ``markdown()``'s rendering.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from django.utils.module_loading import import_string


class Change(StrEnum):
    """A change of the graph, as a person or an operator makes it."""

    FOLLOW = "follow"
    UNFOLLOW = "unfollow"
    REQUEST_MADE = "follow request made"
    REQUEST_APPROVED = "request approved"
    REQUEST_REJECTED = "request rejected"
    REQUEST_WITHDRAWN = "request withdrawn"
    FOLLOWER_REMOVED = "follower removed"
    BLOCK = "block"
    UNBLOCK = "unblock"
    MUTE = "mute"
    UNMUTE = "unmute or expiry"
    PRIVACY_ON = "privacy on"
    PRIVACY_OFF = "privacy off"
    DEACTIVATION = "deactivation"
    REACTIVATION = "reactivation"
    DELETION = "deletion"


@dataclass(frozen=True)
class Kinds:
    """Re-derived after commit by the outbox entries of these kinds, recorded in the change's transaction."""

    names: tuple[str, ...]


@dataclass(frozen=True)
class ReadTime:
    """Decided at read time against the database by ``function`` (dotted path), whatever Redis holds."""

    function: str


@dataclass(frozen=True)
class Expires:
    """Kept for at most ``seconds`` by a cache, then derived again; ``why`` says why not at once."""

    seconds: int
    why: str


@dataclass(frozen=True)
class Unaffected:
    """The change cannot affect the structure, for the reason ``why``."""

    why: str


Cell = Kinds | ReadTime | Expires | Unaffected


@dataclass(frozen=True)
class Structure:
    """A structure derived from the graph: its ``cells`` and ``reconcile``, the dotted path of a
    ``(*, repair: bool) -> int`` that compares it with a rebuild, repairs unless told not to, and
    returns how much differed.
    """

    name: str
    app: str
    reconcile: str
    cells: Mapping[Change, Sequence[Cell]] = field(default_factory=dict)

    def missing(self) -> list[Change]:
        """The changes this structure has no cell for."""
        return [change for change in Change if not self.cells.get(change)]


_structures: dict[str, Structure] = {}


def kinds(*names: str) -> Kinds:
    """A ``Kinds`` cell of the outbox kinds ``names``."""
    return Kinds(names=tuple(names))


def declare(name: str, *, app: str, reconcile: str, cells: Mapping[Change, Cell | Sequence[Cell]]) -> Structure:
    """Declare the derived structure ``name`` of ``app`` (at import of the app's ``derived`` module).

    :param cells: ``{Change: cell or [cells]}``.
    :returns: the ``Structure``.
    :raises ValueError: ``name`` is declared already.
    """
    if name in _structures:
        raise ValueError(f"derived structure {name!r} is declared twice")
    normalised = {change: tuple(cell) if isinstance(cell, list | tuple) else (cell,) for change, cell in cells.items()}
    structure = Structure(name=name, app=app, reconcile=reconcile, cells=normalised)
    _structures[name] = structure
    return structure


def table() -> list[Structure]:
    """Every declared structure, in the order of the apps, after loading each app's ``derived`` module."""
    from django.utils.module_loading import autodiscover_modules  # needs the app registry: at call time

    autodiscover_modules("derived")
    return list(_structures.values())


def drift(*, repair: bool) -> dict[str, int]:
    """Run the reconcile of every structure.

    :param repair: False for a dry run.
    :returns: ``{structure name: drift found}``.
    """
    found = {}
    for structure in table():
        reconcile: Callable[..., int] = import_string(structure.reconcile)
        found[structure.name] = reconcile(repair=repair)
    return found


def _cell_text(cell: Cell) -> str:
    if isinstance(cell, Kinds):
        return ", ".join(f"`{name}`" for name in cell.names)
    if isinstance(cell, ReadTime):
        return f"read time: `{cell.function}`"
    if isinstance(cell, Expires):
        return f"within {cell.seconds} s (a cache): {cell.why}"
    return f"unaffected: {cell.why}"


def markdown() -> str:
    """The table as Markdown: a section per structure, a row per change."""
    lines: list[str] = []
    for structure in table():
        lines += [f"### {structure.name} ({structure.app})", "", f"Reconciled by `{structure.reconcile}`.", ""]
        lines += ["| change | brought up to date by |", "|---|---|"]
        for change in Change:
            cells = structure.cells.get(change, ())
            text = "; ".join(_cell_text(cell) for cell in cells) or "**missing**"
            lines.append(f"| {change.value} | {text} |")
        lines.append("")
    return "\n".join(lines)
