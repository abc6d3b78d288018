"""Refresh the README's figures of one run from what the analysis pipeline wrote into its run directory.

    python train.py hydra.run.dir=runs/docs && python docs/figures.py runs/docs

The figures are the run's own files (analysis/pipeline.py drew and recorded them); this only copies them to
docs/images/ under the names the README shows, so a figure in the docs is always one the code produces.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from storage.rundir import RunDir  # noqa: E402

IMAGES = ROOT / "docs" / "images"


def figures(run: RunDir) -> dict[str, Path]:
    """docs/images name -> the run's file it is."""
    return {
        "ablation.png": run.figure("ablation"),
        "dla.png": run.figure("dla"),
        "attention_layer0.png": run.attention_image("final", 0),
    }


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    run = RunDir(argv[0])
    wanted = figures(run)
    missing = [str(path) for path in wanted.values() if not path.is_file()]
    if run.status != "ok" or missing:
        why = f"missing {', '.join(missing)}" if missing else f"status {run.status or 'unknown'}"
        print(f"error: {run.path} is not a finished run with its analysis ({why})", file=sys.stderr)
        return 1
    for name, path in wanted.items():
        shutil.copyfile(path, IMAGES / name)
        print(f"{IMAGES / name} <- {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
