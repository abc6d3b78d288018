"""bench.py: the training section's figures are measured and consistent, on the CPU and (where there is one) on
a CUDA GPU; a device that is not there is one line; the converge section reads its runs; and the nanoGPT-style
reference it races against is the same function as our model."""

from __future__ import annotations

import copy
import io
import json
import subprocess
import sys
import time

import pytest
import torch
from rich.console import Console

import bench
from benchmarks import train_speed as speed
from benchmarks.train_speed import Clock, plan, reference_loss, run_overrides, step_flops
from model.reference import RefGPT
from model.transformer import Transformer
from tests.conftest import ROOT, SMALL_TASK, compose_config
from training import TARGET_ACCURACY
from training.load import calculator_module

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
TINY = ["--repeat", "1", "--steps", "4", "--warmup", "2"]  # a few steps a variant: the figures, not their values


def bench_json(capsys, *argv: str) -> dict:
    assert bench.main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_train_benchmark_reports_side_by_side_figures(capsys):
    started = time.perf_counter()
    out = bench_json(capsys, "train", *TINY)
    elapsed = time.perf_counter() - started  # measured here: every figure of time lies inside it
    r = out["train"]
    for path in ("lightning", "bare", "nanogpt"):
        # the median of 4 steps is at most the mean of the 2 longest, which ran inside the section
        assert 0 < 2 * r["ms_per_step"][path] / 1000 < elapsed
    tps = r["tokens_per_second_by_path"]  # rounded to whole tokens: the ratios agree within that rounding

    def agrees(ratio, a, b):  # the ratio's own rounding (3 decimals), and what rounding each rate moves it
        return ratio == pytest.approx(tps[a] / tps[b], abs=1e-3 + tps[a] / tps[b] * (0.5 / tps[a] + 0.5 / tps[b]))

    assert agrees(r["lightning_over_bare"], "lightning", "bare")
    assert r["tokens_per_second"] == r["tokens_per_second_by_path"]["lightning"]
    assert 0 < r["mfu"] < 1 and r["matmul_peak_gflops"] > 1
    assert r["data_problems_per_second"] > 200 * 256 / elapsed  # 200 batches of 256 drawn inside the section
    assert 0 < r["matmul_share_of_step"] < 1
    # ours skips the last layer's MLP on prompt positions, so it does less work per token than the reference
    assert r["flops_per_token"] < r["reference_flops_per_token"]
    # the headline figures at the top, as before, and the new ones
    for key in ("lightning_over_bare", "model_over_nanogpt", "mfu", "tokens_per_second"):
        assert out[key] == r[key]
    assert out["lightning_over_reference_eager"] == r["lightning_over_reference_eager"]
    assert agrees(r["lightning_over_reference_eager"], "lightning", "nanogpt")
    assert out["lightning_over_reference_compiled"] is None  # no compiled variants on a CPU unless asked
    assert out["device"] == r["device"] == "cpu" and r["batch_sizes"] == [r["batch_size"]] == [256]
    assert (r["steps"], r["warmup"], r["rounds"], r["compile_mode"], r["errors"]) == (4, 2, 1, None, {})
    batch = r["by_batch_size"]["256"]
    assert list(batch["variants"]) == ["lightning", "bare", "nanogpt"]
    assert batch["tokens_per_step"] == 256 * 13 and r["precision_by_measurement"] is None
    for name, v in batch["variants"].items():
        assert v["ms_per_step"] == pytest.approx(r["ms_per_step"][name], abs=0.01)
        assert 0 < v["first_steps_seconds"] < elapsed and v["mfu_against"] == "fp32"
        warmup_at_steady_pace = r["warmup"] * v["ms_per_step"] / 1000
        assert v["startup_seconds"] == pytest.approx(max(v["first_steps_seconds"] - warmup_at_steady_pace, 0), abs=2e-3)
    assert r["matmul_peaks_gflops"] == {"fp32": r["matmul_peak_gflops"]}
    text = render(bench.print_train, r)
    assert "ours: train.py's Lightning path" in text and "eager, fp32" in text and "left out of our path" in text


def test_the_report_derives_each_figure_from_the_timings(monkeypatch):
    """Made-up step times (what a clock would have measured) in, the reported figures out, each by its formula:
    startup = first steps - warm-up steps at the steady pace (never below 0), tokens/s, ratios, MFU."""
    monkeypatch.setattr(speed, "matmul_peak", lambda device, kind: 1e13)  # FLOP/s, not measured
    variants = plan(torch.device("cpu"), None)
    median = {"lightning": 0.004, "bare": 0.002, "nanogpt": 0.0025}  # seconds a step
    first = {"lightning": 0.5, "bare": 0.01, "nanogpt": 0.03}  # seconds of the 10 warm-up steps
    figures = {"median": median, "first": first, "compiled": {}, "errors": {}, "memory_mb": None}
    extra = {"flops": (4e9, 3e9), "reference_flops": (5e9, 4e9)}
    shape = {"tokens": 13, "d_model": 64, "n_heads": 4, "n_layers": 2}
    r = speed._report(variants, {256: figures}, {256: extra}, shape, torch.device("cpu"), [256], 3, 60, 10, 3, None)
    v = r["by_batch_size"]["256"]["variants"]
    assert [v[n]["startup_seconds"] for n in ("lightning", "bare", "nanogpt")] == [
        0.46,
        0.0,
        0.005,
    ]  # bare: 0.01 - 0.02
    assert r["ms_per_step"] == {"lightning": 4.0, "bare": 2.0, "nanogpt": 2.5}
    assert r["tokens_per_second"] == 832_000 and r["tokens_per_second_by_path"]["bare"] == 1_664_000  # 256 x 13 / s
    assert (r["lightning_over_bare"], r["model_over_nanogpt"], r["lightning_over_reference_eager"]) == (
        0.5,
        1.25,
        0.625,
    )
    assert [v[n]["mfu"] for n in ("lightning", "bare", "nanogpt")] == [0.1, 0.2, 0.2]  # FLOPs / s / peak
    assert r["mfu"] == 0.1 and r["flops_per_token"] == round(4e9 / (256 * 13))


def render(printer, result: dict) -> str:
    out = io.StringIO()
    printer(result, Console(file=out, width=200, highlight=False))
    return out.getvalue()


def test_the_train_table_prints_the_gpu_figures_too(capsys):
    """The printing of what only a GPU run has (compiled variants, precisions, an error), from a made-up result."""
    r = {
        "setup": "made up",
        "compile_mode": "reduce-overhead",
        "batch_size": 256,
        "warmup": 20,
        "lightning_over_bare": 0.9,
        "model_over_nanogpt": 1.1,
        "lightning_over_reference_eager": 1.0,
        "mfu": 0.01,
        "flops_per_token": 491_313,
        "reference_flops_per_token": 616_320,
        "tokens_per_second": 2_500_000,
        "matmul_peak_gflops": 400_000.0,
        "matmul_peaks_gflops": {"fp32": 50_000.0, "tf32": 400_000.0, "bf16": 700_000.0},
        "precision_by_measurement": {"256": {"variant": "lightning_bf16", "precision": "bf16-mixed",
                                             "matmul_precision": "high", "path": "lightning", "compile": None}},
        "matmul_share_of_step": 0.2,
        "matmul_gflops_in_step": 9_000.0,
        "device_busy_share_of_step": 0.4,
        "data_problems_per_second": 90_000_000,
        "peak_rss_mb": 2_000,
        "peak_device_memory_mb": 900,
        "left_out": speed.LEFT_OUT,
        "errors": {"256/nanogpt_compiled": "RuntimeError: boom"},
    }  # fmt: skip
    figures = {"ms_per_step": 1.3, "tokens_per_second": 2_500_000, "mfu": 0.01, "mfu_against": "tf32",
               "first_steps_seconds": 0.5, "startup_seconds": 0.2, "over_reference_eager": 1.0}  # fmt: skip
    variants = {}
    for v in plan(torch.device("cuda"), "reduce-overhead"):
        variants[v.name] = {**v.describe(), **figures}
        if v.compile:
            variants[v.name]["compiled"] = {"graphs": 2, "graph_breaks": 0, "cudagraph_skips": 0}
    variants["nanogpt_compiled"] = {**plan(torch.device("cuda"), "reduce-overhead")[-1].describe(), "error": "boom"}
    ratios = {"lightning_over_reference_compiled": None, "lightning_compiled_over_reference_compiled": 0.9}
    r["by_batch_size"] = {"256": {"tokens_per_step": 3328, "variants": variants, **ratios}}
    text = render(bench.print_train, r)
    shown = ["eager, fp32", "eager, TF32", "compiled, TF32", "eager, bf16-mixed", "mode='reduce-overhead'"]
    shown += ["failed: boom", "2 graph(s)", "batch 256: bf16-mixed", "GPU is busy 40%", "peak GPU memory 900 MB"]
    for words in shown:
        assert words in text, words


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_device_cuda_without_a_gpu_is_one_line_and_exit_status_2(capsys):
    assert bench.main(["train", "--device", "cuda", "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1, err
    assert err.startswith(f"error: --device cuda: no CUDA GPU is visible here (torch {torch.__version__}, ")
    assert err.endswith("); use --device cpu, or on a GPU machine install the CUDA build of torch\n")


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="an Apple GPU is available here")
def test_device_mps_without_an_apple_gpu_is_one_line_and_exit_status_2(capsys):
    assert bench.main(["decode", "--device", "mps"]) == 2
    assert capsys.readouterr().err == "error: --device mps: no Apple GPU is available here; use --device cpu\n"


def test_device_auto_and_bad_options(capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert bench.resolve_device("auto") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert bench.resolve_device("auto") == torch.device("cuda")
    for argv in (["--device", "tpu"], ["--batch-sizes", "256,x"], ["--seeds", "-1"]):
        with pytest.raises(SystemExit) as stopped:
            bench.main(argv)
        assert stopped.value.code == 2
    capsys.readouterr()


OUT_OF_BOUNDS = [  # (arguments, what the one line must say): each number an option takes is bounded
    (["decode", "--n", "100000000000"], "--n 100000000000: use a whole number in [1, 1,000,000]"),  # a traceback
    (["decode", "--n", "0"], "--n 0: use a whole number in [1, 1,000,000]"),
    (["decode", "--repeat", "0"], "--repeat 0: use a whole number in [1, 100]"),
    (["train", "--digits", "100"], "--digits 100: use a whole number in [1, 17]"),
    (["train", "--steps", "0"], "--steps 0: use a whole number in [1, 1,000,000]"),
    (["train", "--warmup", "10000000"], "--warmup 10000000: use a whole number in [1, 1,000,000]"),
    (["train", "--batch-sizes", "256,100000000"], "--batch-sizes 100000000: the run would need about"),
]


@pytest.mark.parametrize("argv,needle", OUT_OF_BOUNDS, ids=lambda a: " ".join(a) if isinstance(a, list) else "")
def test_an_option_out_of_bounds_is_one_line_before_any_benchmark_runs(argv, needle, capsys, monkeypatch):
    ran = []
    monkeypatch.setitem(bench.SECTIONS, argv[0], lambda *a: ran.append(a))
    assert bench.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith("error: ") and needle in err, err
    assert ran == []


def test_the_gpu_plan_measures_precisions_and_compiled_paths_and_composes():
    """What a CUDA run times, and that each of its Lightning runs is a valid train.py config (composed here: the
    composition needs no GPU)."""
    cuda = torch.device("cuda")
    variants = plan(cuda, "reduce-overhead", "32-true", "high")
    assert [v.name for v in variants] == [
        "lightning", "bare", "nanogpt", "lightning_fp32", "lightning_bf16",
        "lightning_compiled", "bare_compiled", "nanogpt_compiled",
    ]  # fmt: skip
    assert {v.name: v.peak for v in variants if v.path == "lightning"} == {
        "lightning": "tf32", "lightning_fp32": "fp32", "lightning_bf16": "bf16", "lightning_compiled": "tf32"
    }  # fmt: skip
    # a config that chose bf16-mixed gets the two fp32 ones beside it
    assert [v.name for v in plan(cuda, None, "bf16-mixed", "high")][3:] == ["lightning_fp32", "lightning_tf32"]
    cpu_plan = plan(torch.device("cpu"), None)  # a CPU's matmul precision is never set
    assert [v.name for v in cpu_plan] == ["lightning", "bare", "nanogpt"] and {v.matmul for v in cpu_plan} == {None}
    for v in (v for v in variants if v.path == "lightning"):
        cfg = compose_config(run_overrides(cuda, v, 4096, 3, 320))
        assert (cfg.trainer.accelerator, cfg.trainer.precision, cfg.matmul_precision) == ("gpu", v.precision, v.matmul)
        assert cfg.compile == v.compile and cfg.data.batch_size == 4096
        assert cfg.trainer.max_steps == cfg.trainer.val_check_interval == 320  # validation after the timed steps
        assert cfg.callbacks.progress_bar is None and cfg.trainer.enable_progress_bar is False
        assert cfg.callbacks.finite_loss is not None and cfg.callbacks.attention_maps is None


def test_the_clock_times_a_gpu_window_with_two_syncs_and_a_cpu_step_by_step(monkeypatch):
    syncs = []
    monkeypatch.setattr(speed, "synchronize", lambda device: syncs.append(time.perf_counter()))
    window = Clock(torch.device("cpu"), warmup=2, steps=5, window=True)
    window.begin()
    for _ in range(window.total_steps):
        time.sleep(0.002)
        window.tick()
    assert len(syncs) == 3 and window.complete and len(window.samples) == 1  # begin, end of warm-up, end
    assert window.samples[0] == pytest.approx((syncs[2] - syncs[1]) / 5, abs=1e-4)  # timed just after the sync
    assert window.first_steps_seconds == pytest.approx(syncs[1] - syncs[0], abs=1e-3)
    syncs.clear()
    steps = Clock(torch.device("cpu"), warmup=2, steps=5)
    steps.begin()
    for _ in range(steps.total_steps):
        time.sleep(0.002)
        steps.tick()
    assert len(steps.samples) == 5 and steps.complete and min(steps.samples) >= 0.002 and len(syncs) == 1
    assert Clock(torch.device("cuda"), 1, 1).window  # a GPU: always a window


def test_converge_runs_each_recipe_per_seed_and_reads_its_results(capsys):
    small = [*SMALL_TASK, "trainer.max_steps=20", "trainer.val_check_interval=10", "analysis=none",
             "callbacks.attention_maps=null", "logger=none"]  # fmt: skip
    out = bench_json(capsys, "converge", "--seeds", "3", *(f"--override={o}" for o in small))
    r = out["converge"]
    assert r["seeds"] == [3] and r["errors"] == {} and r["device"] == "cpu"
    assert list(r["variants"]) == ["default", "previous", "reference"]
    default, previous, reference = (r["variants"][n] for n in ("default", "previous", "reference"))
    assert default["command"].startswith("python train.py data.digits=2 ")
    assert previous["command"].startswith("python train.py optim=adamw trainer.max_steps=1800 trainer.val_check_")
    (run,) = default["runs"]
    assert run["seed"] == 3 and run["steps"] == 20 and run["wall_seconds"] > run["train_seconds"] > 0
    assert 0 <= run["test_exact_match"] <= 1 and run["reached"] == (run["test_exact_match"] >= TARGET_ACCURACY)
    assert 0 <= run["unseen_exact_match"] <= 1 and run["phases"]["total"] < run["wall_seconds"]
    assert previous["runs"][0]["steps"] == 20  # the run's own overrides come after the previous recipe
    (ref,) = reference["runs"]
    assert ref["steps"] == 20 and ref["train_seconds"] > 0 and "wall_seconds" not in ref
    assert default["median_wall_seconds"] == run["wall_seconds"] and default["reached"] == int(run["reached"])
    shown = render(bench.print_converge, r)
    assert "default: median" in shown and "reference" in shown


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, needs_cuda])])
def test_never_seen_problems_are_in_no_held_out_set_and_were_not_trained_on(device):
    """On CUDA the run's batches come from a CUDA generator (other numbers than a CPU one's from the same seed):
    the ones it trained on are drawn again there."""
    from benchmarks.converge import unseen_problems
    from data.arithmetic import DataConfig
    from data.build import data_module

    dm = data_module(DataConfig(seed=1))
    seqs = unseen_problems(dm, steps=40, n=2000, device=device)
    assert seqs.device.type == "cpu" and len(seqs) == 2000 and len(torch.unique(seqs, dim=0)) == 2000
    stream = iter(dm.training_stream(device))
    trained = torch.cat([next(stream).cpu() for _ in range(40)])
    others = torch.cat(
        [
            trained,
            *(data_module(DataConfig(seed=s)).held_out_set(k) for s in range(5) for k in ("val", "test")),
        ]
    )
    rows = torch.cat([seqs, others])
    _, ids = torch.unique(rows, dim=0, return_inverse=True)
    assert set(ids[:2000].tolist()).isdisjoint(ids[2000:].tolist())


def test_the_reference_computes_on_its_input_device():
    ref = RefGPT(17, 14).to("meta")
    seen = []
    ref.wpe.register_forward_pre_hook(lambda module, args: seen.append(args[0].device))
    assert ref(torch.zeros(2, 13, dtype=torch.long, device="meta")).device.type == "meta"
    assert seen == [torch.device("meta")]  # the positions too, not a CPU arange


# ---- on a CUDA GPU ------------------------------------------------------------------------------------------
def bench_cli(*argv: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "bench.py"), *argv], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.gpu
@needs_cuda
def test_bench_train_on_cuda_times_every_variant_compiled_too():
    done = bench_cli("train", "--device", "cuda", "--json", *TINY, "--batch-sizes", "256,512")
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    r = out["train"]
    assert r["device"].startswith("cuda") and r["errors"] == {} and r["compile_mode"] == "reduce-overhead"
    assert r["timing"] == "median of windows timed between two syncs" and r["batch_sizes"] == [256, 512]
    names = set(r["by_batch_size"]["256"]["variants"])
    assert {"lightning", "bare", "nanogpt", "lightning_compiled", "bare_compiled", "nanogpt_compiled"} <= names
    assert len([n for n in names if n.startswith("lightning") and not n.endswith("compiled")]) == 3  # precisions
    for batch in ("256", "512"):
        for name, v in r["by_batch_size"][batch]["variants"].items():
            assert v["tokens_per_second"] > 0 and 0 < v["mfu"] < 1, (batch, name, v)
            if name.endswith("_compiled"):
                assert v["compiled"]["graphs"] >= 1, (batch, name, v)  # it was compiled, not run eagerly
        assert r["precision_by_measurement"][batch]["variant"].startswith("lightning")
    for key in ("lightning_over_reference_eager", "lightning_over_reference_compiled"):
        assert out[key] == r[key] > 0
    assert set(r["matmul_peaks_gflops"]) == {"fp32", "tf32", "bf16"} and r["mfu"] > 0
    assert 0 < r["matmul_share_of_step"] < 1 and 0 < r["device_busy_share_of_step"] and r["peak_device_memory_mb"] > 0
    assert r["flops_per_token"] < r["reference_flops_per_token"]


@pytest.mark.gpu
@needs_cuda
def test_bench_converge_on_cuda_trains_with_trainer_gpu():
    small = [*SMALL_TASK, "trainer.max_steps=50", "trainer.val_check_interval=25", "analysis=none"]
    done = bench_cli("converge", "--device", "cuda", "--seeds", "0", "--json", *(f"--override={o}" for o in small))
    assert done.returncode == 0, done.stderr[-3000:]
    r = json.loads(done.stdout)["converge"]  # its shape: test_converge_runs_each_recipe_per_seed_and_reads_its_results
    default = r["variants"]["default"]
    assert "trainer=gpu" in default["command"] and default["runs"][0]["steps"] == 50 and r["errors"] == {}, r


@pytest.mark.gpu
@needs_cuda
def test_the_reference_agrees_on_cpu_and_cuda():
    torch.manual_seed(0)
    ref = RefGPT(17, 14)
    seq = torch.randint(17, (8, 14))
    expected = reference_loss(ref, seq, 9)
    with speed.matmul_precision(torch.device("cuda"), "highest"):  # full fp32, whatever an earlier test set
        on_gpu = reference_loss(copy.deepcopy(ref).cuda(), seq.cuda(), 9).cpu()
    torch.testing.assert_close(on_gpu, expected, atol=1e-5, rtol=1e-4)


def reference_with_weights_of(net: Transformer) -> RefGPT:
    """A RefGPT holding ``net``'s weights: W_q, W_k, W_v stacked into c_attn, the other names mapped."""
    ref = RefGPT(net.cfg.vocab_size, net.cfg.block_size, net.cfg.d_model, net.cfg.n_heads, net.cfg.n_layers)
    with torch.no_grad():
        ref.wte.weight.copy_(net.tok_emb.weight)
        ref.wpe.weight.copy_(net.pos_emb.weight)
        ref.ln_f.load_state_dict(net.ln_f.state_dict())
        for mine, theirs in zip(net.blocks, ref.blocks, strict=True):
            a = mine.attn
            theirs.c_attn.weight.copy_(torch.cat([a.W_q.weight, a.W_k.weight, a.W_v.weight]))
            theirs.c_attn.bias.copy_(torch.cat([a.W_q.bias, a.W_k.bias, a.W_v.bias]))
            for src, dst in (
                (a.W_o, theirs.c_proj),
                (mine.mlp.fc_in, theirs.c_fc),
                (mine.mlp.fc_out, theirs.mlp_proj),
                (mine.ln_attn, theirs.ln_1),
                (mine.ln_mlp, theirs.ln_2),
            ):
                dst.load_state_dict(src.state_dict())
    return ref


def test_the_reference_computes_our_model_given_our_weights():
    torch.manual_seed(0)
    module = calculator_module(
        model=dict(vocab_size=17, block_size=14),
        fmt=dict(digits=3),
        optim=dict(lr=1e-3, weight_decay=0.1, betas=[0.9, 0.98], warmup_steps=0, min_lr_ratio=0.1),
    )
    ref = reference_with_weights_of(module.net)
    assert sum(p.numel() for p in module.net.parameters()) == sum(p.numel() for p in ref.parameters())
    seq = torch.randint(17, (8, 14))
    torch.testing.assert_close(ref(seq[:, :-1]), module.net(seq[:, :-1])[0])
    torch.testing.assert_close(reference_loss(ref, seq, module.fmt.prompt_len), module.forced_scores(seq)[0])


def test_step_flops_counts_what_runs():
    torch.manual_seed(0)
    ref = RefGPT(17, 14)
    seq = torch.randint(17, (4, 14))
    total, matmul = step_flops(lambda s: reference_loss(ref, s, 9), seq, n_layers=2, d_model=64)
    linear_weights = sum(m.weight.numel() for m in ref.modules() if isinstance(m, torch.nn.Linear))
    tokens = 4 * 13
    assert matmul == 6 * linear_weights * tokens  # forward 2 x weights x tokens, backward twice that
    assert total == matmul + 12 * 2 * 13 * 64 * tokens


def test_threads_section_times_each_thread_count_quiet_and_loaded_and_ends_its_load(capsys, monkeypatch):
    """python bench.py threads: per model, per load, per thread count a step's time, the default beside it, the load
    average beside every figure; the background processes it starts are gone after."""
    from benchmarks import threads as threads_bench
    from training.threads import DEFAULT_THREADS

    started, busy = [], threads_bench.busy_processes

    def watched(n):
        started.append(n)
        return busy(n)

    monkeypatch.setattr(threads_bench, "MODELS", {"default": []})  # one model: the figures, not their values
    monkeypatch.setattr(threads_bench, "thread_counts", lambda cores: [1, 1])  # 2 threads under load: seconds a step
    monkeypatch.setattr(threads_bench, "busy_processes", watched)
    out = bench_json(capsys, "threads", "--steps", "1", "--warmup", "1", "--repeat", "1")
    r = out["step_time_by_threads"]
    counts = [1, 1]
    assert r["thread_counts"] == counts
    assert [(row["load"], row["threads"]) for row in r["rows"]] == [
        (load, t) for load in ("quiet", "2 busy") for t in counts
    ]
    for row in r["rows"]:
        assert row["ms_per_step"] > 0 and row["parameters"] > 0 and len(row["load_average"]) == 2
        if row["threads"] == 1:
            assert row["over_one_thread"] == 1.0
    assert r["default_threads"] == DEFAULT_THREADS == out["threads"]  # the count the other sections ran with
    assert started == [0, 2]  # quiet, then 2 busy processes
    text = render(bench.print_threads, r)
    assert "2 busy" in text and "default: 1 thread" in text


@pytest.mark.parametrize(("cores", "counts"), [(1, [1]), (2, [1, 2]), (6, [1, 2, 4, 6]), (8, [1, 2, 4, 8])])
def test_thread_counts_double_up_to_the_cores(cores, counts):
    from benchmarks.threads import thread_counts

    assert thread_counts(cores) == counts


def test_the_background_load_is_ended_by_the_benchmark():
    from benchmarks.threads import busy_processes

    with busy_processes(2) as procs:
        assert all(p.poll() is None for p in procs)  # running
    assert all(p.poll() is not None for p in procs)


def test_the_threads_runs_table_prints_each_run_against_its_quiet_time():
    r = {"command": "python train.py analysis=none logger=none [threads=2]", "cores": 2, "busy_processes": 2}
    r["rows"] = [
        {"run": "threads=2 (torch's default)", "load": "quiet", "train_seconds": 10.0, "wall_seconds": 20.0,
         "steps": 30, "load_average": [1.0, 1.5], "over_quiet": 1.0},
        {"run": "threads=2 (torch's default)", "load": "2 busy", "train_seconds": 150.0, "wall_seconds": 170.0,
         "steps": 30, "load_average": [1.5, 3.2], "over_quiet": 15.0},
    ]  # fmt: skip
    text = render(bench.print_threads_runs, r)
    assert "150.0" in text and "15.00" in text and "1.5 -> 3.2" in text and "2 busy" in text


def test_collector_section_measures_a_full_collection_and_the_exit_frozen_and_not(capsys, monkeypatch):
    """python bench.py collector: over what a command imports (here torch alone: seconds, not the commands' 15 s), a
    full collection scans the imports' objects unless they are frozen, and then takes a fraction of the time."""
    from benchmarks import collector

    monkeypatch.setattr(collector, "IMPORTS", {"torch alone": "torch"})
    r = bench_json(capsys, "collector", "--repeat", "1")["collector"]
    (row,) = r["rows"]
    assert row["command"] == "torch alone" and r["repeat"] == 1
    assert row["scanned"] > 50_000 and row["scanned_frozen"] < row["scanned"] // 10  # torch's objects, then none
    assert row["collect_ms_frozen"] < row["collect_ms"] / 3
    assert row["exit_ms"] > 0 and row["exit_ms_frozen"] > 0
    text = render(bench.print_collector, r)
    assert "torch alone" in text and f"{row['scanned']:,}" in text


def test_calc_times_the_whole_answer_against_it_with_lightning_first_and_says_its_answer(run_add, capsys):
    """bench.py calc: fresh interpreters taking turns, each answering the same problem (one answer between them),
    the medians and their ratio in the JSON; without --ckpt, one line saying what to give it."""
    from benchmarks import calc_start

    r = calc_start.bench_calc(str(run_add), 2, repeat=1, say=lambda *_: None)
    assert r["problem"] == "12+45"
    assert set(r["median_s"]) == set(calc_start.KINDS) and all(len(t) == 1 for t in r["seconds"].values())
    assert len(r["answers"]) == 1 and r["answers"][0].isdigit()  # both kinds answer, and alike
    assert r["speedup"] == r["median_s"]["with Lightning imported first"] / r["median_s"]["calc.py"]
    assert bench.main(["calc"]) == 1
    assert "python bench.py calc --ckpt runs/<run>" in capsys.readouterr().out
