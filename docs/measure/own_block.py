"""docs/course.md's "Write your own block": examples/my_attention.py checked (python -m model.check), the same block
with one mistake put in, the calculator trained with it, and calc.py asking the trained run."""

from __future__ import annotations

import re
from pathlib import Path

from .common import ROOT, RUN, hide_scratch, not_measured, results, run, train

SPEC = "examples/my_attention.py:MultiHeadAttention"
COMMAND = f"python -m model.check {SPEC}; python train.py model.attention={SPEC}"
COST = "~30 s"
OWN_RUN = "runs/own_block"  # beside the default section's run (shown as RUN) in the same scratch directory
SUMMARY_ROWS = re.compile(r"(model|training|test|not run|seconds) {2,}")  # the summary's rows this section shows


def measure(scratch: Path) -> dict:
    """The check of the example block and of it unscaled, one training with it, one question to calc.py."""
    check = run(["-m", "model.check", SPEC], ROOT)
    wrong = scratch / "mine.py"
    wrong.write_text((ROOT / "examples/my_attention.py").read_text().replace(" / math.sqrt(self.head_dim)", ""))
    mistake = run(["-m", "model.check", "mine.py:MultiHeadAttention"], scratch, ok=(1,))
    (scratch / "examples").mkdir(exist_ok=True)
    (scratch / "examples/my_attention.py").write_text((ROOT / "examples/my_attention.py").read_text())
    trained = train(scratch, f"model.attention={SPEC}", f"hydra.run.dir='{OWN_RUN}'")
    r = results(scratch / OWN_RUN)
    asked = run([str(ROOT / "calc.py"), "--ckpt", OWN_RUN, "123+456"], scratch)
    summary = hide_scratch(trained.stdout[trained.stdout.index("tinycalc run") :], scratch).splitlines()
    shown, keep = [], False
    for line in summary:  # a row and its wrapped continuation lines
        keep = bool(SUMMARY_ROWS.match(line)) or (keep and line.startswith(" "))
        shown += [line] if keep else []
    return {
        "command": COMMAND,
        "check": check.stdout.strip(),
        "mistake": mistake.stdout.strip(),
        "summary": "\n".join(shown),
        "whole_seconds": trained.seconds,
        "steps": r["steps"],
        "test_exact_match": r["test_exact_match"],
        "calc": asked.stdout.strip(),
    }


def block_own_block(m: dict) -> str:
    o = m.get("own_block")
    if not o:
        return not_measured("own_block")
    return (
        f"```\n$ python -m model.check {SPEC}\n{o['check']}\n\n"
        f"$ python -m model.check mine.py:MultiHeadAttention   # the same block, its scores not scaled\n"
        f"{o['mistake']}\n\n$ python train.py model.attention={SPEC}\n...\n{o['summary']}\n...\n\n"
        f"$ python calc.py --ckpt {RUN} 123+456\n{o['calc']}\n```\n\n"
        f"The training took {o['whole_seconds']:.0f} s as a whole command ({o['steps']} steps)."
    )


BLOCKS = {"own_block": block_own_block}
