"""Run the end-of-run analysis again on a finished run: every registered analysis (attention maps, ablation, pruning,
direct logit attribution, activation patching, circuits, ...), with the run's own settings.

    python analyse.py runs/<run>             the run's tables, figures, results.json and report.html, rewritten
    python analyse.py runs/<run> --problems 500
    python analyse.py                        the newest finished run under the current directory

Useful for a run recorded before an analysis existed, or after an analysis was interrupted. The run directory is
read as data: its config.yaml gives values (the data split, the analysis settings), never code to build.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import textwrap
from pathlib import Path

from training.collector import exit_quickly
from training.signals import guard_command

HELP = __doc__.split("\n\n")[0]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=HELP, epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("run", nargs="?", help="a run directory or its checkpoint (default: the newest finished run)")
    parser.add_argument("--problems", type=int, help="test problems the analyses are measured on (default: the run's)")
    parser.add_argument("--no-circuits", action="store_true", help="skip the circuits (path patching of every edge)")
    return parser.parse_args(argv)


def settings(run) -> tuple[dict, dict]:
    """The run's data and analysis values from its config.yaml ({} each when it has none), ``_target_`` dropped;
    read by the run directory's reader (bounded: storage/rundir.py), as written (an interpolation is not followed).
    A damaged file is a RunFileError, a value of the wrong kind a ValueError."""
    from omegaconf import OmegaConf

    config = run.read_yaml(run.config)
    cfg = OmegaConf.to_container(config) if config is not None else {}

    def values(part: str) -> dict:
        found = cfg.get(part) or {}
        if not isinstance(found, dict):
            raise ValueError(f"{part} is not a mapping of settings ({type(found).__name__})")
        return {k: v for k, v in found.items() if k != "_target_"}

    return values("data"), values("analysis")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    from data.sums import SumFormat
    from model.checkpoint import CheckpointError, load_calculator, newest_checkpoint
    from storage.rundir import RunDir, RunDirError
    from training.collector import alive_frozen
    from training.threads import use_threads

    use_threads()  # one thread, or OMP_NUM_THREADS (training/threads.py)

    try:  # the network and its format, without the training's Lightning module (seconds of imports)
        calc = load_calculator(args.run if args.run else newest_checkpoint(Path.cwd()))
    except CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if isinstance(calc.fmt, SumFormat):  # a sum of many operands (data/sums.py)
        print(
            f"error: {calc.path}: the head analyses read a op b problems, and this model adds {calc.fmt.terms} "
            "operands; score it with  python calc.py --ckpt RUN --eval FILE",
            file=sys.stderr,
        )
        return 2
    run = RunDir.of_checkpoint(calc.path)
    try:
        results = (run.read_json(run.results) or {}) if run else {}
    except RunDirError as e:  # a damaged results.json (RunFileError: bounded in size, depth and kind)
        print(f"error: {e}", file=sys.stderr)
        return 2
    if run is None or results.get("status") != "ok":
        where = run.path if run else calc.path
        print(
            f"error: {where}: not a finished run (results.json status ok); analyse a run that finished training",
            file=sys.stderr,
        )
        return 2
    try:
        data, analysis = settings(run)
        run.check_writable()  # before the analysis runs, not after: its results would be lost
    except RunDirError as e:  # a damaged config.yaml (RunFileError), or a directory that cannot be written
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"error: {run.config}: {e}", file=sys.stderr)
        return 2
    from analysis.html_report import write_run_report
    from analysis.pipeline import HeadAnalysis
    from data.build import arithmetic_data, data_settings, format_dict

    try:
        data = {k: v for k, v in data.items() if k in ("n_test", "val_fraction", "test_fraction", "seed", "b_digits")}
        drawn = arithmetic_data(data_settings(**(format_dict(calc.fmt) | data)))
        calc.fmt, test_set = drawn.fmt, drawn.held_out_set("test")  # the format with its draws (a short b)
        analysis = HeadAnalysis(
            **{**analysis, "enabled": True, "circuits": not args.no_circuits}
            | ({"n_problems": args.problems} if args.problems else {})
        )
        analysis.probes_for(calc)  # probes the model cannot be asked (config.yaml's analysis.probes): now, not later
    except (ValueError, TypeError) as e:
        print(f"error: {run.config}: {e}", file=sys.stderr)
        return 2
    try:
        with alive_frozen():  # training/collector.py: the collector's scans skip what the imports made
            found = analysis.run(calc, test_set, run)
            run.write_results(results | found)
            page = write_run_report(run.path)
    except OSError as e:  # the disk filled up, or the directory became read-only, while the analysis wrote
        print(
            f"error: cannot write in {run.path} ({e.strerror or e}); free space or make it writable, and analyse again",
            file=sys.stderr,
        )
        return 2
    except RunDirError as e:  # a directory where the analysis writes a file (storage/rundir.py: write_atomically)
        print(f"error: {e}", file=sys.stderr)
        return 2
    width = max(shutil.get_terminal_size().columns, 60)  # each row wrapped to the terminal, under its label
    for label, text in found["analysis_summary"]:
        print(textwrap.fill(text, width, initial_indent=f"{label:>24}  ", subsequent_indent=" " * 26))
    print(f"analysed in {found['analysis_seconds']:.1f} s; tables and figures in {run.path}; page: {page}")
    return 0


if __name__ == "__main__":
    guard_command()  # Ctrl-C or SIGTERM from here on (main()'s imports too): one line, exit 130 / 143
    try:
        exit_quickly(main())
    except KeyboardInterrupt:
        print(file=sys.stderr)
        sys.exit(130)
