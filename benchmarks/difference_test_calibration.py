"""Size and power of the test behind "score a predicts better than score b" (a measurement).

:func:`mteb_lrd.metrics.permutation.spearman_difference` swaps a model's two ranks and ranks again;
its p-value is exact only under "each model's two ranks are exchangeable". This simulates panels
like the selection study's (n models, 7 tasks; a model's quality drives its main score on every
task) and prints how often each test rejects at α = 0.05, beside the straightforward sign flip of
the per-model terms ``(r_a − r_b)·r_y`` that does not rank again:

- ``equal``: a and b are equally good, noisy readings of the quality (b through ``exp``: another
  scale); a level test rejects about 5 %.
- ``noise``: neither says anything about the quality.
- ``better``: a is a much better reading than b (power).

    python -m benchmarks.difference_test_calibration --reps 1000
"""

from __future__ import annotations

import argparse

import numpy as np

from mteb_lrd.metrics.permutation import sign_flip, spearman_difference, unit_centred_ranks

TASKS = 7
ALPHA = 0.05


def panel(scenario: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(a, b, y)``, each ``(tasks, n)``, for one simulated panel."""
    quality = rng.standard_normal(n)
    y = quality + 0.5 * rng.standard_normal((TASKS, n))
    if scenario == "noise":
        return rng.standard_normal((TASKS, n)), rng.standard_normal((TASKS, n)), y
    spread_a, spread_b = (0.7, 0.7) if scenario == "equal" else (0.3, 1.5)
    a = quality + spread_a * rng.standard_normal(n) + 0.2 * rng.standard_normal((TASKS, n))
    b = np.exp(quality + spread_b * rng.standard_normal(n) + 0.2 * rng.standard_normal((TASKS, n)))
    return a, b, y


def naive_p(a: np.ndarray, b: np.ndarray, y: np.ndarray) -> float:
    """The sign flip of the per-model terms: swapping a model's ranks taken as flipping its term."""
    terms = ((unit_centred_ranks(a) - unit_centred_ranks(b)) * unit_centred_ranks(y)).mean(axis=0)
    return sign_flip(terms).p


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reps", type=int, default=1000, help="simulated panels per row (default 1000)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"share of {args.reps} simulated panels rejected at alpha = {ALPHA} ({TASKS} tasks)")
    print(f"{'scenario':<10}{'models':>7}{'swap and rank again':>22}{'sign flip of terms':>22}")
    for scenario in ("equal", "noise", "better"):
        for n in (6, 9):
            rejected = np.zeros(2)
            for _ in range(args.reps):
                a, b, y = panel(scenario, n, rng)
                rejected += np.array([spearman_difference(a, b, y).p, naive_p(a, b, y)]) < ALPHA
            ours, naive = rejected / args.reps
            print(f"{scenario:<10}{n:>7}{ours:>22.3f}{naive:>22.3f}")


if __name__ == "__main__":
    main()
