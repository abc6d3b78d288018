"""The multi-head attention lessons' exercises and quiz, answered by running our code (see docs/course.md).

Every number here is measured on a real ``MultiHeadAttention`` (shapes, parameter counts, FLOPs, cache
sizes) and compared with what the lessons say it should be.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
import runpy
import shlex
import subprocess
import sys

import hydra
import pytest
import torch
import yaml
from omegaconf import OmegaConf
from torch.utils import flop_counter

from model.attention import KVCache, MultiHeadAttention
from model.transformer import Transformer, TransformerConfig
from model.walkthrough import walkthrough
from tests.conftest import CONFIGS, ROOT, compose_config, regenerate_module, with_run_dir
from train import assemble
from training.cli import check_command_line
from training.resume import effective_config

torch.manual_seed(0)


def captured(attn: MultiHeadAttention, x: torch.Tensor, **kwargs):
    """Run the block and return (out, weights, z) with z, every head's output (B, T, n_heads, head_dim), read
    at ``hook_z``."""
    seen = {}
    handle = attn.hook_z.add_hook(lambda z: seen.update(z=z))
    try:
        out, weights = attn(x, **kwargs)
    finally:
        handle.remove()
    return out, weights, seen["z"]


def n_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


# ---- Exercise 1 and quiz question 2: d_k = d_model / h -------------------------------------------------


@pytest.mark.parametrize("d_model,n_heads,expected_head_dim", [(1024, 16, 64), (768, 12, 64)])
def test_exercise_1_and_quiz_2_head_dim(d_model, n_heads, expected_head_dim):
    attn = MultiHeadAttention(d_model, n_heads).eval()
    assert attn.head_dim == expected_head_dim
    # each head really works in head_dim dimensions: its output, and its block of W_q's rows
    _, weights, z = captured(attn, torch.randn(1, 3, d_model), need_weights=True)
    assert z.shape == (1, 3, n_heads, expected_head_dim)
    assert weights.shape == (1, n_heads, 3, 3)
    # head 0 owns exactly the first head_dim rows of W_q: changing them changes head 0's output and no other's
    # (were the heads cut another size, those rows would reach into a neighbour, or leave some of head 0's out)
    x = torch.randn(1, 3, d_model)
    _, _, before = captured(attn, x)
    with torch.no_grad():
        attn.W_q.weight[:expected_head_dim] += torch.randn(expected_head_dim, d_model)
    _, _, after = captured(attn, x)
    assert not torch.allclose(after[:, :, 0], before[:, :, 0])
    torch.testing.assert_close(after[:, :, 1:], before[:, :, 1:])


# The lessons' tables of real models, plus their row for our calculator. Built on the meta device: the
# shapes and parameter counts are real, the weights are never allocated (GPT-3's block alone is 600M numbers).
COURSE_TABLE = [  # model, d_model, heads, d_k
    ("original Transformer", 512, 8, 64),
    ("BERT-base / GPT-2 small", 768, 12, 64),
    ("BERT-large / GPT-2 medium", 1024, 16, 64),
    ("LLaMA-7B / LLaMA-2 7B", 4096, 32, 128),
    ("GPT-3 175B", 12288, 96, 128),
    ("our calculator", 64, 4, 16),
]


@pytest.mark.parametrize("name,d_model,n_heads,d_k", COURSE_TABLE, ids=[row[0] for row in COURSE_TABLE])
def test_the_lessons_model_table(name, d_model, n_heads, d_k):
    with torch.device("meta"):
        attn = MultiHeadAttention(d_model, n_heads)
    assert attn.head_dim == d_k
    assert attn.W_q.weight.shape == attn.W_o.weight.shape == (n_heads * d_k, d_model)
    assert n_params(attn) == 4 * d_model**2 + 4 * d_model


def test_our_calculator_row_is_what_the_config_builds():
    """The course's table says: our calculator, 64 dims, 4 heads, head_dim 16. Check the real config."""
    cfg = compose_config()
    model_cfg = hydra.utils.instantiate(cfg.model, vocab_size=17, block_size=32)
    assert isinstance(model_cfg, TransformerConfig)
    net = Transformer(model_cfg)
    for block in net.blocks:
        attn = block.attn
        assert (attn.d_model, attn.n_heads, attn.head_dim) == (64, 4, 16)
        assert attn.n_kv_heads == attn.n_heads  # plain multi-head attention, not grouped-query
        assert n_params(attn) == 4 * 64**2 + 4 * 64


# ---- Exercise 2: output shape ------------------------------------------------------------------------


@pytest.mark.parametrize("need_weights", [False, True])
def test_exercise_2_output_shape(need_weights):
    attn = MultiHeadAttention(512, 8).eval()
    x = torch.randn(2, 100, 512)
    out, weights, z = captured(attn, x, need_weights=need_weights)
    assert out.shape == x.shape == (2, 100, 512)  # the output has the input's shape
    assert z.shape == (2, 100, 8, 64)  # inside: 8 heads of 64 dimensions at every position
    if need_weights:
        assert weights.shape == (2, 8, 100, 100)  # one 100 x 100 pattern per head


# ---- Parameters and FLOPs do not grow with the head count (quiz question 3) ------------------------------


# On CPU the fused kernel behind F.scaled_dot_product_attention is aten._scaled_dot_product_flash_attention_for_cpu,
# which FlopCounterMode has no formula for: left alone, the fast path's attention would count as 0 FLOPs.
# Give it the formula torch uses for the other SDPA kernels (two batched matmuls: Q Kᵀ and weights · V).
def _sdpa_flops(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    return flop_counter.sdpa_flop_count(query_shape, key_shape, value_shape)


SDPA_FORMULAS = {
    op: _sdpa_flops
    for op in [getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)]
    if op is not None
}


def count_flops(attn: MultiHeadAttention, x: torch.Tensor, need_weights: bool) -> dict[str, int]:
    with flop_counter.FlopCounterMode(display=False, custom_mapping=SDPA_FORMULAS) as counter:
        attn(x, need_weights=need_weights)
    return {str(op): n for op, n in counter.get_flop_counts()["Global"].items()}


@pytest.mark.parametrize("d_model", [64, 512])
def test_quiz_3_parameters_and_flops_are_the_same_for_every_head_count(d_model):
    B, T = 2, 16
    x = torch.randn(B, T, d_model)
    params, explicit, fast = {}, {}, {}
    for h in (1, 2, 4, 8, 16):
        attn = MultiHeadAttention(d_model, h).eval()
        params[h] = n_params(attn)
        explicit[h] = count_flops(attn, x, need_weights=True)
        fast[h] = count_flops(attn, x, need_weights=False)

    assert len(set(params.values())) == 1, params
    assert params[1] == 4 * d_model**2 + 4 * d_model  # four d x d weight matrices and four d biases
    no_bias = {n_params(MultiHeadAttention(d_model, h, bias=False)) for h in (1, 2, 4, 8, 16)}
    assert no_bias == {4 * d_model**2}  # the lessons' count, which leaves the biases out

    # explicit path: four projections (matmuls of B*T rows) + Q Kᵀ and weights · V (batched over heads)
    for h, counts in explicit.items():
        assert counts["aten.addmm"] == 4 * 2 * B * T * d_model * d_model, h
        assert counts["aten.bmm"] == 2 * 2 * B * h * T * T * (d_model // h), h  # = 4·B·T²·d_model, whatever h is
    assert len({sum(c.values()) for c in explicit.values()}) == 1, explicit

    # fast path: the same total, once the fused kernel is counted at all
    for h, counts in fast.items():
        assert len(counts) == 2, f"FlopCounterMode did not see the attention kernel: {counts}"
        assert sum(counts.values()) == sum(explicit[h].values()), (h, counts, explicit[h])


# ---- Splitting into heads, per-head attention, concatenation and W_o ------------------------------------


def test_view_and_transpose_give_each_head_its_own_slice_of_w_q():
    """One d_model x d_model W_q is the lessons' h small W_Q_i matrices stacked: head i owns rows i*hd:(i+1)*hd."""
    attn = MultiHeadAttention(64, 4)
    hd = attn.head_dim
    x = torch.randn(2, 5, 64)
    q = attn.split_heads(attn.W_q(x), attn.n_heads)  # view + transpose, as forward does
    assert q.shape == (2, 4, 5, hd)
    for i in range(attn.n_heads):
        rows = slice(i * hd, (i + 1) * hd)
        q_i = x @ attn.W_q.weight[rows].T + attn.W_q.bias[rows]  # head i's own small projection
        torch.testing.assert_close(q[:, i], q_i)
    # the transpose matters: viewing straight into (B, heads, T, head_dim) scrambles tokens and heads
    wrong = attn.W_q(x).view(2, 4, 5, hd)
    assert not torch.allclose(wrong, q)


def test_each_head_is_scaled_dot_product_attention_on_its_own_slices():
    attn = MultiHeadAttention(64, 4).eval()
    hd, T = attn.head_dim, 6
    x = torch.randn(2, T, 64)
    _, weights, z = captured(attn, x, need_weights=True)
    Q, K, V = attn.W_q(x), attn.W_k(x), attn.W_v(x)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    for i in range(attn.n_heads):
        cols = slice(i * hd, (i + 1) * hd)
        scores = Q[..., cols] @ K[..., cols].transpose(-2, -1) / math.sqrt(hd)
        pattern = scores.masked_fill(future, float("-inf")).softmax(-1)
        torch.testing.assert_close(weights[:, i], pattern)
        torch.testing.assert_close(z[:, :, i], pattern @ V[..., cols])
    # the heads do not share a pattern: each has its own notion of which token is relevant
    assert not torch.allclose(weights[:, 0], weights[:, 1])


def test_concatenation_then_w_o_is_a_sum_of_every_heads_contribution():
    """out = Σ_h z_h · W_o[:, h*hd:(h+1)*hd]ᵀ + b: W_o is where the heads are mixed (quiz question 4)."""
    attn = MultiHeadAttention(64, 4).eval()
    hd = attn.head_dim
    x = torch.randn(2, 5, 64)
    out, _, z = captured(attn, x)
    contributions = [z[:, :, i] @ attn.W_o.weight[:, i * hd : (i + 1) * hd].T for i in range(attn.n_heads)]
    torch.testing.assert_close(out, sum(contributions) + attn.W_o.bias, atol=1e-6, rtol=1e-5)
    # each head writes to every one of the d_model output features, not just to "its" 16
    for i, c in enumerate(contributions):
        outside = torch.cat([c[..., : i * hd], c[..., (i + 1) * hd :]], dim=-1)
        assert (outside.abs() > 0).all()

    # without the mixing (W_o = identity, no bias) the output is the bare concatenation: head i only
    # ever fills features i*hd:(i+1)*hd and the heads never meet
    with torch.no_grad():
        attn.W_o.weight.copy_(torch.eye(64))
        attn.W_o.bias.zero_()
    bare, _, z = captured(attn, x)
    for i in range(attn.n_heads):
        torch.testing.assert_close(bare[..., i * hd : (i + 1) * hd], z[:, :, i])


# ---- Grouped-query and multi-query attention: the KV cache ---------------------------------------------


def cache_bytes(cache: KVCache) -> int:
    return cache.k.nbytes + cache.v.nbytes


def test_multi_query_kv_cache_is_n_heads_times_smaller():
    d_model, n_heads, B, T = 64, 8, 2, 12
    x = torch.randn(B, T, d_model)
    sizes, caches = {}, {}
    for n_kv in (8, 2, 1):  # multi-head, grouped-query (4 query heads per K/V head), multi-query
        attn = MultiHeadAttention(d_model, n_heads, n_kv_heads=n_kv).eval()
        caches[n_kv] = KVCache()
        out, _ = attn(x, cache=caches[n_kv])
        assert out.shape == x.shape
        assert caches[n_kv].k.shape == (B, n_kv, T, d_model // n_heads)
        sizes[n_kv] = cache_bytes(caches[n_kv])
    assert sizes[8] == n_heads * sizes[1]  # MQA: one K/V head instead of n_heads
    assert sizes[8] == (n_heads // 2) * sizes[2]  # GQA with 2 K/V heads: 4x smaller

    # the same in a whole model, summed over its layers' caches
    totals = {}
    for n_kv in (None, 1):
        net = Transformer(
            TransformerConfig(
                vocab_size=17, block_size=16, d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv, n_layers=2
            )
        ).eval()
        layer_caches = [KVCache() for _ in net.blocks]
        net(torch.randint(0, 17, (B, T)), caches=layer_caches)
        totals[n_kv] = sum(cache_bytes(c) for c in layer_caches)
    assert totals[None] == n_heads * totals[1]


# ---- The walk-through: python -m model.walkthrough ---------------------------------------------------


def walkthrough_steps(text: str) -> tuple[list[str], list[tuple[str, tuple[int, ...]]]]:
    """(numbered step headers, [(label, shape)]) from the walk-through's printout."""
    headers = [line for line in text.splitlines() if re.match(r"\d+\. ", line)]
    steps = []
    for line in text.splitlines():
        if line.startswith("   "):
            label, shape, *_ = re.split(r"\s{2,}", line.strip())
            steps.append((label, ast.literal_eval(shape)))
    return headers, steps


def expected_steps(B, T, d, h):
    hd = d // h
    return [
        ("x", (B, T, d)),
        ("Q = W_q(x)", (B, T, d)),
        ("K = W_k(x)", (B, T, d)),
        ("V = W_v(x)", (B, T, d)),
        ("Q.view(B, T, n_heads, head_dim)", (B, T, h, hd)),
        ("Q.transpose(1, 2)", (B, h, T, hd)),
        ("K.transpose(1, 2)", (B, h, T, hd)),
        ("V.transpose(1, 2)", (B, h, T, hd)),
        ("K.transpose(-2, -1)", (B, h, hd, T)),
        ("Q @ Kᵀ / √head_dim", (B, h, T, T)),
        ("future = ones(T, T).triu(1)", (T, T)),
        ("scores.masked_fill(future, -inf)", (B, h, T, T)),
        ("weights = scores.softmax(-1)", (B, h, T, T)),
        ("z = weights @ V", (B, h, T, hd)),
        ("z.transpose(1, 2)", (B, T, h, hd)),
        ("z.reshape(B, T, n_heads * head_dim)", (B, T, d)),
        ("out = W_o(concat)", (B, T, d)),
    ]


@pytest.mark.parametrize("B,T,d_model,n_heads", [(2, 5, 64, 4), (2, 100, 512, 8), (1, 3, 64, 1)])
def test_walkthrough_prints_every_step_with_its_shape(capsys, B, T, d_model, n_heads):
    walkthrough(B, T, d_model, n_heads)
    text = capsys.readouterr().out
    headers, steps = walkthrough_steps(text)
    assert [int(line.split(".")[0]) for line in headers] == list(range(1, 10))  # the lessons' nine steps
    assert steps == expected_steps(B, T, d_model, n_heads)
    assert f"head_dim = d_model // n_heads = {d_model // n_heads}" in text
    # the hand computation it prints is the block's: compare with forward
    diff = float(re.search(r"max \|difference\| = (\S+)", text)[1])
    assert diff < 1e-5
    counts = [int(n) for n in re.findall(r"n_heads=\d+: (\d+)", text)]
    assert len(counts) >= 4 and set(counts) == {4 * d_model**2 + 4 * d_model}


def test_python_m_model_walkthrough(capsys, monkeypatch):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "model.walkthrough"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    walkthrough()
    assert done.stdout == capsys.readouterr().out  # the command prints the default walk-through, seeded

    # its options, run in this process: exercise 2's sizes, and a head count that does not divide d_model
    monkeypatch.setattr(sys, "argv", ["walkthrough", "--tokens", "100", "--d-model", "512", "--heads", "8"])
    runpy.run_path(str(ROOT / "model" / "walkthrough.py"), run_name="__main__")
    assert walkthrough_steps(capsys.readouterr().out)[1][-1] == ("out = W_o(concat)", (2, 100, 512))
    monkeypatch.setattr(sys, "argv", ["attention", "--heads", "3"])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_path(str(ROOT / "model" / "walkthrough.py"), run_name="__main__")
    assert exit_.value.code == 2
    assert "n_heads=3 does not divide d_model=64" in capsys.readouterr().err


# ---- docs/course.md stays true -------------------------------------------------------------------------

COURSE_MD = ROOT / "docs" / "course.md"


def defined_names(path) -> set[str]:
    """What a file defines: top-level names, Class.method, dataclass fields, and Class.attr for self.attr = ..."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    names.add(f"{node.name}.{item.name}")
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(f"{node.name}.{item.target.id}")
            for sub in ast.walk(node):
                if (
                    isinstance(sub, ast.Attribute)
                    and isinstance(sub.ctx, ast.Store)
                    and isinstance(sub.value, ast.Name)
                    and sub.value.id == "self"
                ):
                    names.add(f"{node.name}.{sub.attr}")
    return names


def module_functions(path) -> dict[str, ast.FunctionDef]:
    return {node.name: node for node in ast.parse(path.read_text()).body if isinstance(node, ast.FunctionDef)}


def test_course_md_names_only_what_exists(capsys, monkeypatch, tmp_path):
    """Every `file.py: name`, test id, file and command that docs/course.md quotes is real."""
    spans = set(re.findall(r"`([^`\n]+)`", COURSE_MD.read_text()))
    code_refs, node_ids, paths, commands = set(), set(), set(), set()
    for span in spans:
        if m := re.fullmatch(r"([\w/]+\.py): ([\w.]+)", span):
            code_refs.add((m[1], m[2]))
        elif m := re.fullmatch(r"(?:python -m pytest )?(tests/\w+\.py)::(\w+)", span):
            node_ids.add((m[1], m[2]))
        elif span.startswith("python "):
            commands.add(span)
        elif re.fullmatch(r"(?:configs|model|analysis|data|tests|docs)/[\w/.-]+\.(?:py|yaml|md)", span):
            paths.add(span)
    assert len(code_refs) >= 10 and len(node_ids) >= 20 and len(commands) >= 8, (code_refs, node_ids, commands)

    for file, name in sorted(code_refs):
        assert (ROOT / file).is_file(), file
        assert name in defined_names(ROOT / file), f"docs/course.md: {file} defines no {name}"
    for file, name in sorted(node_ids):
        tests = module_functions(ROOT / file)
        assert name in tests, f"docs/course.md: no test {file}::{name}"
        marks = [ast.unparse(d) for d in tests[name].decorator_list]
        assert not any("slow" in m for m in marks), f"{file}::{name} is not in the default suite"
    for path in sorted(paths):
        assert (ROOT / path).exists(), path

    for i, command in enumerate(sorted(commands)):
        program, *args = shlex.split(command)[1:]
        try:
            check_command(program, args, capsys, monkeypatch, tmp_path / str(i))
        except SystemExit as e:  # argparse or train.py's command-line check rejected it
            pytest.fail(f"docs/course.md: {command!r} exits with {e.code}: {capsys.readouterr().err}")


def notebook_cells(stem: str) -> list[dict] | None:
    path = ROOT / "notebooks" / f"{stem}.ipynb"
    return json.loads(path.read_text())["cells"] if path.is_file() else None


def test_course_md_notebook_cells_and_their_solutions_are_real():
    """Every `notebooks/X.ipynb#cell-id` on the page is a cell of that notebook; one ending in -solution is a
    "Solution" heading followed by the collapsed code cell that holds the worked answer; and a line that names
    an exercise (a cell with a solution) names its solution too (a list item wrapped onto indented lines counts as
    one line)."""
    text = COURSE_MD.read_text()
    refs = re.findall(r"`notebooks/(\w+)\.ipynb#([\w-]+)`", text)
    assert len({r for r in refs if r[1].endswith("-solution")}) >= 16, refs
    for stem, cell_id in sorted(set(refs)):
        cells = notebook_cells(stem)
        assert cells is not None, f"docs/course.md: no notebook notebooks/{stem}.ipynb"
        ids = [c["id"] for c in cells]
        assert cell_id in ids, f"docs/course.md: notebooks/{stem}.ipynb has no cell {cell_id!r}"
        if cell_id.endswith("-solution"):
            heading, solution = cells[ids.index(cell_id)], cells[ids.index(cell_id) + 1]
            assert "".join(heading["source"]).startswith("#### Solution"), f"{stem}#{cell_id} is no Solution heading"
            assert solution["cell_type"] == "code", f"{stem}#{cell_id} is followed by no code"
            assert solution["metadata"].get("jupyter", {}).get("source_hidden"), f"{stem}#{cell_id}: not collapsed"
    for line in re.sub(r"\n {4}(?=\S)", " ", text).splitlines():  # a sub-item's continuation joins its line
        named = set(re.findall(r"`notebooks/(\w+)\.ipynb#([\w-]+)`", line))
        for stem, cell_id in named:
            if f"{cell_id}-solution" in {c["id"] for c in notebook_cells(stem)}:
                assert (stem, f"{cell_id}-solution") in named, f"docs/course.md: {stem}#{cell_id} without its solution"


def check_train_command(args: list[str], run_dir) -> None:
    """``python train.py ARGS`` up to the first training step: its command line passes train.py's own check,
    every ``key=value`` and ``group=option`` it gives is in the composed config, a ``-m`` really sweeps, and the
    run's objects build (training itself is test_train.py's job), the model with the values the command set."""
    command = " ".join(["python train.py", *args])
    multirun = any(a in ("-m", "--multirun") for a in args)
    overrides = [a for a in args if a not in ("-m", "--multirun")]
    check_command_line([*args, f"hydra.run.dir={run_dir}"])  # a typo exits 2 here, as in train.py
    cfg = with_run_dir(compose_config(overrides), run_dir)
    given = {}
    for override in overrides:
        key, value = override.split("=", 1)
        if (CONFIGS / key).is_dir():
            assert cfg.hydra.runtime.choices[key] == value, command
        else:
            given[key] = yaml.safe_load(value)
            assert OmegaConf.select(cfg, key) == given[key], (command, key)
    if multirun:
        assert cfg.hydra.sweeper.params, f"{command}: -m with nothing to sweep"
    _, module, analysis, *_ = assemble(effective_config(cfg, overrides, multirun))
    built = {"model": module.net.cfg, "analysis": analysis}
    for key, value in given.items():
        group, _, name = key.partition(".")
        assert getattr(built[group], name) == value, (command, key)


def check_command(program: str, args: list[str], capsys, monkeypatch, run_dir) -> None:
    """Run or parse one quoted command as far as is cheap: train.py builds its run, options parse, walk-throughs run."""
    import calc

    command = " ".join(["python", program, *args])
    if program == "train.py":
        check_train_command(args, run_dir)
    elif program == "calc.py":
        calc.parse_args(args)  # argparse exits on an unknown option
    elif [program, *args[:1]] == ["-m", "model.walkthrough"]:
        monkeypatch.setattr(sys, "argv", ["walkthrough", *args[1:]])
        runpy.run_path(str(ROOT / "model" / "walkthrough.py"), run_name="__main__")
        assert "head_dim = d_model // n_heads" in capsys.readouterr().out, command
    elif [program, *args[:1]] == ["-m", "pytest"]:
        assert all((ROOT / a.split("::")[0]).exists() for a in args[1:]), command
    elif program == "docs/regenerate.py":  # its sections are names the command knows
        assert args[:1] == ["--only"] and args[1:], command
        sections = {section.name for section in regenerate_module().SECTIONS}
        assert set(args[1:]) <= sections, (command, set(args[1:]) - sections)
    else:
        pytest.fail(f"docs/course.md: a command this test does not know how to check: {command}")
