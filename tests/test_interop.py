"""The calculator outside tinycalc: the Hugging Face export (calc.py --export hf), the TransformerLens loader
(model.lens) and the activation-patching example (docs/patching.py), on checkpoints trained here."""

from __future__ import annotations

import base64
import contextlib
import copy
import importlib.util
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import calc
from data.expressions import Problem
from data.text import answer_text, prompt_text
from data.tokenizer import CharTokenizer
from model.calculator import Calculator
from model.checkpoint import load_calculator
from model.export import ExportError, check_problems, export_hf, gpt2_model, hf_tokenizer
from model.lens import transformer_lens_model
from model.optional import INTEROP_INSTALL, MissingExtraError
from tests.conftest import ROOT, SMALL_TASK, regenerate_module

HAVE_EXTRA = all(importlib.util.find_spec(m) for m in ("transformers", "transformer_lens", "safetensors"))
needs_extra = pytest.mark.skipif(not HAVE_EXTRA, reason=f"the interop extra is not installed: {INTEROP_INSTALL}")

# 2-digit addition on a small model: 99.5% of 200 held-out problems after 400 steps, ~5 s of training on one
# thread (at batch 128 it was 64.5% at 400 steps on this project's CPU: too close to the plateau's edge)
SMALL = [
    *SMALL_TASK,
    "model.d_model=32",
    "model.n_heads=2",
    "optim.lr=1e-2",
    "optim.warmup_steps=20",
    "logger=none",
    "analysis=none",
    "callbacks.attention_maps=null",
    "threads=1",
]
RUNS = {
    "add": [*SMALL, "trainer.max_steps=400", "trainer.val_check_interval=400"],
    "gqa": [*SMALL, "model.n_kv_heads=1", "trainer.max_steps=1", "trainer.val_check_interval=1"],  # 2 heads, 1 k/v
}


@pytest.fixture(scope="session")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Run directories trained by ``python train.py`` as a user would, both trainings side by side."""
    root = tmp_path_factory.mktemp("interop_runs")
    env = {**os.environ, "WANDB_MODE": "offline", "OMP_NUM_THREADS": "1"}
    procs = {
        name: subprocess.Popen(
            [sys.executable, str(ROOT / "train.py"), f"hydra.run.dir={root / name}", *args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, args in RUNS.items()
    }
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, f"training {name} failed:\n{out[-3000:]}"
    return {name: root / name for name in RUNS}


@pytest.fixture(scope="session")
def calc_add(runs) -> Calculator:
    return load_calculator(runs["add"])


@pytest.fixture(scope="session")
def problems(calc_add) -> list[Problem]:
    """1,000 random 2-digit additions (the same draw the export checks itself on)."""
    return check_problems(calc_add, 1000, seed=1)


@pytest.fixture(scope="session")
def exported(runs, tmp_path_factory) -> tuple[Path, str]:
    """python calc.py --ckpt RUN --export hf OUT (in this process: a subprocess would load torch again): OUT and
    the one line it printed."""
    out = tmp_path_factory.mktemp("hf") / "calculator"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        status = calc.main(["--ckpt", str(runs["add"]), "--export", "hf", str(out)])
    lines = stdout.getvalue().splitlines()
    assert status == 0 and len(lines) == 1 and lines[0].startswith(f"wrote {out}: GPT2LMHeadModel"), lines
    return out, lines[0]


@pytest.fixture(scope="session")
def hf_dir(exported) -> Path:
    return exported[0]


# ---- Hugging Face ------------------------------------------------------------------------------------------
@needs_extra
def test_the_docs_read_the_export_check_from_its_line(exported):
    """docs/regenerate.py's export section reads the check's figures back from calc.py --export's line."""
    check = regenerate_module().EXPORT_CHECK.search(exported[1])
    assert check is not None, exported[1]
    assert check["n"] == "1,000" and float(check["diff"]) <= 1e-4 and check["agree"] == "1,000"


@needs_extra
def test_export_writes_a_gpt2_directory_with_card(hf_dir, calc_add):
    assert {p.name for p in hf_dir.iterdir()} == {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "README.md",
        "lab.html",  # calc.py hands the export its lab page (tests/test_lab.py checks the page itself)
    }
    assert '"tok_emb.weight"' in (hf_dir / "lab.html").read_text()  # the page holds the model's weights
    config = json.loads((hf_dir / "config.json").read_text())
    cfg = calc_add.net.cfg
    assert config["model_type"] == "gpt2" and config["architectures"] == ["GPT2LMHeadModel"]
    assert config["activation_function"] == "gelu"  # exact GELU, not GPT-2's tanh approximation
    assert (config["n_embd"], config["n_head"], config["n_layer"], config["n_inner"], config["n_positions"]) == (
        cfg.d_model,
        cfg.n_heads,
        cfg.n_layers,
        cfg.mlp_ratio * cfg.d_model,
        cfg.block_size,
    )
    assert config["tie_word_embeddings"] is True and config["tinycalc"]["reverse_answer"] is True
    assert config["tinycalc"]["larger_first"] is False  # a lab it is dropped on asks any a - b
    tokenizer_config = json.loads((hf_dir / "tokenizer_config.json").read_text())
    assert tokenizer_config["tokenizer_class"] == "PreTrainedTokenizerFast"
    card = (hf_dir / "README.md").read_text()
    assert "least significant digit first" in card and "held-out" in card
    assert "answers equal tinycalc's on 1,000 of 1,000" in card
    assert f'AutoModelForCausalLM.from_pretrained("{hf_dir}")' in card


HF_ONLY = textwrap.dedent("""
    # transformers alone: the checkout is not on sys.path (python -I, another cwd), so no tinycalc code loads
    import importlib.util, json, sys
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    assert importlib.util.find_spec("model") is None and importlib.util.find_spec("data") is None
    out_dir, work = sys.argv[1], sys.argv[2]
    job = json.load(open(f"{work}/job.json"))
    tokenizer = AutoTokenizer.from_pretrained(out_dir)
    model = AutoModelForCausalLM.from_pretrained(out_dir).eval()
    with torch.inference_mode():
        prompts = tokenizer(job["prompts"], return_tensors="pt").input_ids
        out = model.generate(prompts, max_new_tokens=job["answer_len"], do_sample=False)
        logits = model(input_ids=torch.tensor(job["sequences"])).logits
    torch.save({"prompts": prompts, "logits": logits}, f"{work}/logits.pt")
    answers = tokenizer.batch_decode(out[:, prompts.shape[1]:], skip_special_tokens=True)
    json.dump({"answers": answers, "class": type(model).__name__}, open(f"{work}/answers.json", "w"))
""")


def run_alone(name: str, script: str, hf_dir: Path, job: dict, work: Path, **env: str) -> None:
    """``script`` (saved as ``work/name``) in a fresh ``python -I`` started in ``work``, so no tinycalc code is on
    its path, given the export and ``work/job.json``; it must exit 0. ``env``: more environment variables."""
    (work / "job.json").write_text(json.dumps(job))
    (work / name).write_text(script)
    result = subprocess.run(
        [sys.executable, "-I", str(work / name), str(hf_dir), str(work)],
        cwd=work,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]


@needs_extra
def test_hf_model_equals_ours_without_tinycalc_code(hf_dir, calc_add, problems, tmp_path):
    """Logits within 1e-5 (fp32) and the same greedy answers on 1,000 problems, with transformers alone."""
    fmt = calc_add.fmt
    seqs = calc_add.encode(problems)  # (N, seq_len)
    job = {
        "prompts": [prompt_text(fmt, p.a, p.op, p.b) for p in problems],
        "answer_len": fmt.answer_len,
        "sequences": seqs[:, :-1].tolist(),
    }
    run_alone("hf_only.py", HF_ONLY, hf_dir, job, tmp_path)
    theirs = torch.load(tmp_path / "logits.pt")
    assert torch.equal(theirs["prompts"], seqs[:, : fmt.prompt_len])  # the tokenizer writes [BOS] + characters
    with torch.inference_mode():
        ours, _ = calc_add.net(seqs[:, :-1])
    assert (theirs["logits"] - ours).abs().max() <= 1e-5

    written = json.loads((tmp_path / "answers.json").read_text())
    assert written["class"] == "GPT2LMHeadModel"
    hf_answers = [int(text[::-1]) if text.isdigit() else None for text in written["answers"]]  # reversed digits
    our_answers = [a.value for a in calc_add.answer(problems)]
    assert hf_answers == our_answers
    right = sum(a == p.truth for a, p in zip(our_answers, problems, strict=True))
    assert 0.8 * len(problems) <= right  # a meaningful model: most answers right (mistakes must agree too)


@needs_extra
def test_hf_eager_attentions_equal_our_patterns(hf_dir, calc_add, problems):
    """With attn_implementation="eager", output_attentions are every layer x head pattern of ours."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(hf_dir, attn_implementation="eager").eval()
    tokens = calc_add.encode(problems)[:, :-1]
    with torch.inference_mode():
        out = model(input_ids=tokens, output_attentions=True)
        ours, weights = calc_add.net(tokens, need_weights=True)  # the explicit softmax path, as eager
    assert len(out.attentions) == len(weights)
    assert max(float((a - w).abs().max()) for a, w in zip(out.attentions, weights, strict=True)) <= 1e-5
    assert (out.logits - ours).abs().max() <= 1e-4  # fp32 rounding of another op order (2.8e-5 measured)


@needs_extra
def test_the_logit_check_would_catch_gpt2s_tanh_gelu(calc_add, problems):
    """The comparison is not vacuous: GPT-2's default activation (tanh-approximate GELU) is caught."""
    from transformers import GPT2LMHeadModel

    from model.export import compare

    exact = gpt2_model(calc_add)
    config = copy.deepcopy(exact.config)
    config.activation_function = "gelu_new"
    approx = GPT2LMHeadModel(config)
    approx.load_state_dict(exact.state_dict())
    tokenizer = hf_tokenizer(calc_add)
    assert compare(calc_add, exact, tokenizer, problems[:200]).max_logit_diff <= 1e-5
    assert compare(calc_add, approx.eval(), tokenizer, problems[:200]).max_logit_diff > 1e-4


def random_calculator(seed: int = 0, fmt=None, **model) -> Calculator:
    """An untrained calculator with large random weights (so a wrong mapping shows in the logits)."""
    from data.build import problem_format
    from model.build import network_for

    torch.manual_seed(seed)
    fmt, tokenizer = fmt or problem_format(digits=2), CharTokenizer()
    net = network_for({"vocab_size": tokenizer.vocab_size, "block_size": fmt.seq_len, **model}, fmt)
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(0.0, 0.5)
    return Calculator(net, fmt, tokenizer)


@needs_extra
def test_export_without_biases_and_untied(tmp_path):
    """bias=False becomes exact zero biases, an untied head GPT-2's own lm_head; logits still equal."""
    from transformers import AutoModelForCausalLM

    calc_ = random_calculator(d_model=32, n_heads=4, bias=False, tie_weights=False)
    check = export_hf(calc_, tmp_path / "out", n_check=200)
    assert check.max_logit_diff <= 1e-5 and check.answers_agree == 200
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "out")
    assert model.config.tie_word_embeddings is False
    assert torch.equal(model.lm_head.weight, calc_.net.lm_head.weight)
    assert not torch.equal(model.lm_head.weight, model.transformer.wte.weight)
    assert torch.count_nonzero(model.transformer.h[0].attn.c_attn.bias) == 0
    export_hf(calc_, tmp_path / "out", n_check=10, extras={"lab.html": "<p>lab</p>"})
    export_hf(calc_, tmp_path / "out", n_check=10)  # a previous export is overwritten, its lab removed
    assert not (tmp_path / "out" / "lab.html").exists()


@needs_extra
@pytest.mark.parametrize("position_embedding", [True, False])
def test_the_place_embedding_folds_into_gpt2s_position_table(tmp_path, position_embedding):
    """A fixed layout makes position + place one table: the export and the lens answer exactly like ours."""
    calc_ = random_calculator(d_model=32, n_heads=4, place_embedding=True, position_embedding=position_embedding)
    check = export_hf(calc_, tmp_path / "out", n_check=200)
    assert check.max_logit_diff <= 1e-5 and check.answers_agree == 200
    tokens = calc_.encode([Problem(12, "+", 34), Problem(99, "+", 1)])[:, :-1]
    logit_diff, pattern_diff = lens_vs_ours(transformer_lens_model(calc_), calc_.net, tokens)
    assert logit_diff <= 1e-4 and pattern_diff <= 1e-5


@needs_extra
def test_an_answer_with_working_exports_whole(tmp_path):
    """show_work answers are longer: the export generates all of it and its card explains the working."""
    from data.build import problem_format

    calc_ = random_calculator(fmt=problem_format(2, "*", show_work=True), d_model=32, n_heads=4)
    check = export_hf(calc_, tmp_path / "out", n_check=200)
    assert check.max_logit_diff <= 1e-5 and check.answers_agree == 200
    card = (tmp_path / "out" / "README.md").read_text()
    assert "working of long multiplication" in card and f"max_new_tokens={calc_.fmt.answer_len}" in card


@needs_extra
def test_a_refused_export_leaves_nothing(tmp_path, monkeypatch):
    small = random_calculator(d_model=16, n_heads=2)
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ExportError, match="not empty and not a previous export"):
        export_hf(small, tmp_path, n_check=10)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]

    monkeypatch.setattr("model.export.MAX_LOGIT_DIFF", -1.0)  # as if the loaded-back export disagreed with us
    with pytest.raises(ExportError, match="logits differ from ours .* nothing was written"):
        export_hf(small, tmp_path / "new", n_check=10)
    assert not (tmp_path / "new").exists()


@needs_extra
def test_grouped_query_export_is_one_line_and_nonzero(runs, tmp_path, capsys):
    """calc.main is what python calc.py runs (sys.exit(main())): an exception would fail this test."""
    out = tmp_path / "gqa"
    status = calc.main(["--ckpt", str(runs["gqa"]), "--export", "hf", str(out)])
    captured = capsys.readouterr()
    assert status == 2 and captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: cannot export to Hugging Face GPT-2: this model uses "
        "grouped-query attention (2 query heads share 1 key/value head)"
    )
    assert not out.exists()


def test_missing_extra_is_one_line_naming_pip(tmp_path, monkeypatch, capsys):
    """Without the extra (real in CI's first suites, simulated here where it is installed): one line, status 2."""
    from model.export import export_command

    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers -> ImportError
    monkeypatch.setitem(sys.modules, "transformer_lens", None)
    small = random_calculator(d_model=16, n_heads=2)
    assert export_command(small, "hf", str(tmp_path / "out")) == 2  # what calc.py --export hf runs
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == (
        "error: exporting to Hugging Face needs the optional package 'transformers', which is not installed; "
        f"install the interop extra:  {INTEROP_INSTALL}\n"
    )
    assert not (tmp_path / "out").exists()
    with pytest.raises(MissingExtraError, match=r"^TransformerLens needs .*'transformer_lens'.*\[interop\]\"$"):
        transformer_lens_model(small)


# ---- TransformerLens ---------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def lens_add(calc_add):
    return transformer_lens_model(calc_add)


@needs_extra
def test_lens_model_has_our_dims_tokens_and_no_weight_processing(lens_add, calc_add):
    cfg, tl = calc_add.net.cfg, lens_add.cfg
    assert (tl.d_model, tl.n_heads, tl.d_head, tl.n_layers, tl.d_mlp, tl.d_vocab, tl.n_ctx, tl.act_fn) == (
        cfg.d_model,
        cfg.n_heads,
        cfg.head_dim,
        cfg.n_layers,
        cfg.mlp_ratio * cfg.d_model,
        cfg.vocab_size,
        cfg.block_size,
        "gelu",
    )
    assert lens_add.compatibility_mode is False  # no fold_ln / centring: those change the weights and logits
    assert torch.equal(lens_add.blocks[0].attn.q.weight, calc_add.net.blocks[0].attn.W_q.weight)
    prompt = calc_add.encode([Problem(12, "+", 34)])[:, : calc_add.fmt.prompt_len]
    assert torch.equal(lens_add.to_tokens("12+34="), prompt)  # [BOS] 1 2 + 3 4 =, [BOS] once
    assert lens_add.to_string(prompt[0]) == "[BOS]12+34="


def lens_vs_ours(model, net, tokens: torch.Tensor) -> tuple[float, float]:
    """(max |logit diff|, max |attention pattern diff| over every layer x head) between TransformerLens and ours."""
    with torch.inference_mode():
        logits, cache = model.run_with_cache(tokens)
        ours, weights = net(tokens, need_weights=True)  # weights: per layer (B, n_heads, T, T)
        patterns = [cache[f"blocks.{layer}.attn.hook_pattern"] for layer in range(len(weights))]
    assert all(p.shape == w.shape for p, w in zip(patterns, weights, strict=True))
    return (
        float((logits - ours).abs().max()),
        max(float((p - w).abs().max()) for p, w in zip(patterns, weights, strict=True)),
    )


@needs_extra
def test_lens_logits_and_every_pattern_equal_ours(lens_add, calc_add, problems):
    """fp32: patterns within 1e-5; logits within fp32 rounding of a different op order (ours: fused SDPA vs
    explicit softmax differ by as much, see docs/interop.md). fp64: both within 1e-9, so the mapping is exact."""
    tokens = calc_add.encode(problems)[:, :-1]  # (1000, T)
    logit_diff, pattern_diff = lens_vs_ours(lens_add, calc_add.net, tokens)
    assert pattern_diff <= 1e-5 and logit_diff <= 1e-4

    net64, model64 = copy.deepcopy(calc_add.net).double(), copy.deepcopy(lens_add).to(torch.float64)
    logit_diff, pattern_diff = lens_vs_ours(model64, net64, tokens)
    assert logit_diff <= 1e-9 and pattern_diff <= 1e-9


@needs_extra
def test_lens_hook_z_is_per_head_like_ours(lens_add, calc_add, problems):
    """Zeroing head (1, 0) through TransformerLens's hook_z [batch, pos, head, d_head] = our hook ablation of it."""
    from model.hooks import zero_ablated

    tokens = calc_add.encode(problems[:200])[:, :-1]

    def zero_head(z, hook):
        z[:, :, 0] = 0.0
        return z

    with torch.inference_mode():
        ablated = lens_add.run_with_hooks(tokens, fwd_hooks=[("blocks.1.attn.hook_z", zero_head)])
        with zero_ablated(calc_add.net, [(1, 0)]):
            ours, _ = calc_add.net(tokens)
        intact, _ = calc_add.net(tokens)
    assert (ablated - ours).abs().max() <= 1e-4 < (ours - intact).abs().max()


@needs_extra
def test_lens_loads_grouped_query_attention(runs, problems):
    gqa = load_calculator(runs["gqa"])
    model = transformer_lens_model(runs["gqa"])
    assert model.cfg.n_key_value_heads == 1 and model.blocks[0].attn.k.weight.shape[0] == model.cfg.d_head
    logit_diff, pattern_diff = lens_vs_ours(model, gqa.net, gqa.encode(problems[:200])[:, :-1])
    assert logit_diff <= 1e-4 and pattern_diff <= 1e-5


LENS_ONLY = textwrap.dedent("""
    # TransformerLens' own loader on the export: no tinycalc code is importable (python -I, cwd outside the checkout)
    import importlib.util, json, sys
    import torch
    from transformer_lens.model_bridge import TransformerBridge
    assert importlib.util.find_spec("model") is None and importlib.util.find_spec("data") is None
    out_dir, work = sys.argv[1], sys.argv[2]
    job = json.load(open(f"{work}/job.json"))
    model = TransformerBridge.boot_transformers(out_dir, device="cpu")
    with torch.inference_mode():
        logits, cache = model.run_with_cache(torch.tensor(job["sequences"]))
    torch.save({
        "prompt": model.to_tokens(job["prompt"]),
        "logits": logits,
        "patterns": [cache[f"blocks.{layer}.attn.hook_pattern"] for layer in range(model.cfg.n_layers)],
    }, f"{work}/lens.pt")
""")


@needs_extra
def test_transformer_lens_loads_the_export_from_any_directory(hf_dir, calc_add, problems, tmp_path):
    """TransformerBridge.boot_transformers(OUT_DIR) in a process started in tmp_path, without PYTHONPATH: its
    to_tokens writes [BOS] once (the probe of the tokenizer passed), and its logits and every layer x head
    pattern equal ours, within the fp32 tolerances of the boot_native bridge above."""
    fmt, seqs = calc_add.fmt, calc_add.encode(problems)[:, :-1]
    job = {"prompt": prompt_text(fmt, problems[0].a, problems[0].op, problems[0].b), "sequences": seqs.tolist()}
    run_alone("lens_only.py", LENS_ONLY, hf_dir, job, tmp_path, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    theirs = torch.load(tmp_path / "lens.pt")
    assert torch.equal(theirs["prompt"], seqs[:1, : fmt.prompt_len])  # [BOS] 1 2 + 3 4 =, [BOS] once
    with torch.inference_mode():
        ours, weights = calc_add.net(seqs, need_weights=True)
    assert (theirs["logits"] - ours).abs().max() <= 1e-4
    assert len(theirs["patterns"]) == len(weights)
    assert max(float((p - w).abs().max()) for p, w in zip(theirs["patterns"], weights, strict=True)) <= 1e-5


@needs_extra
def test_the_export_tokenizer_writes_pad_for_an_unknown_character():
    """What lets TransformerLens' loader probe it with "a"; our own tokenizer still refuses the character."""
    from data.tokenizer import UnknownCharacterError

    calc = random_calculator()
    tokenizer, ours = hf_tokenizer(calc), calc.tokenizer
    assert tokenizer("a").input_ids == [ours.bos_id, ours.pad_id]
    assert tokenizer("12+34=").input_ids == ours.encode("12+34=", bos=True)
    with pytest.raises(UnknownCharacterError):
        ours.encode("a")


# ---- the export opened in a lab page -----------------------------------------------------------------------
ANSWER_ALL = """texts => texts.map(t => {  // type each problem into the lab, as a learner does; read the answer shown
    const box = document.querySelector(".lab-problem");
    box.value = t;
    box.dispatchEvent(new Event("input"));
    return document.querySelector(".lab-result").textContent;
})"""


def other_models_lab(tmp_path: Path) -> Path:
    """A lab page built for another model (3-digit problems, 1 layer x 4 heads, d_model 16) than the export's."""
    from analysis.lab import lab_page, lab_payload
    from data.build import problem_format

    other = random_calculator(seed=3, fmt=problem_format(digits=3), d_model=16, n_heads=4, n_layers=1)
    path = tmp_path / "other_lab.html"
    path.write_text(lab_page(lab_payload(other.net, other.fmt, other.tokenizer.vocab)))
    return path


def drop_files(page, files: list[Path]) -> None:
    """Drop ``files`` onto the lab, as a browser's drag and drop hands them to the page."""
    payload = [[f.name, base64.b64encode(f.read_bytes()).decode()] for f in files]
    transfer = page.evaluate_handle(
        """files => {
            const transfer = new DataTransfer();
            for (const [name, data] of files) {
                transfer.items.add(new File([Uint8Array.from(atob(data), c => c.charCodeAt(0))], name));
            }
            return transfer;
        }""",
        payload,
    )
    page.dispatch_event("#lab", "drop", {"dataTransfer": transfer})


@needs_extra
def test_an_export_dropped_on_another_models_lab_runs_there(browser, hf_dir, calc_add, problems, tmp_path):
    """The export's config.json + model.safetensors dropped on a lab page built for another model: the page's
    logits equal ours (heads on and one switched off), its answers typed in equal calc.py's (Calculator.answer) on
    300 problems, and with a head switched off they equal the Python ablation's; nothing is requested."""
    from model.hooks import zero_ablated

    page = browser.new_page()
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    url = other_models_lab(tmp_path).as_uri()
    page.goto(url)
    drop_files(page, [hf_dir / "config.json", hf_dir / "model.safetensors"])
    page.wait_for_selector(".lab-opened:has-text('Opened')")
    cfg = calc_add.net.cfg
    assert len(page.query_selector_all(".lab-switch")) == cfg.n_layers * cfg.n_heads
    assert "Mean ablation is off" in page.inner_text(".lab-opened")  # an export carries no heads' means

    # the page's forward pass on the opened model: logits as ours, heads on and switched off
    batch = problems[:300]
    texts = [f"{p.a}{p.op}{p.b}" for p in batch]
    answers = {(None, None): [a.value for a in calc_add.answer(batch)]}
    for layer in range(cfg.n_layers):
        for head in range(cfg.n_heads):
            with zero_ablated(calc_add.net, [(layer, head)]):
                answers[layer, head] = [a.value for a in calc_add.answer(batch)]
    changed = {lh: sum(x != y for x, y in zip(v, answers[None, None], strict=True)) for lh, v in answers.items()}
    layer, head = max(changed, key=lambda lh: changed[lh])  # the head whose loss changes the most answers
    assert changed[layer, head] > 0  # the comparison below can tell a switched head from an intact one
    label = f"L{layer}h{head}"
    seqs = calc_add.encode(batch[:20])[:, :-1]  # (20, T): every token but [EOS]
    worst = 0.0
    for switched in ({}, {label: "off"}):
        with zero_ablated(calc_add.net, [(layer, head)] if switched else []), torch.no_grad():
            want = calc_add.net(seqs)[0]
        got = torch.tensor(page.evaluate(
            """([seqs, s]) => {
                const m = TinycalcLab.modelIn(document.getElementById("lab"));
                return seqs.map(ids => TinycalcLab.forward(m, ids, s).logits.map(r => [...r]));
            }""",
            [seqs.tolist(), switched],
        ))  # fmt: skip
        worst = max(worst, float((got - want).abs().max()))
    assert worst <= 1e-4, f"max |page - torch| = {worst:.2e}"

    # the lab as a learner uses it: type problems, switch a head off, type them again
    shown = lambda values: [str(v) if v is not None else "?" for v in values]  # noqa: E731 -- the page's "?": unreadable
    assert page.evaluate(ANSWER_ALL, texts) == shown(answers[None, None])
    page.click(f"[data-head={label}]")
    assert page.inner_text(f"[data-head={label}]") == f"{label} off"
    page.click(f"[data-head={label}]")  # on again: no "mean" between (an export carries no means) ...
    assert page.inner_text(f"[data-head={label}]") == f"{label} on"
    page.click(f"[data-head={label}]")  # ... and off
    assert page.evaluate(ANSWER_ALL, texts) == shown(answers[layer, head])
    assert requests == [url]  # the files came from the drop: nothing was asked of the network


EXPORT_KINDS = {  # what model/export.py maps differently: biases, an untied head, places folded, formats
    "untied_no_bias": ({}, {"bias": False, "tie_weights": False}),
    "places_folded": ({}, {"place_embedding": True}),
    "mul2_working": ({"operators": "*", "show_work": True}, {}),
    "short_b_working": ({"operators": "*", "show_work": True, "b_digits": 2}, {}),  # b's limit carried over
    "add_sub": ({"operators": "+-"}, {"n_layers": 1}),
}


@needs_extra
@pytest.mark.parametrize("kind", EXPORT_KINDS)
def test_every_export_the_lab_opens_is_the_model(browser, tmp_path, kind):
    """Untrained exports of each mapping and format, chosen in a lab: the page reads the format as lab.py writes
    it, and its logits (a head switched off too) and greedy answers are the model's."""
    from analysis.lab import lab_payload
    from data.build import problem_format
    from model.hooks import zero_ablated

    fmt_args, model_args = EXPORT_KINDS[kind]
    calc_ = random_calculator(fmt=problem_format(digits=2, **fmt_args), d_model=16, n_heads=2, **model_args)
    export_hf(calc_, tmp_path / "out", n_check=10)
    page = browser.new_page()
    page.goto(other_models_lab(tmp_path).as_uri())
    page.set_input_files(".lab-open", [tmp_path / "out" / "config.json", tmp_path / "out" / "model.safetensors"])
    page.wait_for_selector(".lab-opened:has-text('Opened')")
    shown = "TinycalcLab.modelIn(document.getElementById('lab'))"
    assert page.evaluate(f"{shown}.fmt") == lab_payload(calc_.net, calc_.fmt, calc_.tokenizer.vocab)["format"]
    batch = check_problems(calc_, 5)
    seqs = calc_.encode(batch)[:, :-1]
    for switched in ({}, {"L0h1": "off"}):
        with zero_ablated(calc_.net, [(0, 1)] if switched else []), torch.no_grad():
            want = calc_.net(seqs)[0]
        got = torch.tensor(page.evaluate(
            f"([seqs, s]) => seqs.map(ids => TinycalcLab.forward({shown}, ids, s).logits.map(r => [...r]))",
            [seqs.tolist(), switched],
        ))  # fmt: skip
        assert float((got - want).abs().max()) <= 1e-4, (kind, switched)
    texts = [f"{p.a}{p.op}{p.b}" for p in batch]
    written = page.evaluate(
        f"ts => ts.map(t => TinycalcLab.decode({shown}, TinycalcLab.encodeProblem({shown}, t).ids).written)", texts
    )
    assert written == [a.text for a in calc_.answer(batch)]


@needs_extra
def test_a_wrong_drop_is_one_line_and_the_lab_keeps_its_model(browser, hf_dir, tmp_path):
    """Files chosen that are not a whole F32 tinycalc export: one error line each, and the page's own model stays."""
    from safetensors.torch import load_file, save_file

    config = json.loads((hf_dir / "config.json").read_text())
    weights = load_file(hf_dir / "model.safetensors")
    bad = {}
    for name, files in {
        "half": {"config.json": config, "model.safetensors": {k: v.half() for k, v in weights.items()}},
        "no_tinycalc": {"config.json": {k: v for k, v in config.items() if k != "tinycalc"}},
        "wider_mlp": {"config.json": config | {"n_inner": 3 * config["n_embd"]}},
        "no_config": {},
    }.items():
        folder = tmp_path / name
        folder.mkdir()
        files = {"config.json": config, "model.safetensors": weights} | files
        if name == "no_config":
            del files["config.json"]
        for file, content in files.items():
            if file == "config.json":
                (folder / file).write_text(json.dumps(content))
            else:
                save_file(content, folder / file)
        bad[name] = sorted(folder.iterdir())
    expected = {
        "half": "error: model.safetensors holds transformer.",  # whichever tensor comes first ...
        "no_tinycalc": "error: config.json has no tinycalc block: not a model written by python calc.py --export hf",
        "wider_mlp": "error: model.safetensors: transformer.h.0.mlp.c_fc.weight is 32x128, config.json makes it 32x96",
        "no_config": "error: open an export's config.json and model.safetensors together",
    }
    page = browser.new_page()
    page.goto(other_models_lab(tmp_path).as_uri())
    before = page.inner_text(".lab-answer")
    for name, files in bad.items():
        page.set_input_files(".lab-open", files)
        page.wait_for_selector(".lab-opened .lab-error")
        line = page.inner_text(".lab-opened")
        assert line.startswith(expected[name]) and "\n" not in line, (name, line)
        if name == "half":  # ... as F16
            assert " as F16; the lab reads float32 (F32) weights only" in line, line
        assert page.evaluate("TinycalcLab.modelIn(document.getElementById('lab')) === M")  # the page's own model
        assert page.inner_text(".lab-answer") == before and len(page.query_selector_all(".lab-switch")) == 4
        page.evaluate("document.querySelector('.lab-opened').replaceChildren()")


# ---- the worked example: activation patching of a carry ----------------------------------------------------
def load_example():
    spec = importlib.util.spec_from_file_location("patching_example", ROOT / "docs" / "patching.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_carry_pairs_flip_only_the_carry():
    from data.build import problem_format

    example, fmt = load_example(), problem_format(digits=3)
    for place in (1, 2, 3):
        pairs = example.carry_pairs(fmt, place, 200, seed=place)
        for clean, bad, digit, bad_digit in zip(
            pairs.clean, pairs.corrupted, pairs.clean_digit, pairs.corrupted_digit, strict=True
        ):
            differ = [i for i, (x, y) in enumerate(zip(clean, bad, strict=True)) if x != y]
            # only the operands' digits at place k-1 differ: a at 3 - place, b at 7 - place (text without [BOS])
            assert set(differ) <= {fmt.digits - place, 2 * fmt.digits + 1 - place} and differ
            a, b = int(clean[:3]), int(clean[4:7])
            carry_in = (a % 10**place + b % 10**place) >= 10**place
            a2, b2 = int(bad[:3]), int(bad[4:7])
            assert carry_in and (a2 % 10**place + b2 % 10**place) < 10**place
            assert answer_text(fmt, a + b)[place] == digit != bad_digit == answer_text(fmt, a2 + b2)[place]
    with pytest.raises(ValueError, match="choose an answer digit"):
        example.carry_pairs(fmt, 0, 10)


@needs_extra
def test_patching_example_runs_and_respects_causality(runs, lens_add, calc_add, tmp_path):
    example = load_example()
    pairs = example.carry_pairs(calc_add.fmt, 1, 100)
    result = example.patch_carry(lens_add, pairs)
    labels = example.position_labels(calc_add.fmt, 1)
    n_layers, n_pos, n_heads = result["head_out"].shape
    assert (n_layers, n_pos, n_heads) == (2, len(labels), 2) and labels[-1] == "r0"
    assert result["clean_ld"] > result["corrupted_ld"]
    nothing = 1e-5  # a patch that copies an equal activation: rounding only
    first = labels.index("a0")  # the first token that differs between clean and corrupted
    for name in ("resid_pre", "head_out", "mlp_out"):
        assert result[name][:, :first].abs().max() < nothing  # before it, clean and corrupted activations are equal
    embeddings = result["resid_pre"][0]  # layer 0 input: only the two changed tokens' embeddings differ
    changed = [labels.index("a0"), labels.index("b0")]
    assert all(abs(embeddings[p]) < nothing < embeddings[c] for p in range(n_pos) if p not in changed for c in changed)
    assert result["top_head_attention"].sum() == pytest.approx(1.0, abs=1e-5)

    out = tmp_path / "patching.png"
    assert example.main(["--ckpt", str(runs["add"]), "--n", "50", "--out", str(out)]) == 0
    assert out.stat().st_size > 10_000


# ---- patching: ours against TransformerLens's own --------------------------------------------------------------
@pytest.fixture(scope="session")
def carry_pairs(calc_add):
    """Pairs studying the tens digit r1 of 2-digit additions (base and carry kinds), and their runs."""
    from analysis.engine.graph import ComponentGraph
    from analysis.engine.pair_runs import pair_runs
    from analysis.engine.pairs import contrast_pairs, studied_digits

    graph = ComponentGraph(calc_add.net)
    pairs = contrast_pairs(calc_add.fmt, studied_digits(calc_add.fmt)[1], n=64)
    return graph, pair_runs(graph, pairs)


@needs_extra
def test_head_patching_equals_transformer_lens_activation_patching(lens_add, calc_add, carry_pairs):
    """engine.pair_runs.head_patching (through our hook points) = transformer_lens.patching's per-head z patching."""
    from transformer_lens.patching import get_act_patch_attn_head_out_all_pos

    from analysis.engine.pair_runs import head_patching

    graph, runs = carry_pairs
    ours = head_patching(calc_add.net, runs)
    with torch.inference_mode():
        _, clean_cache = lens_add.run_with_cache(runs.pairs.inputs)
        theirs = get_act_patch_attn_head_out_all_pos(
            lens_add, runs.pairs.corrupted_inputs, clean_cache, lambda logits: runs.pairs.logit_diff(logits).mean()
        )
    theirs = (theirs.cpu() - runs.corrupted_ld) / runs.gap
    assert ours.abs().max() > 0.05  # the pairs do move some head
    assert torch.allclose(ours, theirs, atol=1e-4), (ours, theirs)


@needs_extra
def test_head_attribution_equals_transformer_lens_attribution_patching(lens_add, calc_add, carry_pairs):
    """engine.pair_runs.head_attribution at one step (plain attribution patching) = TransformerLens 4's node-level
    attribution_patch, its per-position head scores summed over positions (a head patched at every position).
    TransformerLens's metric sees one example at a time, so each pair is scored on its own and averaged."""
    from transformer_lens.tools.analysis.attribution_patching import attribution_patch

    from analysis.engine.pair_runs import head_attribution

    graph, runs = carry_pairs
    pairs = runs.pairs
    ours = head_attribution(calc_add.net, runs, steps=1) * runs.gap  # in logits, not shares
    L, H = ours.shape
    theirs = torch.zeros(L, H)
    for i in range(len(pairs)):
        right, wrong = int(pairs.clean_token[i]), int(pairs.corrupted_token[i])
        metric = lambda logits, r=right, w=wrong: logits[0, pairs.query, r] - logits[0, pairs.query, w]  # noqa: E731
        scores = attribution_patch(lens_add, pairs.inputs[i : i + 1], pairs.corrupted_inputs[i : i + 1], metric)
        for node, score in scores.node_scores.items():
            if node.kind == "attn_head_out":
                theirs[node.layer, node.head] += score / len(pairs)
    assert ours.abs().max() > 0.1  # some head is credited
    assert torch.allclose(ours, theirs, atol=1e-3, rtol=1e-3), (ours, theirs)
