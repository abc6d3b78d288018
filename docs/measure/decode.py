"""``python bench.py decode`` on the default run: evaluation and decoding speed, with and without the KV cache."""

from __future__ import annotations

from pathlib import Path

from .common import RUN, bench, not_measured
from .default import default_run

COMMAND = f"python bench.py decode --ckpt {RUN}"
COST = "~15 s (+1 min without the default section)"


def measure(scratch: Path) -> dict:
    """python bench.py decode on the default run (trained first when it is not there): evaluation and decoding speed."""
    run_dir = default_run(scratch)
    return {"command": COMMAND} | bench(scratch, "decode", "--ckpt", str(run_dir))["decode"]


def block_decode(m: dict) -> str:
    x = m.get("decode")
    if not x:
        return not_measured("decode")
    cache, plain = x["decode"]["kv_cache"], x["decode"]["no_cache"]
    return (
        f"Evaluating {x['n']:,} random 3-digit additions end to end (parse, encode, batched greedy decoding with the "
        f"KV cache, scoring) takes **{x['eval_seconds']:.2f} s** on this machine; decoding runs at "
        f"{cache['tokens_per_second']:,} answer tokens/s with the KV cache against {plain['tokens_per_second']:,} "
        f"without it (×{x['kv_cache_speedup']:.1f}). Measured with `{x['command']}` (`--json` for the numbers; "
        "`python docs/regenerate.py --only decode`)."
    )


BLOCKS = {"decode": block_decode}
