"""model/check.py: a learner's block written as the lesson writes it passes; each usual mistake, seeded into that
block one at a time, is named in its one line (python -m model.check FILE.py:CLASS)."""

from __future__ import annotations

import pytest

from model.check import check_block, main

# the lesson's block as a learner types it (lesson 004's shape: forward(x, mask=None), masked_fill(mask, -inf))
LESSON_BLOCK = """
import math
import torch
import torch.nn.functional as F
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.W_q = nn.Linear(embed_dim, embed_dim)
        self.W_k = nn.Linear(embed_dim, embed_dim)
        self.W_v = nn.Linear(embed_dim, embed_dim)
        self.W_o = nn.Linear(embed_dim, embed_dim)

    def forward(self, x, mask=None):
        B, T, _ = x.shape
        Q = self.W_q(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        K = self.W_k(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        V = self.W_v(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        scores = Q @ K.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))
        weights = F.softmax(scores, dim=-1)
        out = (weights @ V).transpose(1, 2).contiguous().view(B, T, -1)
        return self.W_o(out), weights
"""

# (mistake named, the line of the lesson's block changed, what it becomes, a word the check's line must contain)
SEEDED = [
    ("unscaled", " / math.sqrt(self.head_dim)", "", "√head_dim"),
    ("softmax axis", "F.softmax(scores, dim=-1)", "F.softmax(scores, dim=-2)", "dim=-1"),
    (
        "mask reversed, NaN",
        'if mask is not None:\n            scores = scores.masked_fill(mask, float("-inf"))',
        'scores = scores.masked_fill(torch.tril(torch.ones(T, T, dtype=torch.bool)), float("-inf"))',
        "wrong way round",
    ),
    (
        "-inf row",
        'if mask is not None:\n            scores = scores.masked_fill(mask, float("-inf"))',
        'scores = scores.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool)), float("-inf"))',
        "NaN",
    ),
    (
        "split without transpose",
        ".view(B, T, self.num_heads, self.head_dim).transpose(1, 2)",  # Q, K and V alike
        ".view(B, self.num_heads, T, self.head_dim)",
        "transpose(1, 2)",
    ),
    ("contiguous", ".transpose(1, 2).contiguous().view(B, T, -1)", ".transpose(1, 2).view(B, T, -1)", "contiguous"),
    (
        "heads in the wrong order",
        ".transpose(1, 2).contiguous().view(B, T, -1)",
        ".permute(0, 2, 3, 1).contiguous().view(B, T, -1)",
        "wrong order",
    ),
    ("W_o missing", "        self.W_o = nn.Linear(embed_dim, embed_dim)\n", "", "W_o"),
    ("W_o not applied", "return self.W_o(out), weights", "return out, weights", "W_o"),
    ("mask missing", "if mask is not None:", "if False:", "later"),
]


def block_file(tmp_path, source: str) -> str:
    path = tmp_path / "mine.py"
    path.write_text(source)
    return f"{path}:MultiHeadAttention"


def test_the_lesson_block_as_a_learner_types_it_passes_every_check(tmp_path):
    report = check_block(block_file(tmp_path, LESSON_BLOCK))
    assert report.ok, report.findings
    assert report.mask == "hide"  # lesson 004's masked_fill(mask, -inf): True where a token may not look
    assert any("4·d² + 4·d" in f.line for f in report.findings)
    assert any("causal: a later token changes no earlier output" in f.line for f in report.findings)


def test_a_block_reading_the_mask_the_other_way_passes_too(tmp_path):
    source = LESSON_BLOCK.replace("masked_fill(mask,", "masked_fill(mask == 0,")
    report = check_block(block_file(tmp_path, source))
    assert report.ok and report.mask == "keep"


@pytest.mark.parametrize(("mistake", "old", "new", "word"), SEEDED, ids=[s[0] for s in SEEDED])
def test_each_seeded_mistake_is_named_in_its_one_line(tmp_path, mistake, old, new, word):
    assert old in LESSON_BLOCK
    report = check_block(block_file(tmp_path, LESSON_BLOCK.replace(old, new)))
    assert not report.ok
    assert report.mistakes == [mistake], report.findings
    line = report.first_failure if mistake != report.findings[-1].mistake else report.findings[-1].line
    assert word in line and "\n" not in line and "step" in line


def test_the_command_prints_the_report_and_exits_by_it(tmp_path, capsys):
    good = block_file(tmp_path, LESSON_BLOCK)
    assert main([good]) == 0
    assert "your block is the lesson's: python train.py model.attention=" in capsys.readouterr().out
    (tmp_path / "bad.py").write_text(LESSON_BLOCK.replace(" / math.sqrt(self.head_dim)", ""))
    assert main([f"{tmp_path / 'bad.py'}:MultiHeadAttention"]) == 1
    assert "FAIL scores not scaled" in capsys.readouterr().out
    assert main([f"{tmp_path / 'absent.py'}:MultiHeadAttention"]) == 2
    assert "no such file" in capsys.readouterr().out


# a block written nanoGPT's way: it masks the future itself, from a buffer, and takes no mask
SELF_MASKING = """
import math
import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.q_proj, self.k_proj = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.v_proj, self.out_proj = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.register_buffer("tril", torch.tril(torch.ones(64, 64, dtype=torch.bool)))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (p(x).view(B, T, self.n_heads, -1).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.shape[-1])
        att = att.masked_fill(~self.tril[:T, :T], float("-inf")).softmax(dim=-1)
        return self.out_proj((att @ v).transpose(1, 2).reshape(B, T, C))
"""


def test_a_block_that_masks_itself_with_its_own_names_passes_and_saves_the_lessons_names(tmp_path):
    from model.own_block import OwnAttention

    path = tmp_path / "gpt.py"
    path.write_text(SELF_MASKING)
    report = check_block(f"{path}:CausalSelfAttention")
    assert report.ok and report.mask == "none", report.findings
    from model.own_block import load_block

    wrapped = OwnAttention(load_block(f"{path}:CausalSelfAttention")[0](64, 4), 4, report.mask)
    assert sorted(wrapped.state_dict()) == sorted(
        f"{n}.{p}" for n in ("W_q", "W_k", "W_v", "W_o") for p in ("weight", "bias")
    )
    wrapped.load_state_dict(wrapped.state_dict())  # its buffer is its own, rebuilt by __init__


def test_a_forward_taking_q_k_v_is_told_how_the_calculator_calls_it(tmp_path):
    source = LESSON_BLOCK.replace(
        "def forward(self, x, mask=None):", "def forward(self, q, k, v, mask=None):\n        x = q"
    )
    report = check_block(block_file(tmp_path, source))
    assert report.mistakes == ["signature"] and "forward(self, x, mask=None)" in report.first_failure


def test_the_mistakes_are_the_lessons_block_with_one_step_changed():
    """model.check's lesson() with no step changed is model/attention.py's block: a mistake it names differs from
    the real block by that one step only."""
    import torch

    from model.check import MISTAKES, lesson, reference_output

    g = torch.Generator().manual_seed(0)
    weights = {
        n: (torch.randn(64, 64, generator=g) * 0.2, torch.randn(64, generator=g)) for n in ("W_q", "W_k", "W_v", "W_o")
    }
    x = torch.randn(2, 7, 64, generator=g)
    assert torch.allclose(lesson(x, weights, 4), reference_output(x, weights, 4), atol=1e-5)
    for name, (changes, _) in MISTAKES.items():
        args = {k: (8.0 if v == "d_model" else v) for k, v in changes.items()}
        assert not torch.allclose(lesson(x, weights, 4, **args), lesson(x, weights, 4), atol=1e-3, equal_nan=True), name
