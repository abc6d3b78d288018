"""Find and load trained calculators: a checkpoint is self-describing.

``hyper_parameters`` (saved by :class:`CalculatorModule`) hold the model config and the data format; the
tokenizer is the run directory's ``tokenizer.json`` when present, else the built-in fixed vocabulary.
Every failure of a checkpoint is a :class:`CheckpointError` with a one-line message; a device that is not
there is a :class:`~model.device.DeviceError`, raised before the checkpoint is read.
"""

from __future__ import annotations

import os
import pickle
import warnings
from pathlib import Path

import torch
from tokenizers import Tokenizer

from data.build import problem_format
from data.division import DividingFormat, tokenizer_for
from data.operations import OPERATIONS
from data.tokenizer import CHARACTERS, CharTokenizer
from model.build import network_for
from model.calculator import Calculator
from model.device import resolve_device
from model.transformer import Transformer
from storage.messages import one_line
from storage.rundir import RUN_PATTERNS, RunDir, RunFileError, check_file


class CheckpointError(Exception):
    """A checkpoint that cannot be found, read or used; the message is one line."""


def find_checkpoints(root: str | Path = ".") -> list[Path]:
    """Every run's best checkpoint under ``root`` (runs/ and multirun/), newest first by modification time."""
    found = {  # nested sweep jobs too; a checkpoint that is a link (to another run's, perhaps) is not a candidate
        run.best_checkpoint
        for run in RunDir.under(root)
        if run.best_checkpoint.is_file() and not run.best_checkpoint.is_symlink()
    }
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def finished(ckpt: Path) -> bool:
    """Does ``ckpt`` belong to a run that finished (results.json status ok)?"""
    run = RunDir.of_checkpoint(ckpt)
    return run is not None and run.status == "ok"


def recorded_exact_match(ckpt: Path) -> float | None:
    """The test exact-match its run recorded in results.json, when it finished and recorded one."""
    run = RunDir.of_checkpoint(ckpt)
    value = run.read_results().get("test_exact_match") if run is not None else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def newest_checkpoint(root: str | Path = ".") -> Path:
    """The newest FINISHED run's best checkpoint (a sweep's newest job may still be training, or have stopped at
    0.2%); only when no run has finished, the newest of all (calc.py then says it did not finish)."""
    found = find_checkpoints(root)
    if not found:
        looked = " and ".join(f"{pattern}/{RunDir('').best_checkpoint}" for pattern in RUN_PATTERNS)
        raise CheckpointError(
            f"no checkpoint found under {Path(root).resolve()} (looked for {looked}); train one with  "
            "python train.py  "
            "or pass --ckpt PATH"
        )
    return next((ckpt for ckpt in found if finished(ckpt)), found[0])


def resolve_checkpoint(path: str | Path) -> Path:
    """A .ckpt file, a run directory (its checkpoints/best.ckpt) or a checkpoints/ directory."""
    path = Path(path)
    if path.is_dir():
        run = RunDir(path)
        for candidate in (run.best_checkpoint, path / run.best_checkpoint.name):  # a run, or its checkpoints/
            if os.path.lexists(candidate):  # a FIFO or a link out there is named by read_checkpoint
                return candidate
        why = "not a run directory, or its run has saved no checkpoint yet"
        results = run.read_results()
        if results.get("status") == "failed":
            why = f"the run failed: {results.get('error')}"
        raise CheckpointError(f"no {run.best_checkpoint.relative_to(path)} in {path} ({why})")
    if not path.exists():
        raise CheckpointError(f"{path}: no such checkpoint file or run directory")
    return path


def tokenizer_from_json(text: str) -> CharTokenizer:
    """A saved tokenizer (tokenizer.json's text), or ValueError unless it tokenizes as the one this project
    builds: the vocabulary is fixed, so a file that differs (two digits' ids swapped, ...) is damaged, and
    a model would read and write the wrong digits through it without a word."""
    tokenizer = CharTokenizer(Tokenizer.from_str(text))
    added = "".join(op for op in OPERATIONS if op in tokenizer.vocab)  # each registered operation's, in order
    built = tokenizer_for(DividingFormat(operators=added)) if added else CharTokenizer()
    if tokenizer.vocab != built.vocab:
        differ = sorted(
            t for t in set(built.vocab) | set(tokenizer.vocab) if tokenizer.vocab.get(t) != built.vocab.get(t)
        )
        raise ValueError(f"its vocabulary differs from the fixed one at {', '.join(map(repr, differ[:6]))}")
    probe = "".join(CHARACTERS)
    if tokenizer.encode(probe) != built.encode(probe) or tokenizer.decode(built.encode(probe)) != probe:
        raise ValueError("it does not split text into one token per character as the fixed one does")
    return tokenizer


def load_tokenizer(ckpt: Path, fmt=None) -> CharTokenizer:
    """The run's tokenizer.json (read as the run directory's reader reads a file), checked to be the vocabulary
    the project builds; the built one for a checkpoint outside a run or a run without the file (that of ``fmt``,
    the checkpoint's format, when given: '/' where it divides)."""
    run = RunDir.of_checkpoint(ckpt)
    try:
        text = run.read_text(run.tokenizer) if run else None
    except RunFileError as e:
        raise CheckpointError(str(e)) from None
    if text is None:
        return CharTokenizer() if fmt is None else tokenizer_for(fmt)  # the vocabulary is fixed
    try:
        return tokenizer_from_json(text)
    except Exception as e:  # tokenizers raises plain Exceptions on bad JSON; a vocabulary not ours is a ValueError
        raise CheckpointError(
            f"{run.tokenizer}: not the tokenizer tinycalc builds ({one_line(e, sentence=True)})"
        ) from None


def load_calculator(path: str | Path, device: str | torch.device = "cpu") -> Calculator:
    """Checkpoint file or run directory -> :class:`Calculator` on ``device`` (see :func:`resolve_device`: 'cpu',
    'cuda', 'mps', 'auto', ...). The weights are read onto the CPU whatever device they were saved from, so a
    GPU-trained checkpoint loads on a CPU-only machine. A device that is not there raises :class:`DeviceError`
    before anything is read."""
    target = resolve_device(device)
    ckpt, saved = read_checkpoint(path)
    net, fmt = build_network(saved, ckpt), problem_format(**saved["hyper_parameters"]["fmt"])
    tokenizer = load_tokenizer(ckpt, fmt)
    if tokenizer.vocab_size != net.cfg.vocab_size:
        raise CheckpointError(
            f"{ckpt}: the tokenizer has {tokenizer.vocab_size} tokens but the model {net.cfg.vocab_size}"
        )
    try:
        calc = Calculator(net, fmt, tokenizer, path=ckpt)
    except KeyError as e:
        raise CheckpointError(f"{ckpt}: the tokenizer lacks the token {e.args[0]!r}") from None
    return calc.to(target)


def read_checkpoint(path: str | Path) -> tuple[Path, dict]:
    """Checkpoint file or run directory -> (the .ckpt path, what it holds as plain values); every way a file can be
    wrong is one :class:`CheckpointError` line. Nothing in it is instantiated: tensors and plain values only."""
    ckpt = resolve_checkpoint(path)
    run = RunDir.of_checkpoint(ckpt)
    try:  # torch.load would wait on a FIFO for ever, or read a link's target outside the run
        check_file(ckpt, run.path if run is not None else None)
    except RunFileError as e:
        raise CheckpointError(str(e)) from None
    try:
        with warnings.catch_warnings():  # torch warns about foreign pickles; the error below says it all
            warnings.simplefilter("ignore")
            # weights_only: tensors and plain values only -- a foreign pickle cannot run code here
            data = torch.load(ckpt, map_location="cpu", weights_only=True)
    except OSError as e:
        raise CheckpointError(f"{ckpt}: cannot read ({e.strerror or one_line(e, sentence=True)})") from None
    except pickle.UnpicklingError:  # torch's message is a page about weights_only
        raise CheckpointError(
            f"{ckpt}: not a tinycalc checkpoint (corrupt, or a pickle of objects other than tensors and plain values)"
        ) from None
    except Exception as e:  # torch raises RuntimeError/EOFError/... on truncated or random bytes
        raise CheckpointError(
            f"{ckpt}: not a readable checkpoint, corrupt or truncated? ({one_line(e, sentence=True)})"
        ) from None
    hparams = data.get("hyper_parameters") if isinstance(data, dict) else None
    if not isinstance(hparams, dict) or not isinstance(data.get("state_dict"), dict):
        raise CheckpointError(
            f"{ckpt}: not a tinycalc checkpoint (no hyper_parameters and state_dict saved by CalculatorModule)"
        )
    missing = [key for key in ("model", "fmt") if not isinstance(hparams.get(key), dict)]
    if missing:
        raise CheckpointError(f"{ckpt}: not a tinycalc checkpoint (hyper_parameters lack {', '.join(missing)})")
    return ckpt, data


def build_network(saved: dict, ckpt: Path) -> Transformer:
    """The network of a checkpoint :func:`read_checkpoint` read, with its weights, in eval mode; a config or weights
    this code cannot take is one :class:`CheckpointError` line."""
    hparams = saved["hyper_parameters"]
    try:
        net = network_for(hparams["model"], problem_format(**hparams["fmt"]))
    except Exception as e:  # wrong config keys or values
        raise CheckpointError(f"{ckpt}: incompatible with this code ({one_line(e, sentence=True)})") from None
    return load_weights(net, saved, ckpt)


def load_weights(net: Transformer, saved: dict, ckpt: Path) -> Transformer:
    """The weights of a checkpoint :func:`read_checkpoint` read, into ``net`` (in eval mode, returned); weights of
    another shape, or a network too short for its problems, is one :class:`CheckpointError` line."""
    fmt = problem_format(**saved["hyper_parameters"]["fmt"])
    try:
        net.load_state_dict({k.removeprefix("net."): v for k, v in saved["state_dict"].items() if k.startswith("net.")})
    except Exception as e:  # weights of another shape, or missing
        raise CheckpointError(f"{ckpt}: incompatible with this code ({one_line(e, sentence=True)})") from None
    if net.cfg.block_size < fmt.seq_len - 1:
        raise CheckpointError(
            f"{ckpt}: block_size={net.cfg.block_size} is too short for {fmt.digits}-digit "
            f"problems ({fmt.seq_len - 1} tokens)"
        )
    return net.eval()
