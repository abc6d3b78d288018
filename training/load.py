"""A :class:`CalculatorModule` from plain settings -- a checkpoint's ``hyper_parameters``, or a test's dicts -- or
from a checkpoint file: the network put together (model/build.py), the recipe made callable (training/optim.py)."""

from __future__ import annotations

from pathlib import Path

from data.build import format_dict, problem_format
from model.build import network_for
from model.checkpoint import CheckpointError, load_weights, read_checkpoint
from storage.messages import one_line
from training.module import CalculatorModule
from training.optim import OptimConfig, recipe, upgrade_checkpoint


def calculator_module(model: dict, fmt: dict, optim: dict, attention=None):
    """``model``, ``fmt``, ``optim``: a TransformerConfig (flat), a ProblemFormat and an OptimConfig as dicts, as a
    checkpoint saves them -> a CalculatorModule with new weights (``module.optim``: the OptimConfig). ``attention``:
    a learner's block to build the layers with (model/own_block.py's OwnBlock), else the lesson's."""
    written, optim_config = problem_format(**fmt), OptimConfig(**optim)
    net = network_for(model, written, attention)
    hparams = {"model": net.cfg.to_dict(), "fmt": format_dict(written), "optim": optim_config.to_dict()}
    module = CalculatorModule(net, written, recipe(optim_config), hparams)
    module.optim = optim_config
    return module


def load_module(path) -> tuple[CalculatorModule, Path]:
    """Checkpoint file or run directory -> (its CalculatorModule on the CPU, in eval mode; the .ckpt path), every
    way a file can be wrong one :class:`CheckpointError` line (model/checkpoint.py reads it as plain values)."""
    ckpt, saved = read_checkpoint(path)
    hparams = saved["hyper_parameters"]
    try:
        module = calculator_module(hparams["model"], hparams["fmt"], hparams.get("optim") or {})
    except Exception as e:  # wrong config keys or values
        raise CheckpointError(f"{ckpt}: incompatible with this code ({one_line(e, sentence=True)})") from None
    load_weights(module.net, saved, ckpt)
    module.on_load_checkpoint(saved)  # its learning curve
    upgrade_checkpoint(saved)  # an optimizer state saved before training/optim.py, as a resumed run reads it
    return module.eval(), ckpt
