"""``python calc.py --export hf`` on the default run (needs ``.[interop]``): its summary line, and the export check's
figures read back from it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from .common import ROOT, not_measured, run
from .default import default_run

COMMAND = "python calc.py --export hf hf_calculator"
COST = "~20 s (+1 min without the default section)"
EXTRA = ("transformers", "safetensors")  # optional packages its command imports, checked before any section runs

# calc.py --export's summary line (model/export.py: export_command), read back for the prose
EXPORT_CHECK = re.compile(
    r"checked on (?P<n>[\d,]+) problems: max \|logit diff\| (?P<diff>\S+), greedy answers agree on (?P<agree>[\d,]+),"
)


def measure(scratch: Path) -> dict:
    """python calc.py --export hf on the default run (trained first when it is not there; needs ``.[interop]``):
    the summary line, and the export check's figures read back from it."""
    run_dir = default_run(scratch)
    out_dir = scratch / "hf_calculator"
    line = run(["calc.py", "--ckpt", str(run_dir), "--export", "hf", str(out_dir)], ROOT, merged=False).stdout.strip()
    check = EXPORT_CHECK.search(line)
    if check is None:
        sys.exit(f"export: the summary line no longer reads as EXPORT_CHECK expects: {line}")
    return {
        "command": COMMAND,
        "line": line.replace(str(out_dir), "hf_calculator"),
        "max_logit_diff": float(check["diff"]),
        "answers_agree": int(check["agree"].replace(",", "")),
        "n": int(check["n"].replace(",", "")),
    }


def block_export(m: dict) -> str:
    x = m.get("export")
    return not_measured("export") if not x else f"```\n{x['line']}\n```"


def block_export_check(m: dict) -> str:
    x = m.get("export")
    if not x:
        return not_measured("export")
    exact = x["max_logit_diff"] == 0 and x["answers_agree"] == x["n"]
    return (
        f"On the default run {'both numbers are exact' if exact else 'the check reads'}: max |logit diff| "
        f"**{x['max_logit_diff']:.1g}** and **{x['answers_agree']:,} / {x['n']:,}** answers equal"
    )


BLOCKS = {"export": block_export, "export_check": block_export_check}
