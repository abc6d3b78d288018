"""``python docs/patching.py`` on the default run: activation patching of a carry in TransformerLens, its figure."""

from __future__ import annotations

import json
from pathlib import Path

from .common import ROOT, image, not_measured, pct, results, run
from .default import default_run

COMMAND = "python docs/patching.py on the default run (trains it first when --only leaves the default section out)."
COST = "~30 s (+1 min without the default section)"
DRAWS = {"patching.png": ["docs/patching.py"]}


def measure(scratch: Path) -> dict:
    """python docs/patching.py on the default run (trains it first when --only leaves the default section out)."""
    run_dir = default_run(scratch)
    facts_file = scratch / "patching.json"
    run([str(ROOT / "docs/patching.py"), "--ckpt", str(run_dir), "--json", str(facts_file)], scratch)
    images: dict[str, str] = {}
    image(images, run_dir / "lens_patching.png", "patching.png", DRAWS["patching.png"])
    r = results(run_dir)
    return json.loads(facts_file.read_text()) | {
        "run": {"steps": r["steps"], "test_exact_match": r["test_exact_match"], "seed": 0},
        "images": images,
    }


def block_patching(m: dict) -> str:
    p, d = m.get("patching"), m.get("default")
    if not p:
        return not_measured("patching")
    reads = " and ".join(f"`{x}`" for x in p["top_head_reads"]) or "no single position"
    text = (
        f"In the run behind the figure (the default run: seed 0, {p['run']['steps']:,} steps, "
        f"{pct(p['run']['test_exact_match'])} of held-out problems), the single head output that restores most of "
        f"the carry into answer digit r{p['place']} is {p['top_head']} at the last position "
        f"({p['top_head_restores']:.0%} of the clean answer's logit difference), attending to {reads}."
    )
    if d and p["top_head"] in d["ablation_zero"]:
        text += f" Zeroing {p['top_head']} costs {-d['ablation_zero'][p['top_head']]:.1f} points of exact-match."
    return text + " Strongest patches: " + "; ".join(p["strongest"]) + "."


BLOCKS = {"patching": block_patching}
