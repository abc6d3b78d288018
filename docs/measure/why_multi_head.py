"""``python train.py -m experiment=why_multi_head``: 1 head of 64 dims against 4 of 16, side by side."""

from __future__ import annotations

from pathlib import Path

from .common import image, not_measured, train, wrap

COMMAND = "python train.py -m experiment=why_multi_head"
COST = "~2 min"
DRAWS = {"why_multi_head.png": ["analysis/plots.py", "analysis/compare.py"]}


def measure(scratch: Path) -> dict:
    """python train.py -m experiment=why_multi_head: 1 head x 64 dims against 4 x 16."""
    ran = train(scratch, "-m", "experiment=why_multi_head", "hydra.sweep.dir=multirun/why")
    images: dict[str, str] = {}
    image(images, scratch / "multirun/why/why_multi_head.png", "why_multi_head.png", DRAWS["why_multi_head.png"])
    verdict = ran.stdout[ran.stdout.index("why multiple heads?") :].splitlines()[1:]
    verdict = [line.strip() for line in verdict if line.strip() and not line.strip().startswith("figure:")]
    return {"command": COMMAND, "verdict": verdict, "images": images}


def block_why_multi_head(m: dict) -> str:
    w = m.get("why_multi_head")
    if not w:
        return not_measured("why_multi_head")
    lines = [f"- {line}" for line in w["verdict"]]
    return "\n".join([*lines, "", "![why multiple heads](images/why_multi_head.png)"])


def block_why_multi_head_verdict(m: dict) -> str:
    """docs/course.md: the comparison's verdict, without the figure and the sweep's own files."""
    w = m.get("why_multi_head")
    if not w:
        return not_measured("why_multi_head")
    items = [wrap(f"- {line}", subsequent_indent="  ") for line in w["verdict"] if not line.startswith("sweep ")]
    return "\n".join(items)


BLOCKS = {"why_multi_head": block_why_multi_head, "why_multi_head_verdict": block_why_multi_head_verdict}
