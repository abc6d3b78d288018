"""Export a trained calculator to Hugging Face transformers: a directory that

    AutoModelForCausalLM.from_pretrained(OUT_DIR), AutoTokenizer.from_pretrained(OUT_DIR)

load with no tinycalc code (``python calc.py --export hf OUT_DIR``).

Our network is GPT-2's architecture: pre-LN blocks, learned absolute positions, a final LayerNorm and a
(by default tied) LM head, so it is written as a ``GPT2LMHeadModel`` with

  * ``activation_function="gelu"``: our MLP uses exact GELU, not GPT-2's default tanh approximation;
  * GPT-2's ``Conv1D`` layers, which store weights as (in, out) -- the transpose of ``nn.Linear``'s
    (out, in): ``W_q``, ``W_k``, ``W_v`` stack into ``c_attn``, ``W_o`` becomes ``attn.c_proj``,
    ``fc_in``/``fc_out`` become ``mlp.c_fc``/``mlp.c_proj``;
  * zero biases where ours has none (``bias=False``): adding zero is exact;
  * ``tie_word_embeddings`` following ours (GPT-2 supports untied heads too).

Grouped-query attention (``n_kv_heads < n_heads``) has no GPT-2 form and is refused with one line.
The tokenizer becomes a ``PreTrainedTokenizerFast`` (one token per character, [PAD] [BOS] [EOS]) that
puts [BOS] in front of every text, as our prompts start, and encodes a character outside the vocabulary as
[PAD] (TransformerLens' ``boot_transformers`` probes every tokenizer with "a"; ours refuses it). Before
anything is moved into OUT_DIR the export is loaded back from disk and checked against our model: logits
on 1,000 problems and greedy answers.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from data.expressions import Problem
from data.operations import name_of
from data.short_working import b_limit
from data.text import prompt_text, written_text
from data.working import work_lines
from model.calculator import Calculator
from model.optional import MissingExtraError, require
from model.positions import position_table, trained_len
from storage.messages import counted
from storage.rundir import RunDir

N_CHECK = 1000  # problems the export is checked on
MAX_LOGIT_DIFF = 1e-4  # an export whose logits differ more than this from ours is not written
STAGING_PREFIX = ".export-"  # written here inside OUT_DIR, checked, then moved into place
OUR_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "README.md",
    "lab.html",  # the model's lab page, when the caller hands one (calc.py does)
)


class ExportError(Exception):
    """A model or an output directory the export cannot use; the message is one line."""


@dataclass
class ExportCheck:
    """How the written export compares with our model on ``n`` problems (logits teacher-forced on the
    full training string; answers by greedy decoding)."""

    n: int
    max_logit_diff: float
    answers_agree: int  # the same answer as our Calculator (as calc.py reads it; None = unreadable)
    exact_match: float  # the export's greedy answers against the truth


# ---- what GPT-2 can express ----------------------------------------------------------------------------
def check_expressible(calc: Calculator) -> None:
    """ExportError unless the model has an exact GPT2LMHeadModel form."""
    cfg = calc.net.cfg
    n_kv = cfg.n_kv_heads or cfg.n_heads
    if n_kv != cfg.n_heads:
        raise ExportError(
            f"cannot export to Hugging Face GPT-2: this model uses grouped-query attention ({cfg.n_heads} query heads "
            f"share {n_kv} key/value head{'s' * (n_kv > 1)}) and GPT2LMHeadModel has one key/value head per query "
            "head; TransformerLens loads it as it is (model.lens.transformer_lens_model)"
        )
    if cfg.places is not None and (cfg.places.place_bias or cfg.places.log_scale):
        raise ExportError(
            "cannot export to Hugging Face GPT-2: this model's attention has place scores (place_bias) or "
            "length-scaled queries (log_scale), and GPT-2's has neither"
        )
    if calc.fmt.seq_len - 1 > trained_len(calc.net):
        raise ExportError(f"block_size={cfg.block_size} is shorter than the model's problems")


def gpt2_config(calc: Calculator):
    """Our :class:`TransformerConfig` as a ``GPT2Config`` (dropout off: the export is for inference)."""
    from transformers import GPT2Config

    cfg, fmt, tok = calc.net.cfg, calc.fmt, calc.tokenizer
    return GPT2Config(
        vocab_size=cfg.vocab_size,
        n_positions=trained_len(calc.net),  # the trained layout (place models fold their places into it)
        n_embd=cfg.d_model,
        n_layer=cfg.n_layers,
        n_head=cfg.n_heads,
        n_inner=cfg.mlp_ratio * cfg.d_model,
        activation_function="gelu",  # exact GELU, as F.gelu; GPT-2's default "gelu_new" is the tanh approximation
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        layer_norm_epsilon=calc.net.ln_f.eps,
        scale_attn_weights=True,  # scores / sqrt(head_dim), as ours
        tie_word_embeddings=cfg.tie_weights,
        bos_token_id=tok.bos_id,
        eos_token_id=tok.eos_id,
        pad_token_id=tok.pad_id,
        architectures=["GPT2LMHeadModel"],
        # not read by transformers; tells a reader how problems are written
        tinycalc={
            "digits": fmt.digits,
            "operators": fmt.operators,
            "reverse_answer": fmt.reverse_answer,
            "show_work": fmt.show_work,
            "larger_first": fmt.larger_first,  # '-' asks the larger operand first (sub_length)
            **({"b_limit": b_limit(fmt)} if b_limit(fmt) else {}),  # b's most digits (a short b's working)
            "prompt_len": fmt.prompt_len,
            "answer_len": fmt.answer_len,
        },
    )


def gpt2_state_dict(net) -> dict[str, torch.Tensor]:
    """Our parameters under GPT2LMHeadModel's names and layouts. Every parameter of ``net`` is used
    (ExportError otherwise: a new kind of weight must not be dropped silently)."""
    used: set[int] = set()

    def take(param: torch.Tensor | None, transpose: bool = False, like: torch.Tensor | None = None) -> torch.Tensor:
        if param is None:  # bias=False: a zero bias is the exact equivalent
            return torch.zeros_like(like)
        used.add(id(param))
        t = param.detach()
        return (t.T if transpose else t).contiguous().clone()

    def layer_norm(ln, prefix: str) -> dict[str, torch.Tensor]:
        weight = take(ln.weight)
        return {f"{prefix}.weight": weight, f"{prefix}.bias": take(ln.bias, like=weight)}

    def conv1d(linears, prefix: str) -> dict[str, torch.Tensor]:
        """nn.Linear weights (out, in), stacked along out -> one Conv1D weight (in, sum of outs)."""
        weight = torch.cat([take(lin.weight) for lin in linears], dim=0).T.contiguous()
        biases = [take(lin.bias, like=lin.weight[:, 0]) for lin in linears]
        return {f"{prefix}.weight": weight, f"{prefix}.bias": torch.cat(biases)}

    embeddings = (getattr(net, "pos_emb", None), getattr(net.places, "place_emb", None))
    used.update(id(e.weight) for e in embeddings if e is not None)  # both folded into GPT-2's one position table
    sd = {
        "transformer.wte.weight": take(net.tok_emb.weight),
        "transformer.wpe.weight": position_table(net).detach().clone(),  # a copy, like take(): not the live weight
    }
    for i, block in enumerate(net.blocks):
        h = f"transformer.h.{i}"
        attn, mlp = block.attn, block.mlp
        sd |= layer_norm(block.ln_attn, f"{h}.ln_1")
        sd |= conv1d([attn.W_q, attn.W_k, attn.W_v], f"{h}.attn.c_attn")  # (d_model, 3 * d_model)
        sd |= conv1d([attn.W_o], f"{h}.attn.c_proj")  # (d_model, d_model)
        sd |= layer_norm(block.ln_mlp, f"{h}.ln_2")
        sd |= conv1d([mlp.fc_in], f"{h}.mlp.c_fc")  # (d_model, hidden)
        sd |= conv1d([mlp.fc_out], f"{h}.mlp.c_proj")  # (hidden, d_model)
    sd |= layer_norm(net.ln_f, "transformer.ln_f")
    if net.lm_head.weight is not net.tok_emb.weight:  # untied: GPT-2 keeps its own lm_head
        sd["lm_head.weight"] = take(net.lm_head.weight)
    left = [name for name, p in net.named_parameters() if id(p) not in used]
    if left:
        raise ExportError(f"cannot export to Hugging Face GPT-2: no GPT-2 place for the parameter(s) {', '.join(left)}")
    return sd


def gpt2_model(calc: Calculator):
    """An in-memory ``GPT2LMHeadModel`` holding our weights, in eval mode."""
    from transformers import GPT2LMHeadModel

    check_expressible(calc)
    model = GPT2LMHeadModel(gpt2_config(calc))
    state = gpt2_state_dict(calc.net)
    if "lm_head.weight" not in state:
        state["lm_head.weight"] = state["transformer.wte.weight"]  # tied: the same tensor
    model.load_state_dict(state, strict=True)
    model.generation_config.update(
        max_new_tokens=calc.fmt.answer_len,
        do_sample=False,
        bos_token_id=calc.tokenizer.bos_id,
        eos_token_id=calc.tokenizer.eos_id,
        pad_token_id=calc.tokenizer.pad_id,
    )
    return model.eval()


def hf_tokenizer(calc: Calculator):
    """Our character tokenizer as a ``PreTrainedTokenizerFast`` that writes [BOS] before every text and [PAD]
    for a character it does not know (TransformerLens' loader encodes "a" to learn where [BOS] goes)."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    spec = json.loads(calc.tokenizer.tokenizer.to_str())  # a copy: our own tokenizer keeps refusing
    spec["model"]["unk_token"] = "[PAD]"  # unknown characters -> [PAD], so that any text encodes
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(spec)),
        bos_token="[BOS]",
        eos_token="[EOS]",
        pad_token="[PAD]",
        add_bos_token=True,
        add_eos_token=False,
        model_max_length=trained_len(calc.net),
        padding_side="left",
        name_or_path="tinycalc",
    )  # TransformerLens reads init_kwargs["name_or_path"]


# ---- checking and writing ----------------------------------------------------------------------------
def check_problems(calc: Calculator, n: int = N_CHECK, seed: int = 0) -> list[Problem]:
    """n problems drawn uniformly (a fixed seed), the same for every export of a format."""
    a, op_idx, b = calc.fmt.random_problems(n, torch.Generator().manual_seed(seed))
    return [Problem(int(x), calc.fmt.operators[o], int(y)) for x, o, y in zip(a, op_idx, b, strict=True)]


@torch.inference_mode()
def compare(calc: Calculator, model, tokenizer, problems: list[Problem]) -> ExportCheck:
    """Teacher-forced logits and greedy answers of a HF model against ours on ``problems``."""
    fmt = calc.fmt
    seqs = calc.encode(problems)  # (N, seq_len): [BOS] prompt answer [EOS]
    prompts = tokenizer([prompt_text(fmt, p.a, p.op, p.b) for p in problems], return_tensors="pt").input_ids
    if not torch.equal(prompts, fmt.prompt_of(seqs)):
        raise ExportError("the exported tokenizer encodes prompts differently from ours")
    inputs = seqs[:, :-1]  # (N, seq_len - 1): every position that predicts a next token
    ours, _ = calc.net(inputs)  # (N, T, vocab)
    theirs = model(input_ids=inputs).logits
    generated = model.generate(
        prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=fmt.answer_len, do_sample=False
    )[:, fmt.prompt_len :]  # (N, <= answer_len)
    ops = [p.op for p in problems]
    theirs_read = [calc.read(row, op=op).value for row, op in zip(generated.tolist(), ops, strict=True)]  # None: unread
    ours_read = [calc.read(row, op=op).value for row, op in zip(calc.generate(prompts).tolist(), ops, strict=True)]
    right = sum(t == p.truth for t, p in zip(theirs_read, problems, strict=True))
    return ExportCheck(
        n=len(problems),
        max_logit_diff=float((ours - theirs).abs().max()),
        answers_agree=sum(t == o for t, o in zip(theirs_read, ours_read, strict=True)),
        exact_match=right / len(problems),
    )


def run_results(calc: Calculator) -> dict:
    """The training run's results.json next to the checkpoint, when there is one."""
    run = RunDir.of_checkpoint(calc.path) if calc.path is not None else None
    return run.read_results() if run else {}


def model_card(calc: Calculator, check: ExportCheck, out_dir: Path) -> str:
    """README.md of the export: the task, the answer format, how well it does and how to ask it."""
    cfg, fmt = calc.net.cfg, calc.fmt
    task = " and ".join(name_of(op) for op in fmt.operators)
    op = "*" if fmt.work_len else fmt.operators[0]  # show the working when there is some
    example = Problem(10**fmt.digits // 3, op, 10**fmt.digits // 7)  # e.g. 333+142
    short = Problem(7, op, 10 ** min(fmt.digits, 2) // 3)  # e.g. 7+33: operands need zero padding
    prompt, answer = prompt_text(fmt, example.a, op, example.b), written_text(fmt, example.a, op, example.b)
    layout = (
        "**least significant digit first** (reverse it to read the number)"
        if fmt.reverse_answer
        else "most significant digit first"
    )
    sign = ", a sign (`+` or `-`) in front of the digits before any reversal" if fmt.signed else ""
    result = f"text[-{fmt.result_len}:]" if fmt.work_len else "text"  # the result follows the working
    read = f"{result}[::-1]" if fmt.reverse_answer else result
    work = (
        f"the working of long multiplication comes first ({work_lines(fmt)} lines of {fmt.answer_digits} digits, "
        "each followed by `+` or `=`: partial products a*b_j*10^j and running sums"
        + ("; zeros for `+` and `-`" if fmt.operators != "*" else "")
        + "), then "
        if fmt.work_len
        else ""
    )
    results = run_results(calc)
    accuracy = []
    if isinstance(results.get("test_exact_match"), (int, float)) and results.get("n_test"):
        accuracy.append(
            f"- **{results['test_exact_match']:.2%}** exact-match on {results['n_test']:,} held-out test "
            "problems (never trained on), measured at the end of training;"
        )
    accuracy.append(
        f"- **{check.exact_match:.2%}** exact-match of this export's greedy answers on {check.n:,} "
        "problems drawn uniformly when it was written (some may have been trained on)."
    )
    n_params = sum(p.numel() for p in calc.net.parameters())
    return f"""---
library_name: transformers
pipeline_tag: text-generation
tags: [tinycalc, arithmetic, gpt2, interpretability]
---

# tinycalc: {fmt.digits}-digit {task}

A {n_params:,}-parameter decoder-only transformer ({counted(cfg.n_layers, "layer")} x \
{counted(cfg.n_heads, "head")} of {cfg.head_dim} dims, d_model {cfg.d_model}) trained from scratch with tinycalc \
to do {fmt.digits}-digit {task}, exported as a `GPT2LMHeadModel`: pre-LN, learned absolute positions, \
{"tied" if cfg.tie_weights else "untied"} embeddings, exact GELU (`activation_function="gelu"`). A model to \
take apart, not a language model: its vocabulary is `[PAD] [BOS] [EOS] 0-9 + - * =`, one token per character.

## Format: one fixed-length string per problem

    [BOS] {prompt}{answer} [EOS]      ({example.a} {op} {example.b} = {example.truth})

- the prompt is both operands zero-padded to {fmt.digits} digits and `=`: {short.a}{op}{short.b} is asked as \
`{prompt_text(fmt, short.a, op, short.b)}`;
- the answer is {fmt.answer_len} characters: {work}the result, {fmt.result_len} characters{sign}, zero-padded \
and written {layout}: `{answer}` means {example.truth}.

## Accuracy

{chr(10).join(accuracy)}

## How to ask it

```python
from transformers import AutoModelForCausalLM, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("{out_dir}")
model = AutoModelForCausalLM.from_pretrained("{out_dir}")
ids = tokenizer(["{prompt}"], return_tensors="pt").input_ids  # the tokenizer puts [BOS] first
out = model.generate(ids, max_new_tokens={fmt.answer_len}, do_sample=False)  # greedy
text = tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)  # '{answer}'
print(int({read}))  # {example.truth}
```

`generation_config.json` already asks for greedy decoding of {fmt.answer_len} tokens. All prompts have the \
same length, so a batch needs no padding. `config.json` also records the format, under `tinycalc`.

## In TransformerLens

```python
from transformer_lens.model_bridge import TransformerBridge

model = TransformerBridge.boot_transformers("{out_dir}")  # raw weights: logits equal the model's
logits, cache = model.run_with_cache(model.to_tokens("{prompt}"))  # [BOS] written once
cache["blocks.0.attn.hook_pattern"]  # (batch, head, query, key)
```

A character outside the vocabulary encodes as `[PAD]`: TransformerLens probes every tokenizer with `"a"`.

## Checked when written

Loaded back from this directory and run on {check.n:,} problems, the export's logits differ from the \
tinycalc model's by at most {check.max_logit_diff:.1e} (fp32, every position of the full string), and its greedy \
answers equal tinycalc's on {check.answers_agree:,} of {check.n:,}.
"""


def complete_tokenizer_config(path: Path) -> None:
    """transformers 5 saves our tokenizer's class as 'TokenizersBackend', a name 4.x does not know (both load
    tokenizer.json as 'PreTrainedTokenizerFast'), and leaves out add_bos_token (tokenizer.json's post-processor
    adds [BOS] anyway; the flag tells readers such as TransformerLens)."""
    config = json.loads(path.read_text())
    config |= {"tokenizer_class": "PreTrainedTokenizerFast", "add_bos_token": True, "add_eos_token": False}
    path.write_text(json.dumps(config, indent=2) + "\n")


def prepare_out_dir(out_dir: Path) -> bool:
    """OUT_DIR may be new, empty or a previous export (overwritten); anything else is refused.
    Returns whether it was created here."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ExportError(f"{out_dir} exists and is not a directory")
    if out_dir.is_dir():
        foreign = sorted(
            p.name for p in out_dir.iterdir() if p.name not in OUR_FILES and not p.name.startswith(STAGING_PREFIX)
        )
        if foreign:
            shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            raise ExportError(
                f"{out_dir} is not empty and not a previous export (holds {shown}); choose a new directory"
            )
        return False
    try:
        out_dir.mkdir(parents=True)
    except OSError as e:
        raise ExportError(f"cannot create {out_dir}: {e.strerror or e}") from None
    return True


def export_hf(
    calc: Calculator, out_dir: str | Path, n_check: int = N_CHECK, extras: Mapping[str, str] | None = None
) -> ExportCheck:
    """Write the Hugging Face directory, loaded back and checked before it is moved into ``out_dir``; ``extras``
    (file name -> text, each one of OUR_FILES) travel with it, moved into place together."""
    extras = dict(extras or {})
    assert set(extras) <= set(OUR_FILES), sorted(set(extras) - set(OUR_FILES))
    check_expressible(calc)  # first: no package to install would help
    require("exporting to Hugging Face", "transformers", "safetensors")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a 100 kB model needs no "Loading weights" bars
    out_dir = Path(out_dir)
    created = prepare_out_dir(out_dir)
    model, tokenizer = gpt2_model(calc), hf_tokenizer(calc)
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=out_dir))
    done = False
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        complete_tokenizer_config(staging / "tokenizer_config.json")
        # the check reads what was written, as a user would
        check = compare(
            calc,
            AutoModelForCausalLM.from_pretrained(staging).eval(),
            AutoTokenizer.from_pretrained(staging),
            check_problems(calc, n_check),
        )
        if check.max_logit_diff > MAX_LOGIT_DIFF:
            raise ExportError(
                f"the exported model's logits differ from ours by {check.max_logit_diff:.1e} "
                f"(more than {MAX_LOGIT_DIFF:.0e}); nothing was written"
            )
        (staging / "README.md").write_text(model_card(calc, check, out_dir))
        for name, text in extras.items():
            (staging / name).write_text(text)
        written = {path.name for path in staging.iterdir()}
        for name in written:
            os.replace(staging / name, out_dir / name)
        for name in set(OUR_FILES) - written:  # a previous export's file this one lacks (its lab) would mislead
            (out_dir / name).unlink(missing_ok=True)
        done = True
    except OSError as e:
        raise ExportError(f"cannot write {out_dir}: {e.strerror or e}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if created and not done:
            shutil.rmtree(out_dir, ignore_errors=True)  # leave no half-made directory behind
    return check


def export_command(calc: Calculator, target: str, out_dir: str, extras: Mapping[str, str] | None = None) -> int:
    """``calc.py --export hf OUT_DIR``: one summary line on stdout, or one error line on stderr (status 2)."""
    if target != "hf":
        print(f"error: --export {target}: unknown format; the one supported is  --export hf OUT_DIR", file=sys.stderr)
        return 2
    run = RunDir.of_checkpoint(calc.path) if calc.path is not None else None
    owner = run.owner() if run is not None else None
    if owner:  # its best.ckpt is whatever the run has reached so far: not a model to hand on
        print(f"error: {run.path} is still training (pid {owner}); export it when it has finished", file=sys.stderr)
        return 2
    try:
        check = export_hf(calc, out_dir, extras=extras)
    except (ExportError, MissingExtraError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(
        f"wrote {out_dir}: GPT2LMHeadModel + tokenizer + model card ({calc.describe()}); checked on {check.n:,} "
        f"problems: max |logit diff| {check.max_logit_diff:.1e}, greedy answers agree on "
        f"{check.answers_agree:,}, exact-match {check.exact_match:.2%}"
    )
    return 0
