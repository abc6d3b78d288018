"""Verify adders to AdderBoard's standard: python verify.py RUN [RUN ...] [--digits N] [--json] [--show N]

Each run (a run directory or a .ckpt file) answers 10,000 random 10-digit pairs drawn with seed 2025 and the edge
cases that random pairs miss (every carry pattern, carry chains, zeros and nines, sum-9 cascades:
analysis/adderboard.py). With --digits N (a model that addresses N-digit problems, e.g. experiment=add_length), the
same at N digits, sampled (1,000 random pairs), plus runs of zeros and nines and operands of very different lengths.
A run passes with >= 99% of the random pairs and every edge case right; the failures are listed. Exit status: 0
every run passed, 1 some run failed, 2 a run could not be verified.
"""

from __future__ import annotations

import argparse
import json
import sys

from training.collector import exit_quickly
from training.signals import guard_command

DEVICE_TYPES = ("cpu", "cuda", "mps")  # what --device may name (auto picks one of them), cuda:1 included


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python verify.py", description=__doc__.split("\n\n")[0].split(": ", 1)[1],
        epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run directories or .ckpt files")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    parser.add_argument("--show", type=int, default=5, metavar="N", help="failures listed per suite (default 5)")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, mps or auto")
    parser.add_argument("--digits", type=int, default=10, metavar="N", help="operand width (default 10, AdderBoard's)")
    return parser


def check_adder(calc, run: str, digits: int) -> None:
    """ValueError unless ``calc`` adds numbers of ``digits`` digits."""
    if "+" not in calc.fmt.operators or calc.longest < digits:
        reach = f" (it addresses up to {calc.longest} digits)" if "+" in calc.fmt.operators else ""
        raise ValueError(
            f"{run}: {calc.describe()}{reach}; verification is for models that add {digits}-digit numbers "
            " (python train.py experiment=add10, or experiment=add_length)"
        )


def report(run: str, results, show: int) -> None:
    from data.problems import MASTERED

    passed = all(r.passed for r in results)
    print(f"{run}: {'PASS' if passed else 'FAIL'}")
    for r in results:
        need = f">= {MASTERED:.0%}" if r.name == "random pairs" else "all"
        mark = "ok" if r.passed else "FAIL"
        print(f"  {r.name:<16} {r.right:>6,} / {r.n:<6,} {r.exact_match:8.2%}  (need {need})  {mark}")
        for f in r.failures[:show]:
            written = f["model"] if f["model"] is not None else f"? ({f['model_text']!r})"
            print(f"      {f['problem']} = {f['truth']}, model: {written}")
        if len(r.failures) > show:
            print(f"      ... and {len(r.failures) - show} more")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from analysis.adderboard import verify
    from model.checkpoint import CheckpointError, load_calculator
    from model.device import DeviceError, resolve_device
    from training.collector import alive_frozen
    from training.threads import use_threads

    use_threads()  # one thread, or OMP_NUM_THREADS (training/threads.py)

    try:  # once, before any checkpoint is read: a device torch names but cannot compute on here is one line
        device = resolve_device(args.device)
        if device.type not in DEVICE_TYPES:
            raise DeviceError(args.device, "not a device verify.py computes on")
    except DeviceError as e:
        print(f"error: --device {args.device}: {e.why}; use --device cpu (or cuda, mps, auto)", file=sys.stderr)
        return 2

    if not 1 <= args.digits <= 10_000:
        print(f"error: --digits {args.digits}: must be a width from 1 to 10,000 (e.g. --digits 100)", file=sys.stderr)
        return 2
    verdicts, status = {}, 0
    for run in args.runs:
        try:
            calc = load_calculator(run, device)
            check_adder(calc, run, args.digits)
        except (CheckpointError, DeviceError, ValueError) as e:
            print(f"error: {e}", file=sys.stderr)
            status = 2
            continue
        with alive_frozen():  # training/collector.py: the collector's scans skip what the imports made
            results = verify(calc, digits=args.digits)
        passed = all(r.passed for r in results)
        status = max(status, 0 if passed else 1)
        verdicts[run] = {
            "passed": passed,
            "suites": {
                r.name: {"n": r.n, "right": r.right, "passed": r.passed, "failures": r.failures} for r in results
            },
        }
        if not args.json:
            report(run, results, args.show)
    if args.json:
        print(json.dumps(verdicts, indent=1))
    return status


if __name__ == "__main__":
    guard_command()  # Ctrl-C or SIGTERM from here on (main()'s imports too): one line, exit 130 / 143
    exit_quickly(main())
