"""``mteb-lrd run --executor ray``: the options and the hand-over to :mod:`mteb_lrd.runners.distributed`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from mteb_lrd.runners.run_config import UnitConfig

__all__ = ["add_executor_options", "run_on_ray"]


def add_executor_options(parser: argparse.ArgumentParser) -> None:
    """``--executor``, ``--ray-address``, ``--gpus-per-unit``, ``--cpus-per-unit``, ``--max-retries``."""
    parser.add_argument("--executor", choices=("local", "ray"), default="local",
                        help="local: models one after another in this process; ray: every (model, task) "
                        "unit as its own Ray task (pip install 'mteb-lrd[ray]')")  # fmt: skip
    parser.add_argument("--ray-address", default=None, metavar="ADDR",
                        help="Ray cluster to join (auto, host:6379, ray://host:10001); default: start a "
                        "local Ray")  # fmt: skip
    parser.add_argument("--gpus-per-unit", type=float, default=0, help="GPUs per unit with --executor ray")
    parser.add_argument("--cpus-per-unit", type=float, default=1, help="CPUs per unit with --executor ray")
    parser.add_argument("--max-retries", type=int, default=2,
                        help="re-runs of a unit whose Ray worker dies (default 2)")  # fmt: skip


def unit_config(args: argparse.Namespace, options: dict) -> UnitConfig:
    """What every model run of ``mteb-lrd run`` shares, for either executor: results folder, layer
    options (with ``--cache-dir``, a folder every node reaches, shared by the units), batch size,
    device, overwrite, cache choice, ``--name`` and ``--revision``."""
    from mteb_lrd.runners.run_config import UnitConfig

    if args.cache_dir is not None:
        options = {**options, "cache_dir": str(args.cache_dir)}
    return UnitConfig(args.results, options, args.batch_size, args.device, args.overwrite,
                      cache=not args.no_cache, name=args.name, revision=args.revision)  # fmt: skip


def run_on_ray(args: argparse.Namespace, models: list[str], options: dict) -> int:
    """Run every (model, task) unit on Ray; returns 1 when a unit failed, else 0."""
    from mteb_lrd.runners.distributed import RayResources, run_units, units_for

    config = unit_config(args, options)
    resources = RayResources(address=args.ray_address, gpus_per_unit=args.gpus_per_unit,
                             cpus_per_unit=args.cpus_per_unit, max_retries=args.max_retries)  # fmt: skip
    outcomes = run_units(units_for(models, [*args.task, *args.local_task]), config, resources)
    failed = [o for o in outcomes if o.status == "failed"]
    done = sum(o.status == "done" for o in outcomes)
    print(f"{done} units run, {len(outcomes) - done - len(failed)} skipped, {len(failed)} failed; "
          f"results in {args.results}")  # fmt: skip
    return 1 if failed else 0
