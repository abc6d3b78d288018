"""Training with your own block (model.attention=FILE.py:CLASS, model/own_block.py): a block written in the
lesson's style trains the calculator; the hook points every analysis reads are put around it; the run records its
source and hash; calc.py, analyse.py, report.html's lab and resume work on the trained weights."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from model.attention import KVCache, MultiHeadAttention
from model.build import own_block
from model.hooks import hooks, zero_ablated_heads
from model.transformer import TransformerConfig
from tests.conftest import ROOT, SHORT_RUN
from tests.test_own_block_check import LESSON_BLOCK


@pytest.fixture
def pair(tmp_path):
    """(the learner's block inside OwnAttention, the lesson's block), the same weights in both."""
    (tmp_path / "mine.py").write_text(LESSON_BLOCK)
    cfg = TransformerConfig(vocab_size=16, block_size=12)
    own = own_block(f"{tmp_path / 'mine.py'}:MultiHeadAttention", cfg).block(64, 4)
    ours = MultiHeadAttention(64, 4)
    ours.load_state_dict(own.state_dict())  # the learner's weights, under the lesson's names
    return own.eval(), ours.eval()


def test_its_state_dict_has_the_lessons_names_and_loads_back(pair):
    own, ours = pair
    assert sorted(own.state_dict()) == sorted(ours.state_dict())
    for p in own.parameters():
        torch.nn.init.zeros_(p)
    own.load_state_dict(ours.state_dict())
    assert torch.equal(own.W_q.weight, ours.W_q.weight)


def test_output_weights_and_head_outputs_are_the_lessons(pair):
    own, ours = pair
    x = torch.randn(3, 10, 64)
    out, weights = own(x, need_weights=True)
    want, want_weights = ours(x, need_weights=True)
    assert torch.allclose(out, want, atol=1e-5) and torch.allclose(weights, want_weights, atol=1e-6)
    seen = {}
    for block, name in ((own, "own"), (ours, "ours")):
        with hooks(block, {"hook_z": lambda z, name=name: seen.__setitem__(name, z)}):
            block(x)
    assert seen["own"].shape == (3, 10, 4, 16) and torch.allclose(seen["own"], seen["ours"], atol=1e-5)


def test_a_head_switched_off_at_hook_z_is_switched_off_in_the_learners_block(pair):
    own, ours = pair
    x = torch.randn(2, 8, 64)
    with zero_ablated_heads(own, [1, 3]):
        off = own(x)[0]
    with zero_ablated_heads(ours, [1, 3]):
        want = ours(x)[0]
    assert torch.allclose(off, want, atol=1e-5) and not torch.allclose(off, own(x)[0], atol=1e-3)


def test_a_pattern_hook_replaces_the_weights_the_learners_block_takes(pair):
    own, _ = pair
    x = torch.randn(1, 6, 64)
    uniform = torch.tril(torch.ones(6, 6)) / torch.arange(1, 7).unsqueeze(1)  # each query: its keys equally
    with hooks(own, {"hook_pattern": lambda w: uniform.expand_as(w)}):
        out, weights = own(x, need_weights=True)
    assert torch.allclose(weights[0, 2], uniform)
    v = own.W_v(x).view(1, 6, 4, 16).transpose(1, 2)
    want = own.W_o((uniform @ v).transpose(1, 2).reshape(1, 6, 64))
    assert torch.allclose(out, want, atol=1e-5)


def test_decoding_with_the_cache_gives_what_the_whole_sequence_gives(pair):
    own, _ = pair
    x = torch.randn(2, 7, 64)
    cache = KVCache()
    steps = [own(x[:, :4], cache=cache)[0]] + [own(x[:, t : t + 1], cache=cache)[0] for t in range(4, 7)]
    assert torch.allclose(torch.cat(steps, dim=1), own(x)[0], atol=1e-5)


@pytest.mark.parametrize(
    ("setting", "word"),
    [({"n_kv_heads": 2}, "n_kv_heads"), ({"dropout": 0.1}, "dropout"), ({"place_embedding": True}, "places")],
)
def test_a_setting_a_learners_block_cannot_take_is_one_line(tmp_path, setting, word):
    from model.build import transformer_config

    (tmp_path / "mine.py").write_text(LESSON_BLOCK)
    with pytest.raises(ValueError, match=f"^attention=.*mine.py:MultiHeadAttention: .*{word}") as e:
        spec = f"{tmp_path / 'mine.py'}:MultiHeadAttention"
        transformer_config(attention=spec, vocab_size=16, block_size=12, **setting)
    assert "\n" not in str(e.value)


def command(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A learner's run as a learner makes it: mine.py beside them, train.py stopped at step 60 (Ctrl-C), then resumed
    with the same override to its end. (their folder, the run directory, the resume's output)"""
    home = tmp_path_factory.mktemp("learner")
    (home / "mine.py").write_text(LESSON_BLOCK)
    run = home / "runs" / "mine"
    spec = "model.attention=mine.py:MultiHeadAttention"
    short = [*SHORT_RUN, "trainer.max_steps=300", "threads=1"]
    first = command(home, str(ROOT / "tests" / "stop_at.py"), "60", spec, *short, f"hydra.run.dir={run}")
    assert first.returncode == 130 or "interrupted" in first.stdout + first.stderr, first.stderr[-2000:]
    refused = command(home, str(ROOT / "train.py"), f"resume={run}")
    assert refused.returncode == 2 and "give it again on the command line: " + spec in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    resumed = command(home, str(ROOT / "train.py"), f"resume={run}", spec)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    return home, run, resumed.stdout


def test_the_run_records_the_block_and_says_what_it_could_not_analyse(trained):
    home, run, out = trained
    results = json.loads((run / "results.json").read_text())
    assert results["status"] == "ok" and results["steps"] > 60 and results["resumed_from"]
    block = results["attention_block"]
    assert block["spec"] == "mine.py:MultiHeadAttention" and block["mask"] == "hide"
    assert (run / "attention_block.py").read_text() == (home / "mine.py").read_text()
    import hashlib

    assert block["sha256"] == hashlib.sha256((home / "mine.py").read_bytes()).hexdigest()
    assert "your block mine.py:MultiHeadAttention" in out
    assert "patching" in results["analyses_not_run"]
    assert any(line.startswith("not run") and "patching: " in line for line in out.splitlines())
    for name in ("ablation", "pruning", "roles", "dla"):  # the analyses that read the hook points ran
        assert (run / f"{name}.csv").is_file()


def test_the_trained_weights_answer_in_the_lessons_block_as_in_the_learners(trained):
    """calc.py reads the run as data (the lesson's block); the learner's block with the same checkpoint gives the
    same logits: what calc.py, analyse.py and the lab answer is what the learner's block answers."""
    from model.build import network_for
    from model.checkpoint import load_calculator, read_checkpoint

    home, run, _ = trained
    calc = load_calculator(run)
    assert all(isinstance(b.attn, MultiHeadAttention) for b in calc.net.blocks)
    _, saved = read_checkpoint(run)
    model = saved["hyper_parameters"]["model"]
    theirs = network_for(model, calc.fmt, own_block(str(home / "mine.py:MultiHeadAttention"), calc.net.cfg))
    theirs.load_state_dict({k.removeprefix("net."): v for k, v in saved["state_dict"].items() if k.startswith("net.")})
    seqs = torch.randint(0, calc.net.cfg.vocab_size, (16, calc.fmt.seq_len - 1))
    assert torch.allclose(theirs.eval()(seqs)[0], calc.net(seqs)[0], atol=1e-4)
    from data.expressions import parse_expression

    answer = command(home, str(ROOT / "calc.py"), "--ckpt", str(run), "12+34")
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.strip() == str(calc.answer([parse_expression("12+34", calc.fmt)])[0])
    analysed = command(home, str(ROOT / "analyse.py"), str(run))
    assert analysed.returncode == 0, analysed.stderr[-2000:]
    assert (run / "patching.csv").is_file()  # read as data, in the lesson's block: the graph runs there


def test_the_labs_model_is_the_trained_one(browser, trained):
    from tests.test_html_report import Page

    _, run, _ = trained
    page = Page(browser, run / "report.html")
    page.page.fill(".lab-problem", "12+34")
    answer = command(run, str(ROOT / "calc.py"), "--ckpt", str(run), "12+34").stdout.strip()
    assert answer in page.text(".lab-answer")
    page.offline_and_clean()
