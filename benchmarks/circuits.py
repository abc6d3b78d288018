"""How long the circuit analysis takes on a trained run, step by step: a table, or JSON.

    python -m benchmarks.circuits runs/<run> [--json] [--repeat 3]

Each step is timed as the pipeline runs it (analysis/metrics/patching.py, circuit.py, circuit_roles.py), on the
run's own model, with the commands' threads (training/threads.py: one, or OMP_NUM_THREADS); the median of --repeat
runs is reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

STEPS = ("pairs", "head patching", "head attribution", "edge patching", "edge attribution", "circuit search", "roles")


def measure(module) -> dict[str, float]:
    """Seconds per step of one circuit analysis of ``module``, and their total."""
    from analysis.engine.pair_runs import edge_attribution, edge_patching, head_attribution, head_patching
    from analysis.metric import Context
    from analysis.metrics.ablation import Ablation
    from analysis.metrics.circuit import Circuits, DigitCircuit, find_circuit
    from analysis.metrics.circuit_roles import CircuitRoles
    from analysis.metrics.roles import Roles

    seconds = dict.fromkeys(STEPS, 0.0)

    def timed(step, fn, *args):
        started = time.perf_counter()
        out = fn(*args)
        seconds[step] += time.perf_counter() - started
        return out

    ctx = Context(module, None, None, None, tolerance=0.01, results={Ablation: [], Roles: []})  # circuits alone
    runs = timed("pairs", lambda: ctx.digit_runs)
    graph, circuits = ctx.graph, []
    for r in runs:
        timed("head patching", head_patching, module.net, r)
        timed("head attribution", head_attribution, module.net, r)
        lost = timed("edge patching", edge_patching, graph, r)
        attributed = timed("edge attribution", edge_attribution, graph, r)
        circuits.append(DigitCircuit(r, lost, attributed, timed("circuit search", find_circuit, graph, r, lost)))
    ctx.results[Circuits] = circuits
    timed("roles", CircuitRoles().compute, ctx)
    return seconds | {"total": sum(seconds.values())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a run directory or checkpoint")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    import torch

    from training.threads import use_threads

    use_threads()  # as analyse.py computes

    from model.checkpoint import CheckpointError
    from training.load import load_module

    try:
        module, ckpt = load_module(args.run)
    except CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    with torch.no_grad():
        trials = [measure(module) for _ in range(max(1, args.repeat))]
    median = {step: statistics.median(t[step] for t in trials) for step in trials[0]}
    record = {"checkpoint": str(ckpt), "threads": torch.get_num_threads(), "repeat": len(trials), "seconds": median}
    if args.json:
        print(json.dumps(record, indent=2))
        return 0
    print(f"circuit analysis of {ckpt} ({record['threads']} threads, median of {len(trials)})")
    print(f"{'step':<18} {'seconds':>8}")
    for step, s in median.items():
        print(f"{step:<18} {s:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
