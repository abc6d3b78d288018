"""Regenerate the measured numbers and figures of the README and docs/ from real, seeded runs.

    python docs/regenerate.py                      every section, in order (see --list for what each costs)
    python docs/regenerate.py --only default quick_sweep
    python docs/regenerate.py --list               the sections: what each runs, what it writes, rough cost
    python docs/regenerate.py --render             only re-render the Markdown blocks from docs/measured/

Each section is one module of docs/measure/ holding its command, the run that measures it and the rendering of its
Markdown blocks side by side. A section runs the project's own commands (train.py, docs/patching.py, ...) in
subprocesses with fixed seeds, in a scratch directory, and writes

    docs/measured/<section>.json    the numbers, the images it drew and a hash of the code that drew each
    docs/measured/machine.json      where and when each section was measured (the one place that says so)
    docs/images/*.png               the figures the README and docs/ show

then re-renders every ``<!-- measured:NAME -->`` ... ``<!-- /measured -->`` block of README.md and docs/*.md
from those files. tests/test_docs.py checks, without training, that every block equals its rendering and that
every image is newer than the code that draws it (by hash, not by file time).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "docs")]  # the project's modules; docs/measure as the package `measure`

import measure  # noqa: E402
from measure import common  # noqa: E402
from measure.common import BLOCK, DOCS, IMAGES, blocks_in, code_hash, commit, machine, secs  # noqa: E402, F401

from analysis.progress import track  # noqa: E402

MEASURED = ROOT / "docs" / "measured"
MODULES = {name: importlib.import_module(f"measure.{name}") for name in measure.SECTIONS}
EXPORT_CHECK = MODULES["export"].EXPORT_CHECK  # tests/test_interop.py reads calc.py --export's line with it


@dataclass
class Section:
    name: str
    build: Callable[[Path], dict]  # the module's measure(scratch)
    cost: str  # rough wall time on a 2-core CPU
    extra: tuple[str, ...] = ()  # optional packages its commands import (model/optional.py), checked before any run
    command: str = ""  # what it runs, as machine.json records it
    needs_gpu: bool = False  # measured on a machine with an NVIDIA GPU, apart from the CPU machine of the rest


SECTIONS = [
    Section(name, m.measure, m.COST, getattr(m, "EXTRA", ()), m.COMMAND, getattr(m, "NEEDS_GPU", False))
    for name, m in MODULES.items()
]
# the code that draws each figure: a figure is stale when any of these changed since it was drawn
DRAWN_BY = {name: files for m in MODULES.values() for name, files in getattr(m, "DRAWS", {}).items()}
BLOCKS: dict[str, Callable[[dict], str]] = {
    "machine": common.block_machine,
    **{f"when_{name}": common.measured_at(name) for name in MODULES},  # where and when, beside a section's tables
    **{name: block for m in MODULES.values() for name, block in m.BLOCKS.items()},
}


def load_measured() -> dict[str, dict]:
    return common.load_measured(MEASURED)


def render(text: str, measured: dict) -> str:
    """``text`` with every measured block re-rendered from ``measured`` (a KeyError names an unknown block)."""
    return common.render(text, measured, BLOCKS)


def render_docs(measured: dict | None = None) -> list[Path]:
    measured = load_measured() if measured is None else measured
    changed = []
    for path in DOCS:
        text = path.read_text()
        new = render(text, measured)
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed


def first_line(section: Section) -> str:
    return ((section.build.__doc__ or section.command).strip() or section.name).splitlines()[0]


def measure_sections(chosen: list[Section], scratch: Path) -> None:
    """Run each chosen section, writing its JSON and its line of machine.json as soon as it is done."""
    MEASURED.mkdir(exist_ok=True)
    machine_file = MEASURED / "machine.json"
    here = None if all(s.needs_gpu for s in chosen) else machine()  # the CPU machine every other section is measured on
    for section in track(chosen, "docs", part=lambda section: section.name):  # in the terminal only
        started, at, load = time.perf_counter(), commit(), os.getloadavg()[0]
        print(f"{section.name}: {first_line(section)}", flush=True)
        facts = section.build(scratch)
        facts.pop("run_dir", None)
        seconds = round(time.perf_counter() - started, 1)
        (MEASURED / f"{section.name}.json").write_text(json.dumps(facts, indent=2, ensure_ascii=False) + "\n")
        # read again as it is written: another regeneration running beside this one keeps its own lines
        where = json.loads(machine_file.read_text()) if machine_file.is_file() else {"sections": {}}
        if here is not None:
            where["machine"] = here
        where["sections"][section.name] = {
            "date": dt.date.today().isoformat(),
            "commit": at,
            "load": [round(load, 1), round(os.getloadavg()[0], 1)],  # 1-minute load average, start and end
            "runs": facts.get("command") or section.command or first_line(section),
            "seconds": seconds,
            **({"cpu": here["cpu"]} if here else {}),  # the machines differ from session to session
        }
        machine_file.write_text(json.dumps(where, indent=2) + "\n")
        print(f"{section.name}: {secs(seconds)} -> docs/measured/{section.name}.json", flush=True)


def redraw(name: str) -> None:
    """Draw the figures of section ``name`` again from the runs docs/measured/<name>.json holds (the same
    measurements, drawn by the code as it is now), and note the drawing code's new hash."""
    path = MEASURED / f"{name}.json"
    facts = json.loads(path.read_text())
    with tempfile.TemporaryDirectory() as scratch:
        facts["images"] = MODULES[name].draw(facts["runs"], Path(scratch))
    path.write_text(json.dumps(facts, indent=2, ensure_ascii=False) + "\n")
    print(f"{name}: redrew {', '.join(facts['images'])} from docs/measured/{name}.json")


def gpu_here() -> bool:
    import torch

    return torch.cuda.is_available()


def main(argv: list[str] | None = None) -> int:
    names = [s.name for s in SECTIONS]
    parser = argparse.ArgumentParser(prog="python docs/regenerate.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=names, metavar="SECTION", help=f"of: {', '.join(names)}")
    parser.add_argument("--list", action="store_true", help="list the sections and stop")
    parser.add_argument("--render", action="store_true", help="re-render the Markdown blocks only")
    parser.add_argument("--keep", type=Path, help="run in this directory and keep it (default: a temporary one)")
    redrawable = [name for name, m in MODULES.items() if hasattr(m, "draw")]
    parser.add_argument(
        "--redraw", nargs="+", choices=redrawable, metavar="SECTION",
        help=f"draw a section's figures again from its recorded runs, with today's code (of: {', '.join(redrawable)})",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.redraw:
        for name in args.redraw:
            redraw(name)
    if args.list:
        for s in SECTIONS:
            print(f"{s.name:15} {s.cost:45} {(s.build.__doc__ or '').strip()}")
        return 0
    if not (args.render or args.redraw):
        from model.optional import MissingExtraError, require

        chosen = [s for s in SECTIONS if args.only is None or s.name in args.only]
        if not gpu_here():
            if any(s.needs_gpu for s in chosen) and args.only:
                sys.exit("error: the gpu section needs an NVIDIA GPU (torch.cuda.is_available() is False here)")
            chosen = [s for s in chosen if not s.needs_gpu]  # every section: the GPU's left as last measured
        for section in chosen:  # before anything is trained: a missing package is one line, not a lost hour
            try:
                require(f"the {section.name} section", *section.extra)
            except MissingExtraError as e:
                sys.exit(f"error: {e} (or leave the section out with --only)")
        scratch = args.keep or Path(tempfile.mkdtemp(prefix="tinycalc-docs-"))
        scratch.mkdir(parents=True, exist_ok=True)
        measure_sections(chosen, scratch)
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)
    for path in render_docs():
        print(f"rendered {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
