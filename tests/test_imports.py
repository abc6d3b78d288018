"""No module changes the process when imported: importing one leaves the environment, the signal handlers, the
garbage collector, the hooks, the registries and torch's settings as they were. What a module needs set, its
command or the function that needs it sets, when it runs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["storage", "data", "model", "training", "analysis", "benchmarks", "docs"]  # the layers, lowest first
COMMANDS = sorted(p.stem for p in ROOT.glob("*.py"))  # train, analyse, calc, verify, bench
SCRIPTS = {Path("docs", "regenerate.py"), Path("docs", "patching.py")}  # run as files, never imported as modules
# third-party libraries that change the process themselves when first imported: imported before the first look
THIRD_PARTY = ["torch", "lightning", "hydra", "omegaconf", "wandb", "matplotlib", "rich", "tokenizers"]

# Run in a fresh interpreter: look at the process, then import each module in turn and look again after each.
PROBE = r"""
import faulthandler, gc, importlib, json, logging, os, signal, sys, threading, warnings
for name in THIRD_PARTY:
    importlib.import_module(name)
import matplotlib
import torch
from omegaconf import OmegaConf

def state():
    loggers = {"root": logging.getLogger()} | {n: logging.getLogger(n) for n in ("lightning", "lightning.pytorch",
        "lightning.fabric", "pytorch_lightning", "torch", "hydra", "wandb", "matplotlib")}
    return {
        "os.environ": dict(os.environ),
        "signal handlers": {s.name: repr(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)},
        # frozen or not: after a gc.freeze() the count falls as the frozen objects die
        "gc": [gc.isenabled(), gc.get_threshold(), gc.get_freeze_count() > 0],
        "sys.excepthook": repr(sys.excepthook),
        "threading.excepthook": repr(threading.excepthook),
        "faulthandler": faulthandler.is_enabled(),
        "sys.path": list(sys.path),
        "sys.stdout/stderr": [repr(sys.stdout), repr(sys.stderr)],
        "sys.getrecursionlimit()": sys.getrecursionlimit(),
        "os.getcwd()": os.getcwd(),
        "OmegaConf resolvers": {n: OmegaConf.has_resolver(n) for n in RESOLVERS},
        "torch threads": [torch.get_num_threads(), torch.get_num_interop_threads()],
        "torch default dtype": str(torch.get_default_dtype()),
        "torch float32 matmul precision": torch.get_float32_matmul_precision(),
        "torch deterministic": torch.are_deterministic_algorithms_enabled(),
        "torch grad enabled": torch.is_grad_enabled(),
        "torch random state": torch.random.get_rng_state().sum().item(),
        "warnings filters": repr(warnings.filters),
        "matplotlib backend": repr(dict.__getitem__(matplotlib.rcParams, "backend")),  # as set: reading it picks one
        "matplotlib rcParams": repr(sorted((k, repr(v)) for k, v in dict.items(matplotlib.rcParams) if k != "backend")),
        "logging levels": {n: logger.level for n, logger in loggers.items()},
        "logging handlers": {n: repr(logger.handlers) for n, logger in loggers.items()},
    }

changed, before = {}, state()
for module in MODULES:
    importlib.import_module(module)
    after = state()
    differ = [key for key in after if after[key] != before[key]]
    if differ:
        changed[module] = {key: [str(before[key])[:300], str(after[key])[:300]] for key in differ}
        if "os.environ" in differ:
            changed[module]["os.environ"] = sorted(k for k in set(before["os.environ"]) | set(after["os.environ"])
                if before["os.environ"].get(k) != after["os.environ"].get(k))
    before = after
print(json.dumps(changed))
"""


def project_modules(root: Path = ROOT) -> list[str]:
    """Every module of the project's packages, lowest layer first, then the commands. Not imported here: the scripts
    in docs/ that are run as files (python docs/regenerate.py, docs/patching.py), which put the project on the path
    first, and notebooks/lessons.py, a notebook's first cell: importing it is how a notebook sets itself up."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if path.relative_to(root) not in SCRIPTS:
                found.append(".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__"))
    return found + COMMANDS


def resolver_names(root: Path = ROOT) -> list[str]:
    """The project's own OmegaConf resolvers: every ``${name:...}`` its configs use, less Hydra's."""
    used = {m for p in (root / "configs").rglob("*.yaml") for m in re.findall(r"\$\{(\w+):", p.read_text())}
    return sorted(used - {"hydra", "now"})  # Hydra's own (oc.* have a dot, not matched)


def import_changes(modules: list[str], root: Path = ROOT) -> dict[str, dict]:
    """Each of ``modules`` whose import changed the process -> what it changed ({key: [before, after]})."""
    setup = f"THIRD_PARTY = {THIRD_PARTY!r}\nMODULES = {modules!r}\nRESOLVERS = {resolver_names(root)!r}\n"
    done = subprocess.run([sys.executable, "-c", setup + PROBE], cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_no_module_changes_the_process_when_imported():
    assert len(project_modules()) > 110 and "train" in COMMANDS and resolver_names() == ["hydra_subdir", "run_dir"]
    assert import_changes(project_modules()) == {}


def test_the_check_sees_a_module_that_changes_the_process(tmp_path):
    """The guard can fail: a scratch package whose modules each change one thing is caught, module by module."""
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "train.yaml").write_text("dir: ${run_dir:${resume}}\n")
    (tmp_path / "bad").mkdir()
    changes = {
        "environ": "import os\nos.environ['WANDB_SILENT'] = 'true'",
        "signals": "import signal\nsignal.signal(signal.SIGTERM, lambda *a: None)",
        "gc": "import gc\ngc.freeze()",
        "hook": "import sys\nsys.excepthook = lambda *a: None",
        "resolvers": "from omegaconf import OmegaConf\nOmegaConf.register_new_resolver('run_dir', str)",
        "threads": "import torch\ntorch.set_num_threads(1)",
        "dtype": "import torch\ntorch.set_default_dtype(torch.float64)",
        "warnings": "import warnings\nwarnings.filterwarnings('ignore')",
        "logging": "import logging\nlogging.getLogger('lightning.pytorch').setLevel(logging.ERROR)",
        "backend": "import matplotlib\nmatplotlib.use('Agg')",
        "path": "import sys\nsys.path.insert(0, '/nowhere')",
        "quiet": "x = 1",
    }
    for name, body in changes.items():
        (tmp_path / "bad" / f"{name}.py").write_text(body + "\n")
    found = import_changes([f"bad.{name}" for name in changes], tmp_path)
    assert sorted(found) == sorted(f"bad.{name}" for name in changes if name != "quiet")
    assert found["bad.environ"]["os.environ"] == ["WANDB_SILENT"]
    assert list(found["bad.resolvers"]) == ["OmegaConf resolvers"]
    assert list(found["bad.logging"]) == ["logging levels"]


def test_the_registry_builds_the_analyses_when_asked_not_when_imported():
    """Importing analysis/registry.py imports, builds and checks no analysis; the first call does, once."""
    probe = (
        "import sys, analysis.registry as r\n"
        "before = sorted(m for m in sys.modules if m.startswith('analysis.metrics.'))\n"
        "print(before, r.analyses() is r.analyses(), len(r.analyses()) == len(r.REGISTERED))"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["[]", "True", "True"], done.stderr[-2000:]
