"""The notebooks executed top to bottom in a fresh kernel (as tests/test_notebooks.py runs them): how long each
took here and how many steps each of its trainings ran, the figures the README and docs/notebooks.md state."""

from __future__ import annotations

import json
import time
from pathlib import Path

from .common import ROOT, not_measured, secs, wrap

COMMAND = "jupyter nbconvert --to notebook --execute notebooks/*.ipynb (nbclient, one fresh kernel per notebook)"
COST = "~10 min"
EXTRA = ("nbclient", "nbformat", "ipykernel")
NOTEBOOKS = ROOT / "notebooks"
# What each notebook trained, read from its own variables once its last cell has run: training name -> steps.
TRAINED = {
    "01_attention_block": "{}",
    "02_train_and_look": "{'the calculator': trainer.global_step}",
    "03_why_several_heads": "{f'{n} head' + 's' * (n > 1): run.steps for n, run in runs.items()}",
    "04_grouped_query": "{f'n_kv_heads={n}': run.steps for n, run in runs.items()}",
    "05_write_your_block": "{'your block': trained.steps}",
}
REPORT = "import json as _j, torch as _t\nprint(_j.dumps({'trained': %s, 'threads': _t.get_num_threads()}))"


def execute(stem: str) -> dict:
    """Run one notebook from the notebooks folder, as Jupyter would: its wall seconds, trainings and torch threads."""
    import nbclient
    import nbformat

    nb = nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(REPORT % TRAINED[stem]))
    client = nbclient.NotebookClient(
        nb, timeout=1800, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    started = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - started
    report = json.loads("".join(o.get("text", "") for o in nb.cells[-1].outputs if o.output_type == "stream"))
    return {"seconds": round(seconds, 1), **report}


def measure(scratch: Path) -> dict:
    """The notebooks executed once each, in order: seconds, steps of every training, torch threads."""
    return {"command": COMMAND, "notebooks": {stem: execute(stem) for stem in TRAINED}}


def block_notebooks(m: dict) -> str:
    """docs/notebooks.md: each notebook's time and trainings, as measured here."""
    x = m.get("notebooks")
    if not x:
        return not_measured("notebooks")
    lines = ["| notebook | run top to bottom | its trainings: steps | torch threads |", "|---|---|---|---|"]
    for stem, run in x["notebooks"].items():
        trained = ", ".join(f"{name} {steps:,}" for name, steps in run["trained"].items()) or "none"
        lines.append(f"| `{stem}` | {secs(run['seconds'])} | {trained} | {run['threads']} |")
    return "\n".join(lines)


def block_notebooks_summary(m: dict) -> str:
    """The README's sentence: how long each notebook takes run top to bottom (where and when: docs/notebooks.md)."""
    x = m.get("notebooks")
    if not x:
        return not_measured("notebooks")
    took = [secs(r["seconds"]) for r in x["notebooks"].values()]
    first, last = (stem[:2] for stem in list(x["notebooks"])[:: len(took) - 1])
    cores = (m.get("machine") or {}).get("machine", {}).get("cores", "?")
    return wrap(
        f"Run top to bottom on a {cores}-core CPU they take {', '.join(took[:-1])} and {took[-1]} ({first} to {last}): "
        "[how long they take](docs/notebooks.md#how-long-they-take)."
    )


BLOCKS = {"notebooks": block_notebooks, "notebooks_summary": block_notebooks_summary}
