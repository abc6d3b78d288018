"""The GPU path. On a CPU-only machine the checks that need no GPU run (mixed precision with gradient clipping;
how often the training loop reads a value back from the device with the GPU's settings); the rest run where
CUDA is present:

    python -m pytest -m gpu          # on a machine with an NVIDIA GPU and the CUDA build of torch
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import lightning as L
import pytest
import torch

from tests.conftest import ROOT, SMALL_TASK, compose_config, run_train, with_run_dir
from training import TARGET_ACCURACY

SMALL = [
    *SMALL_TASK,
    "trainer.val_check_interval=50",
    "logger=none",
]
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_bf16_mixed_precision_with_gradient_clipping_trains_on_cpu(tmp_path):
    """bf16-mixed + gradient clipping + AdamW is what trainer=gpu runs; Lightning refuses a fused optimizer
    there, so this crashed at step 1 before. The CPU has a bf16 autocast too, so the combination is checked here."""
    done = run_train(
        tmp_path,
        *SMALL,
        "trainer.max_steps=20",
        "trainer.precision=bf16-mixed",
        "trainer.gradient_clip_val=1.0",
        "analysis=none",
        "callbacks.attention_maps=null",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((tmp_path / "results.json").read_text())["steps"] == 20


# batches of 64 rows, not 256: the same steps, draws and reads at a third of the time (what is counted is per step,
# not per row)
FEW_ROWS = ["data.batch_size=64"]
READS = ("item", "tolist", "numpy", "cpu", "__bool__", "__int__", "__float__")  # a device tensor's value to Python


class CountReads(L.Callback):
    """Counts reads of tensor values into Python (each one a host sync on a GPU) while training steps run."""

    def __init__(self):
        self.reads: list[str] = []
        self.steps = 0
        self._saved = {}

    def _count(self, name):
        original = self._saved[name]

        def read(tensor, *args, **kwargs):
            self.reads.append(name)
            return original(tensor, *args, **kwargs)

        return read

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if batch_idx == 1:  # from the second step on: the first one sets things up
            self._saved = {name: getattr(torch.Tensor, name) for name in READS}
            for name in READS:
                setattr(torch.Tensor, name, self._count(name))
        self.steps += batch_idx >= 1

    def on_validation_start(self, trainer, pl_module):
        for name, original in self._saved.items():
            setattr(torch.Tensor, name, original)
        self._saved = {}


def train_200_steps(tmp_path, watcher: L.Callback, *overrides: str) -> None:
    """200 training steps of train.py's own objects in this process, ``watcher`` the first callback; validation
    (and with it the end of the watch) only after the last step."""
    from training.assemble import assemble
    from training.resume import effective_config

    overrides = [
        *SMALL,
        *overrides,
        "trainer.max_steps=200",
        "trainer.val_check_interval=200",
        "target_accuracy=null",
        "analysis=none",
        "callbacks.attention_maps=null",
        f"hydra.run.dir={tmp_path}",
    ]
    cfg = effective_config(with_run_dir(compose_config(list(overrides)), tmp_path), list(overrides), multirun=False)
    matmul_precision = torch.get_float32_matmul_precision()  # assemble() sets TF32 for a CUDA run, process-wide
    try:
        datamodule, module, _, _, _, trainer = assemble(cfg)
        trainer.callbacks.insert(0, watcher)
        trainer.fit(module, datamodule=datamodule)
    finally:
        torch.set_float32_matmul_precision(matmul_precision)


@pytest.mark.parametrize(
    "setting",
    [
        [],
        ["position=abacus", "model.place_offset=2", "model.random_places=0.5"],
        ["data.operators=+-*", "data.hard_share=0.5", "data.hard_fade_steps=4000"],
    ],
    ids=["default", "places", "hard_cases"],
)
def test_with_the_gpu_settings_a_training_step_reads_nothing_back_from_the_device(tmp_path, setting):
    """The hot path's host syncs, counted on the CPU: with the loss guard checking every 50 steps and batches
    drawn 64 steps at a time (the settings a GPU gets by default), 200 steps read a value back a handful of
    times -- the guard every 50 steps, the progress bar and loggers every log_every_n_steps -- not every step.
    Also with digit places shifted and randomised each step (their highest place is known on the host), and with
    hard cases drawn (add10's recipe: scored column by column, as many columns as the format has digits)."""
    counter = CountReads()
    train_200_steps(
        tmp_path, counter, "callbacks.finite_loss.every_n_steps=50", "data.draw_steps=64", *setting, *FEW_ROWS
    )
    assert counter.steps == 199
    # guard: 4 checks; bar: the loss every 20 steps; the stream: one seed per draw of 64 steps
    assert len(counter.reads) <= 0.1 * counter.steps, sorted(counter.reads)


@pytest.mark.slow
def test_compiling_the_training_step_trains_and_saves_the_usual_checkpoint(tmp_path):
    """compile=default on the CPU (inductor; reduce-overhead adds CUDA graphs on a GPU): the run learns, and the
    checkpoint is the eager one's -- same keys, no compile setting saved -- so calc.py answers from it."""
    done = run_train(tmp_path, *SMALL, "trainer.max_steps=300", "analysis=none", "compile=default")
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["compile"] == "default" and results["test_exact_match"] > 0.5, results
    saved = torch.load(tmp_path / "checkpoints" / "best.ckpt", weights_only=True)
    assert set(saved["hyper_parameters"]) == {"model", "fmt", "optim"}
    assert all(key.startswith("net.") and "_orig_mod" not in key for key in saved["state_dict"])
    answered = subprocess.run(
        [sys.executable, str(ROOT / "calc.py"), "--ckpt", str(tmp_path), "12+34"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert answered.returncode == 0 and answered.stdout.strip(), answered.stderr


def test_a_finished_run_exits_while_a_thread_pool_waits_for_work():
    """compile= leaves torch.compile's thread pool idle in the process: train.py's quick exit must still stop it as
    the interpreter does (threading's exit hooks, then the joins), not wait for it forever."""
    code = (
        "import concurrent.futures, train, training.collector; pool = concurrent.futures.ThreadPoolExecutor(2); "
        "pool.submit(int).result(); print('written', flush=True); training.collector.exit_quickly()"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "written", done.stderr[-2000:]


@pytest.mark.slow
def test_compiled_training_on_every_width_stays_compiled_and_quiet(tmp_path):
    """experiment=add_length (10 widths, each a batch shape of its own) with compile=default: the width's layout is
    found outside the compiled loss, so its graphs cover every width -- no 'recompile_limit' (8 graphs, after
    which training ran eagerly) and no warning about a cached function traced inside the graph."""
    quiet = ["analysis=none", "logger=none", "callbacks.attention_maps=null", "data.n_val=200", "data.n_test=200"]
    done = run_train(tmp_path, "experiment=add_length", "compile=default", "trainer.max_steps=40", *quiet)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "recompile_limit" not in done.stderr and "lru_cache" not in done.stderr, done.stderr[-3000:]
    assert json.loads((tmp_path / "results.json").read_text())["steps"] == 40


@pytest.mark.gpu
@needs_cuda
def test_trainer_gpu_trains_draws_maps_and_analyses_on_cuda(tmp_path):
    done = run_train(tmp_path, *SMALL, "trainer=gpu", "trainer.max_steps=300", "callbacks.attention_maps.every_n_val=1")
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["status"] == "ok" and results["prunable_fraction"] is not None
    assert results["device"].startswith("cuda") and results["precision"] == "32-true"
    assert list((tmp_path / "attention").glob("step*_layer0.png")) and (tmp_path / "ablation.csv").exists()
    assert (tmp_path / "report.html").exists() and results["head_roles"]


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_a_learners_own_block_trains_and_is_analysed_on_cuda(tmp_path, precision):
    """model.attention= on the GPU: the block's mask, its cache and its hook points follow the module's device."""
    (tmp_path / "mine.py").write_text((ROOT / "examples" / "my_attention.py").read_text())
    spec = f"model.attention={tmp_path / 'mine.py'}:MultiHeadAttention"
    done = run_train(tmp_path / "run", *SMALL, "trainer=gpu", f"trainer.precision={precision}", spec)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["device"].startswith("cuda") and results["attention_block"]["mask"] == "hide"
    assert results["head_roles"] and (tmp_path / "run" / "report.html").exists()


@pytest.mark.gpu
@pytest.mark.parametrize("experiment", [None, "add10"])
@needs_cuda
def test_the_documented_gpu_commands_learn_their_task(tmp_path, experiment):
    """python train.py trainer=gpu [experiment=add10]: the issue's outcome, >= 99.9% on the held-out test set."""
    done = run_train(tmp_path, "trainer=gpu", *([f"experiment={experiment}"] if experiment else []), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["test_exact_match"] >= TARGET_ACCURACY and results["device"].startswith("cuda"), results


@pytest.mark.gpu
@needs_cuda
def test_on_cuda_the_training_steps_do_not_wait_for_the_gpu(tmp_path):
    """torch's sync debug mode warns at every host sync: between the first step and validation, only the loss
    guard's check (every 100 steps), the bar's read (every 20) and picking each draw's training problems (every
    64) may wait for the GPU: ~15 in 199 steps, where waiting every step would be hundreds."""
    import warnings

    class SyncWatch(L.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            if batch_idx == 1:
                torch.cuda.set_sync_debug_mode("warn")

        def on_validation_start(self, trainer, pl_module):
            torch.cuda.set_sync_debug_mode("default")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            train_200_steps(tmp_path, SyncWatch(), "trainer=gpu")
        finally:
            torch.cuda.set_sync_debug_mode("default")
    syncs = [w for w in caught if "called a synchronizing CUDA operation" in str(w.message)]
    assert len(syncs) <= 0.1 * 199, [str(w.message)[:200] for w in syncs[:5]]


@pytest.mark.gpu
@pytest.mark.parametrize("setting", ["trainer.precision=bf16-mixed", "compile=reduce-overhead"])
@needs_cuda
def test_the_other_gpu_settings_train_too(tmp_path, setting):
    """bf16-mixed with clipping (once a crash at step 1) and CUDA graphs through torch.compile."""
    done = run_train(tmp_path, *SMALL, "trainer=gpu", "trainer.max_steps=300", "analysis=none", setting)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["test_exact_match"] > 0.5, results


@pytest.mark.gpu
@needs_cuda
def test_a_gpu_checkpoint_answers_on_a_cpu_only_machine(tmp_path):
    done = run_train(tmp_path, *SMALL, "trainer=gpu", "trainer.max_steps=100", "analysis=none")
    assert done.returncode == 0, done.stderr[-3000:]
    cpu_only = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    answered = subprocess.run(
        [sys.executable, str(ROOT / "calc.py"), "--ckpt", str(tmp_path), "12+34", "5+6"],
        cwd=ROOT,
        env=cpu_only,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert answered.returncode == 0 and len(answered.stdout.splitlines()) == 2, answered.stderr


@pytest.mark.gpu
@needs_cuda
def test_the_attention_block_agrees_on_cpu_and_cuda():
    from model.attention import MultiHeadAttention

    attn = MultiHeadAttention(64, 4).eval()
    x = torch.randn(2, 9, 64)
    cpu_out, cpu_weights = attn(x, need_weights=True)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")  # full fp32 on the GPU too (a CUDA training run sets TF32)
    try:
        gpu_out, gpu_weights = attn.cuda()(x.cuda(), need_weights=True)
    finally:
        torch.set_float32_matmul_precision(before)
    torch.testing.assert_close(gpu_out.cpu(), cpu_out, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(gpu_weights.cpu(), cpu_weights, atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
@needs_cuda
def test_experiment_add_length_trains_on_cuda_in_bf16(tmp_path):
    """position=relative adds place scores as a float attention mask, which CUDA's kernels take only in the
    queries' dtype (bf16 under autocast)."""
    bf16 = ("trainer=gpu", "trainer.precision=bf16-mixed", "trainer.max_steps=30")
    done = run_train(tmp_path, "experiment=add_length", *bf16, "logger=none", "analysis=none")
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["device"].startswith("cuda") and results["precision"] == "bf16-mixed"
