"""Training speed, side by side in one process, on one device: our Lightning path as ``train.py`` builds it, the
same model in a bare loop, and a nanoGPT-style reference model -- each eager and, where asked, compiled -- plus the
device's matrix-multiply peak, to turn tokens/s into MFU.

Used by ``python bench.py train [--device D] [--batch-sizes 256,4096] [--compile] [--digits N]``. The paths:

lightning  ``assemble`` (training/assemble.py) on the real composed config (``trainer=gpu`` on CUDA) with the
           per-step callbacks a user's run has -- the non-finite loss guard, the Ctrl-C/SIGTERM handler, the best
           checkpoint and early stopping (both act at validation), a CSV logger in the place of wandb (each reads
           the loss every ``log_every_n_steps``) -- plus a timing callback. Left out: the progress bar, attention
           maps and the end-of-run analysis; the one validation (and the checkpoint it writes) comes after the
           timed steps.
           On CUDA it runs at the config's precision (``trainer.precision``, ``matmul_precision``) and at the other
           two of 32-true + full fp32 matmuls, 32-true + TF32 matmuls, bf16-mixed, so the choice is measured.
bare       the same model and loss (``CalculatorModule.teacher_forced_loss``) in a plain PyTorch loop: the run's
           optimizer (``optim``: Muon + fused AdamW by default),
           gradient clipping at the config's ``trainer.gradient_clip_val``, no schedule, batches drawn as the
           training path draws them on that device.
nanogpt    :class:`RefGPT` (fused ``c_attn``, SDPA; logits at every position) in the same plain loop.

Compiled variants (``compile_mode``) wrap the loss in ``torch.compile`` -- the Lightning path through
``compile=`` (training/compiling.py: ``CompiledStep``) -- so the forward and backward are compiled and the optimizer
step stays eager.

Timing. A CPU runs each step to its end before the next begins: every step is timed alone, and the median of many
resists a noisy neighbour. A GPU's kernels run asynchronously, queued by the host, so a step's host time says
nothing: there the ``steps`` steps after ``warmup`` are timed as one window between two device synchronisations,
with nothing inside the window waiting for the device, and the figure is the median over rounds of the windows'
mean step. Either way the first ``warmup`` steps (compiling, CUDA-graph capture, library start-up) are reported
apart from the steady state. The variants take turns, round after round, so a noisy neighbour slows them alike.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import resource
import statistics
import tempfile
import time
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile
from torch.utils.data import DataLoader
from torch.utils.flop_counter import FlopCounterMode

from data.build import problem_format
from data.datamodule import ArithmeticDataModule
from model.device import device_name
from model.reference import RefGPT
from storage.messages import one_line
from training.assemble import assemble
from training.cli import compose_train_config, with_run_dir
from training.compiling import CUDA_GRAPH_MODES
from training.optim import OptimConfig, optimizer_for

DEFAULT_STEPS = {"cpu": (60, 10)}  # device type -> (timed steps, warm-up steps) per round; others: GPU_STEPS
GPU_STEPS = (300, 20)  # 320 steps a round: 5 draws of 64 batches, 3 checks of the loss guard (every 100 steps)
LEFT_OUT = (
    "the progress bar, attention maps and analysis; validation and its checkpoint come after the timed steps; "
    "a CSV logger stands in for wandb"
)


# ---- devices ------------------------------------------------------------------------------------------------
def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (nothing to wait for on a CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def described(device: torch.device) -> str:
    """:func:`device_name`, with a CPU's thread count."""
    return device_name(device) + (f" ({torch.get_num_threads()} threads)" if device.type == "cpu" else "")


@contextlib.contextmanager
def matmul_precision(device: torch.device, precision: str | None):
    """fp32 matrix multiplies at ``precision`` (highest, high = TF32, medium) on CUDA for the block; a CPU's
    arithmetic is never changed (as :func:`training.assemble.assemble`), and None leaves the setting alone."""
    if device.type != "cuda" or precision is None:
        yield
        return
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


# ---- what runs ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Variant:
    """One timed way of training: a path, eager or compiled, at a precision."""

    name: str
    path: str  # lightning | bare | nanogpt
    compile: str | None = None  # a torch.compile mode, or None (eager)
    precision: str = "32-true"  # Lightning's trainer.precision; the bare loops run fp32
    matmul: str | None = None  # torch.set_float32_matmul_precision on CUDA; None: not set (a CPU's is never changed)

    @property
    def peak(self) -> str:
        """The matmul peak its MFU is measured against: fp32, tf32 or bf16."""
        if self.precision.startswith("bf16"):
            return "bf16"
        return "tf32" if self.matmul in ("high", "medium") else "fp32"

    def describe(self) -> dict:
        return {
            "path": self.path,
            "compile": self.compile,
            "precision": self.precision,
            "matmul_precision": self.matmul,
        }


PRECISION_CANDIDATES = (  # CUDA: the Lightning path at each, so trainer=gpu's choice is made by measurement
    ("fp32", "32-true", "highest"),
    ("tf32", "32-true", "high"),
    ("bf16", "bf16-mixed", "high"),
)


def plan(device: torch.device, compile_mode: str | None, precision: str = "32-true", matmul: str = "high"):
    """The variants, in the order they take turns: the three paths eager at the config's precision (``lightning``,
    ``bare``, ``nanogpt``, the figures bench.py always reported); on CUDA the Lightning path at the candidate
    precisions the config does not already use; then each path compiled, when ``compile_mode`` is given."""
    cuda = device.type == "cuda"
    mm = matmul if cuda else None
    base = [
        Variant("lightning", "lightning", None, precision, mm),
        Variant("bare", "bare", None, "32-true", mm),
        Variant("nanogpt", "nanogpt", None, "32-true", mm),
    ]
    extra = []
    if cuda:
        same = lambda p: p.replace("32-true", "32") if p in ("32", "32-true") else p  # noqa: E731
        for label, candidate, candidate_mm in PRECISION_CANDIDATES:
            if (same(candidate), candidate_mm) != (same(precision), matmul):
                extra.append(Variant(f"lightning_{label}", "lightning", None, candidate, candidate_mm))
    compiled = [replace(v, name=f"{v.name}_compiled", compile=compile_mode) for v in base] if compile_mode else []
    return base + extra + compiled


# ---- timing -------------------------------------------------------------------------------------------------
class Clock:
    """Step times on ``device``: ``begin()`` before the first step, ``tick()`` after each.

    Per step (a CPU, by default): ``samples`` gets each of the ``steps`` steps after ``warmup``. In a window (any
    other device): the device is synchronised after step ``warmup`` and after step ``warmup + steps`` -- twice per
    round, never inside the window -- and ``samples`` gets the window's mean step. ``first_steps_seconds``: from
    ``begin()`` to the end of step ``warmup`` (compiling, capture, start-up).
    """

    def __init__(self, device: torch.device, warmup: int, steps: int, window: bool | None = None):
        if warmup < 1 or steps < 1:
            raise ValueError(f"warmup={warmup}, steps={steps}: each must be >= 1")
        self.device, self.warmup, self.steps = device, warmup, steps
        self.window = device.type != "cpu" if window is None else window
        self.samples: list[float] = []
        self.first_steps_seconds: float | None = None
        self._n, self._started, self._last, self._window_start = 0, 0.0, 0.0, 0.0

    @property
    def total_steps(self) -> int:
        return self.warmup + self.steps

    @property
    def complete(self) -> bool:
        return len(self.samples) == (1 if self.window else self.steps)

    def begin(self) -> None:
        synchronize(self.device)
        self._n = 0
        self._started = self._last = time.perf_counter()

    def tick(self) -> None:
        self._n += 1
        n = self._n
        if self.window:
            if n in (self.warmup, self.total_steps):
                synchronize(self.device)  # the only two waits of a round
                now = time.perf_counter()
                if n == self.warmup:
                    self.first_steps_seconds, self._window_start = now - self._started, now
                else:
                    self.samples.append((now - self._window_start) / self.steps)
            return
        now = time.perf_counter()
        if n == self.warmup:
            self.first_steps_seconds = now - self._started
        elif self.warmup < n <= self.total_steps:
            self.samples.append(now - self._last)
        self._last = now


# ---- the three training paths ------------------------------------------------------------------------------
def reference_loss(reference: RefGPT, seq: torch.Tensor, prompt_len: int) -> torch.Tensor:
    """nanoGPT's way: logits at every position, the loss on the answer's (the task ours trains on)."""
    logits = reference(seq[:, :-1])[:, prompt_len - 1 :]
    return F.cross_entropy(logits.flatten(0, 1), seq[:, prompt_len:].flatten())


def device_batches(dm: ArithmeticDataModule, device: torch.device):
    """The training stream as a trainer on ``device`` gets it (:meth:`ArithmeticDataModule.training_stream`)."""
    return iter(DataLoader(dm.training_stream(device), batch_size=None))


class BareLoop:
    """A plain PyTorch loop: ``loss_of(seq)``, backward, clip (the gradient norm at ``clip``, as Lightning's
    ``gradient_clip_val``; None: not clipped), the run's optimizer step. The model, optimizer, stream and (compiled)
    loss live across rounds, so a compiled loss compiles once."""

    def __init__(
        self, model: nn.Module, loss_of, stream, schedule: OptimConfig, clip: float | None, variant: Variant, device
    ):
        self.model, self.stream, self.variant, self.device, self.clip = model, stream, variant, device, clip
        self.optimizer = optimizer_for(model, schedule)  # the run's recipe (Muon + AdamW by default), as in training
        self.loss_of = loss_of
        if variant.compile:

            def step_loss(seq: torch.Tensor) -> torch.Tensor:
                # a code object of the bare loop's own: torch.compile caches by code, and the Lightning path's
                # compiled teacher_forced_loss would otherwise serve this loop too, uncounted and untimed
                return loss_of(seq)

            self.loss_of = torch.compile(step_loss, mode=variant.compile)
        self.mark_steps = variant.compile in CUDA_GRAPH_MODES

    def run(self, clock: Clock | None, steps: int) -> None:
        with matmul_precision(self.device, self.variant.matmul):
            if clock is not None:
                clock.begin()
            for _ in range(steps):
                if self.mark_steps:  # a new step: the CUDA graph outputs of the last may be overwritten
                    torch.compiler.cudagraph_mark_step_begin()
                loss = self.loss_of(next(self.stream))
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if self.clip is not None:
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip)
                self.optimizer.step()
                if clock is not None:
                    clock.tick()


def _clock_callback(clock: Clock):
    import lightning as L

    class ClockCallback(L.Callback):
        """Starts the clock as training starts and ticks at each batch end: whole steps, batch fetch, every other
        callback's hooks (this one runs last) and Lightning's own work included."""

        def on_train_start(self, trainer, pl_module):
            clock.begin()

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            clock.tick()

    return ClockCallback()


def compose(overrides: list[str], run_dir: Path):
    """configs/train.yaml composed with ``overrides`` as train.py composes it, with its run directory."""
    return with_run_dir(compose_train_config(overrides), run_dir)


def device_overrides(device: torch.device) -> list[str]:
    """train.py overrides that put a run on ``device``."""
    return {"cuda": ["trainer=gpu"], "mps": ["trainer.accelerator=mps"]}.get(device.type, [])


def run_overrides(device: torch.device, variant: Variant, batch_size: int, digits: int, total_steps: int) -> list[str]:
    """The overrides of one timed Lightning run: the real config on ``device`` at ``variant``'s precision and compile
    mode, validation pushed to the end, the progress bar, attention maps and analysis off, a CSV logger."""
    return [
        *device_overrides(device),
        f"data.digits={digits}",
        f"data.batch_size={batch_size}",
        "data.n_val=64",  # validated once, after the timed steps
        f"trainer.max_steps={total_steps}",
        f"trainer.val_check_interval={total_steps}",
        f"trainer.precision={variant.precision}",
        *([f"matmul_precision={variant.matmul}"] if variant.matmul else []),
        f"compile={variant.compile or 'null'}",
        "target_accuracy=null",
        "logger=csv",
        "analysis=none",
        "callbacks.attention_maps=null",
        "callbacks.progress_bar=null",
        "+trainer.enable_progress_bar=false",
    ]


class LightningRun:
    """Our training path: the objects :func:`assemble` builds from the real config. The data module and the model
    of the first round are kept (a compiled loss compiles once); each round gets a fresh Trainer and callbacks."""

    def __init__(self, overrides: list[str], workdir: Path):
        self.overrides, self.workdir, self.kept, self.rounds = overrides, workdir, None, 0

    def run(self, clock: Clock, steps: int) -> None:
        cfg = compose(self.overrides, self.workdir / f"round{self.rounds}")
        datamodule, module, _, _, _, trainer = assemble(cfg)
        if cfg.trainer.max_steps != steps:
            raise ValueError(f"trainer.max_steps={cfg.trainer.max_steps}, but {steps} steps were asked for")
        self.kept = self.kept or (datamodule, module)
        trainer.callbacks.append(_clock_callback(clock))  # last: the other callbacks' hooks are inside the steps
        trainer.fit(self.kept[1], datamodule=self.kept[0])
        self.rounds += 1

    @property
    def module(self):
        return self.kept[1] if self.kept else None


def assembled(overrides: list[str], run_dir: Path):
    """(datamodule, module) as train.py builds them for ``overrides``, and the gradient clip its trainer uses."""
    cfg = compose(overrides, run_dir)
    datamodule, module, *_ = assemble(cfg)
    return datamodule, module, cfg.trainer.gradient_clip_val


def build_bare(variant: Variant, overrides: list[str], run_dir: Path, device: torch.device) -> BareLoop:
    """The model (ours, or the reference of the same size) and data of ``overrides``, in a bare loop on ``device``."""
    dm, module, clip = assembled(overrides, run_dir)
    module.to(device)
    if variant.path == "bare":
        return BareLoop(
            module, module.teacher_forced_loss, device_batches(dm, device), module.optim, clip, variant, device
        )
    c, P = module.net.cfg, dm.fmt.prompt_len
    reference = RefGPT(dm.vocab_size, dm.fmt.seq_len, c.d_model, c.n_heads, c.n_layers).to(device)

    def loss_of(seq: torch.Tensor) -> torch.Tensor:
        return reference_loss(reference, seq, P)

    return BareLoop(reference, loss_of, device_batches(dm, device), module.optim, clip, variant, device)


# ---- FLOPs, the device's peak, and where a step's time goes -------------------------------------------------
MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm")


def step_flops(loss_of, seq: torch.Tensor, n_layers: int, d_model: int) -> tuple[int, int]:
    """(all, matmul-only) FLOPs of one training step's forward + backward on ``seq``, counted as run.

    Matrix multiplies are counted by torch's FlopCounterMode, so work a model skips is not counted. Where it
    does not see the attention kernel (the fused CPU kernel, in torch 2.13), the scores and weighted sums are
    added as the PaLM/nanoGPT estimate does: 12 x layers x context x d_model per token (forward + backward) --
    what the counter's own formula gives for the CUDA kernels it does see.
    """
    with FlopCounterMode(display=False) as counter:
        loss_of(seq).backward()
    B, T = seq.shape[0], seq.shape[1] - 1
    counts = counter.get_flop_counts()["Global"]
    matmul = sum(n for op, n in counts.items() if str(op).rsplit(".", 1)[-1] in ("mm", "addmm", "bmm"))
    total = counter.get_total_flops()
    if not any("attention" in str(op) for op in counts):
        total += 12 * n_layers * T * d_model * B * T
    return total, matmul


def matmul_peak(device: torch.device | str = "cpu", kind: str = "fp32", size: int | None = None, repeat: int = 5):
    """FLOP/s of a large matrix multiply on ``device``, best of ``repeat``: ``kind`` fp32 (full fp32 arithmetic),
    tf32 (fp32 tensors, TensorFloat-32 arithmetic on CUDA) or bf16. 2048² on a CPU, 8192² elsewhere; on a GPU each
    timing is 10 multiplies between two synchronisations."""
    device = torch.device(device)
    size = size or (2048 if device.type == "cpu" else 8192)
    dtype = torch.bfloat16 if kind == "bf16" else torch.float32
    n = 1 if device.type == "cpu" else 10
    with matmul_precision(device, {"fp32": "highest", "tf32": "high"}.get(kind)):
        a = torch.randn(size, size, device=device, dtype=dtype)
        b = torch.randn(size, size, device=device, dtype=dtype)

        def multiply():
            for _ in range(n):
                a @ b
            synchronize(device)

        multiply()
        best = min(_timed(multiply) for _ in range(repeat))
    return 2 * size**3 * n / best


def time_split(loop: BareLoop, steps: int, step_seconds: float) -> tuple[float | None, float | None]:
    """(share of a bare step inside matrix multiplies, share of it the device is busy at all) by torch.profiler
    over ``steps`` steps. On a CPU: self CPU time of the matmul ops over all self CPU time (the busy share is
    None). On CUDA: the device time of the kernels the matmul ops launch, and of all kernels, per step, over the
    unprofiled ``step_seconds`` (the profiler slows the host, not the kernels). Elsewhere (None, None)."""
    if loop.device.type not in ("cpu", "cuda"):
        return None, None
    cuda = loop.device.type == "cuda"
    loop.run(None, 3)  # warm up
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        loop.run(None, steps)
        synchronize(loop.device)
    events = prof.key_averages()
    if not cuda:
        total = sum(e.self_cpu_time_total for e in events)
        return sum(e.self_cpu_time_total for e in events if e.key in MATMUL_OPS) / total, None
    ops = [e for e in events if e.device_type == DeviceType.CPU]  # each kernel counted once, with its op
    per_step = lambda us: us / 1e6 / steps / step_seconds  # noqa: E731
    gemm = sum(e.self_device_time_total for e in ops if e.key in MATMUL_OPS)
    return per_step(gemm), per_step(sum(e.self_device_time_total for e in ops))


def _timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def data_throughput(dm: ArithmeticDataModule, device: torch.device, batches: int = 200) -> float:
    """Problems per second the training stream draws on ``device``."""
    stream = device_batches(dm, device)

    def draw():
        for _ in range(batches):
            next(stream)
        synchronize(device)

    return batches * dm.data.batch_size / _timed(draw)


def _compile_counts() -> dict[str, int]:
    # torch has no public count of compiled graphs and graph breaks (torch._dynamo.explain recompiles the function)
    from torch._dynamo.utils import counters

    return {
        "graphs": counters["stats"]["unique_graphs"],
        "graph_breaks": sum(counters["graph_break"].values()),
        "cudagraph_skips": counters["inductor"]["cudagraph_skips"],
    }


@contextlib.contextmanager
def _quiet():
    """Lightning's per-fit info lines (devices, 'max_steps reached', tips) and its advice on worker counts off."""
    from lightning.fabric.utilities.warnings import PossibleUserWarning

    logs = [logging.getLogger(name) for name in ("lightning.pytorch", "lightning.fabric")]
    levels = [log.level for log in logs]
    for log in logs:
        log.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=PossibleUserWarning)
            warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\)")
            yield
    finally:
        for log, level in zip(logs, levels, strict=True):
            log.setLevel(level)


# ---- the section -------------------------------------------------------------------------------------------
def bench_train(
    rounds: int = 3,
    steps: int | None = None,
    warmup: int | None = None,
    digits: int = 3,
    device: torch.device | str = "cpu",
    batch_sizes: tuple[int, ...] | list[int] = (256,),
    compile_mode: str | None = None,
    profile_steps: int = 10,
    progress=None,
) -> dict:
    """Every variant of :func:`plan` at every batch size, ``rounds`` rounds of ``warmup`` + ``steps`` steps each
    (default 10 + 60 on a CPU, 20 + 300 on a GPU); the figures bench.py has always reported (``ms_per_step``,
    ``lightning_over_bare``, ``mfu``, ...) are those of the first batch size, eager, at the config's precision.
    ``progress(line)`` is told of each variant's first round and of failures."""
    device = torch.device(device)
    default_steps, default_warmup = DEFAULT_STEPS.get(device.type, GPU_STEPS)
    steps, warmup = steps or default_steps, warmup or default_warmup
    batch_sizes = list(batch_sizes)
    say = progress or (lambda line: None)
    torch.manual_seed(0)
    matmul_before = torch.get_float32_matmul_precision()
    with tempfile.TemporaryDirectory(prefix="bench-train-") as tmp, _quiet():
        workdir = Path(tmp)
        defaults = compose([*device_overrides(device), f"data.digits={digits}"], workdir / "defaults")
        variants = plan(device, compile_mode, str(defaults.trainer.precision), str(defaults.matmul_precision))
        d = defaults.data
        shape = {
            "tokens": problem_format(d.digits, d.operators, d.reverse_answer, d.show_work).seq_len - 1,
            **{key: defaults.model[key] for key in ("d_model", "n_heads", "n_layers")},
        }
        by_batch, extras = {}, {}
        try:
            for batch_size in batch_sizes:
                figures, extra = _bench_batch(
                    variants, device, batch_size, digits, rounds, steps, warmup, compile_mode, workdir, say,
                    profile_steps if batch_size == batch_sizes[0] else 0,
                )  # fmt: skip
                by_batch[batch_size], extras[batch_size] = figures, extra
        finally:
            if device.type == "cuda":
                torch.set_float32_matmul_precision(matmul_before)
    return _report(variants, by_batch, extras, shape, device, batch_sizes, rounds, steps, warmup, digits, compile_mode)


def _bench_batch(variants, device, batch_size, digits, rounds, steps, warmup, compile_mode, workdir, say, profile):
    """One batch size: the variants taking turns for ``rounds`` rounds -> (per-variant timings, extra figures)."""
    if compile_mode:  # compile afresh for each batch size: no shape seen before, so none made dynamic
        from torch._dynamo.utils import counters  # no public API clears them (_compile_counts says why they are read)

        torch.compiler.reset()
        counters.clear()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    total = warmup + steps
    runs: dict[str, LightningRun | BareLoop] = {}
    samples = {v.name: [] for v in variants}
    first: dict[str, float] = {}
    compiled: dict[str, dict[str, int]] = {}
    errors: dict[str, str] = {}
    for round_ in range(rounds):
        for v in variants:
            if v.name in errors:
                continue
            try:
                if v.name not in runs:
                    overrides = run_overrides(device, v, batch_size, digits, total)
                    if v.path == "lightning":
                        runs[v.name] = LightningRun(overrides, workdir / f"b{batch_size}-{v.name}")
                    else:  # the model of the eager Lightning run's config, in a bare loop
                        eager = run_overrides(device, replace(variants[0], compile=None), batch_size, digits, total)
                        runs[v.name] = build_bare(v, eager, workdir / f"b{batch_size}-{v.name}", device)
                clock = Clock(device, warmup, steps)
                before = _compile_counts() if v.compile else None
                runs[v.name].run(clock, total)
                if not clock.complete:
                    raise RuntimeError(f"training stopped before the {total} steps asked for")
                if before is not None:
                    counts = compiled.setdefault(v.name, dict.fromkeys(before, 0))
                    for key, value in _compile_counts().items():
                        counts[key] += value - before[key]
                samples[v.name] += clock.samples
                if round_ == 0:
                    first[v.name] = clock.first_steps_seconds
                    say(
                        f"train: batch {batch_size}, {v.name}: first {warmup} steps {clock.first_steps_seconds:.2f} s, "
                        f"then {1000 * statistics.median(clock.samples):.3f} ms/step (round 1 of {rounds})"
                    )
            except Exception as e:  # noqa: BLE001 -- one variant failing (a compile on a new GPU) keeps the others
                errors[v.name] = f"{type(e).__name__}: {one_line(e, 300)}"
                runs.pop(v.name, None)
                say(f"train: batch {batch_size}, {v.name} failed: {errors[v.name]}")
    median = {name: statistics.median(s) for name, s in samples.items() if s and name not in errors}
    # every variant's model, optimizer and CUDA graphs at this batch size, alive together
    memory = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None
    extra: dict = {}
    bare = runs.get("bare")
    if profile and isinstance(bare, BareLoop):
        seq = next(bare.stream)
        c = bare.model.net.cfg
        extra["flops"] = step_flops(bare.model.teacher_forced_loss, seq, c.n_layers, c.d_model)
        nanogpt = runs.get("nanogpt")
        if isinstance(nanogpt, BareLoop):
            extra["reference_flops"] = step_flops(nanogpt.loss_of, seq, c.n_layers, c.d_model)
        if "bare" in median:
            extra["split"] = time_split(bare, profile, median["bare"])
        dm = runs["lightning"].kept[0] if isinstance(runs.get("lightning"), LightningRun) else None
        if dm is not None:
            extra["data"] = data_throughput(dm, device)
        extra["params"] = bare.model.net.n_params
    runs.clear()
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return {"median": median, "first": first, "compiled": compiled, "errors": errors, "memory_mb": memory}, extra


def _report(variants, by_batch, extras, shape, device, batch_sizes, rounds, steps, warmup, digits, compile_mode):
    head = batch_sizes[0]
    extra = extras[head]
    flops, matmul_flops = extra.get("flops", (None, None))
    reference_flops = extra.get("reference_flops", (None, None))[0]
    T = shape["tokens"]  # per problem: the model reads seq_len - 1 tokens
    ran = {v.peak for figures in by_batch.values() for v in variants if v.name in figures["median"]}
    peaks = {kind: matmul_peak(device, kind) for kind in ("fp32", "tf32", "bf16") if kind in ran}
    by_name = {v.name: v for v in variants}

    def flops_of(v: Variant) -> float | None:
        return reference_flops if v.path == "nanogpt" else flops

    batches, errors = {}, {}
    for batch_size, figures in by_batch.items():
        tokens = batch_size * T
        median = figures["median"]
        tps = {name: tokens / s for name, s in median.items()}
        ratio = lambda a, b, tps=tps: round(tps[a] / tps[b], 3) if a in tps and b in tps else None  # noqa: E731
        records = {}
        for v in variants:
            if v.name in figures["errors"]:
                records[v.name] = {**v.describe(), "error": figures["errors"][v.name]}
                errors[f"{batch_size}/{v.name}"] = figures["errors"][v.name]
                continue
            if v.name not in median:
                continue
            s, f = median[v.name], flops_of(v)
            first = figures["first"].get(v.name)
            records[v.name] = {
                **v.describe(),
                "ms_per_step": round(1000 * s, 3),
                "tokens_per_second": round(tps[v.name]) if v.name in tps else None,
                "mfu": round(f / s / peaks[v.peak], 4) if f and v.peak in peaks else None,
                "mfu_against": v.peak,
                "first_steps_seconds": round(first, 3) if first is not None else None,
                "startup_seconds": round(max(first - warmup * s, 0.0), 3) if first is not None else None,
                "over_reference_eager": ratio(v.name, "nanogpt"),
                **({"compiled": figures["compiled"][v.name]} if v.name in figures["compiled"] else {}),
            }
        lightning = [n for n in median if by_name[n].path == "lightning" and not by_name[n].compile]
        fastest = min(lightning, key=median.get) if len(lightning) > 1 else None
        batches[str(batch_size)] = {
            "tokens_per_step": tokens,
            "variants": records,
            "lightning_over_bare": ratio("lightning", "bare"),
            "model_over_nanogpt": ratio("bare", "nanogpt"),
            "lightning_over_reference_eager": ratio("lightning", "nanogpt"),
            "lightning_over_reference_compiled": ratio("lightning", "nanogpt_compiled"),
            "lightning_compiled_over_reference_compiled": ratio("lightning_compiled", "nanogpt_compiled"),
            "fastest_precision": {"variant": fastest, **by_name[fastest].describe()} if fastest else None,
            "peak_device_memory_mb": round(figures["memory_mb"]) if figures["memory_mb"] is not None else None,
        }
    head_figures = batches[str(head)]
    rec = head_figures["variants"]
    ms = lambda n: rec.get(n, {}).get("ms_per_step")  # noqa: E731
    tok = lambda n: rec.get(n, {}).get("tokens_per_second")  # noqa: E731
    paths = ("lightning", "bare", "nanogpt")
    share, busy = extra.get("split", (None, None))
    bare_s = by_batch[head]["median"].get("bare")
    timing = "median of per-step times" if device.type == "cpu" else "median of windows timed between two syncs"
    setup = (
        f"{digits}-digit addition, d_model={shape['d_model']}, {shape['n_heads']} heads, {shape['n_layers']} layers, "
        f"batch {head} x {T} tokens, fp32 weights, {described(device)}; {timing}, {rounds} rounds x {steps} steps "
        f"after {warmup} warm-up steps each"
    )
    lightning_peak = by_name["lightning"].peak
    return {
        "setup": setup,
        "device": str(device),
        "device_name": described(device),
        "batch_size": head,
        "batch_sizes": batch_sizes,
        "rounds": rounds,
        "steps": steps,
        "warmup": warmup,
        "timing": timing,
        "compile_mode": compile_mode,
        "ms_per_step": {n: ms(n) for n in paths},
        "tokens_per_second": tok("lightning"),
        "tokens_per_second_by_path": {n: tok(n) for n in paths},
        "lightning_over_bare": head_figures["lightning_over_bare"],
        "model_over_nanogpt": head_figures["model_over_nanogpt"],
        "lightning_over_reference_eager": head_figures["lightning_over_reference_eager"],
        "lightning_over_reference_compiled": head_figures["lightning_over_reference_compiled"],
        "lightning_compiled_over_reference_compiled": head_figures["lightning_compiled_over_reference_compiled"],
        "precision_by_measurement": {b: f["fastest_precision"] for b, f in batches.items()}
        if device.type == "cuda"
        else None,
        "flops_per_token": round(flops / (head * T)) if flops else None,
        "reference_flops_per_token": round(reference_flops / (head * T)) if reference_flops else None,
        "matmul_peak_gflops": round(peaks[lightning_peak] / 1e9, 1) if lightning_peak in peaks else None,
        "matmul_peaks_gflops": {kind: round(p / 1e9, 1) for kind, p in peaks.items()},
        "mfu": round(rec["lightning"]["mfu"], 3) if rec.get("lightning", {}).get("mfu") is not None else None,
        "matmul_share_of_step": round(share, 3) if share is not None else None,
        "device_busy_share_of_step": round(busy, 3) if busy is not None else None,
        "matmul_gflops_in_step": round(matmul_flops / (share * bare_s) / 1e9, 1)
        if share and matmul_flops and bare_s
        else None,
        "data_problems_per_second": round(extra["data"]) if "data" in extra else None,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "peak_device_memory_mb": round(max(f["memory_mb"] for f in by_batch.values()))
        if device.type == "cuda"
        else None,
        "params": extra.get("params"),
        "by_batch_size": batches,
        "left_out": LEFT_OUT,
        "errors": errors,
    }
