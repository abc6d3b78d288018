"""calc.py and what it stands on: expressions, checkpoint loading, answering, evaluation, attention, bench."""

from __future__ import annotations

import io
import json
import os
import pickle
import random
import re
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
import torch

import bench
import calc
from analysis.terminal import problem_attention, render_attention
from data.expressions import ExpressionError, Problem, parse_expression
from data.problems import ProblemFormat
from data.text import answer_text, parse_answer
from model.checkpoint import CheckpointError, find_checkpoints, load_calculator, newest_checkpoint
from model.device import DeviceError, resolve_device
from tests.conftest import ROOT, make_run, run_train  # noqa: F401 -- make_run: test_pipeline.py imports it here
from training.load import load_module


def cli(*args: str, stdin: str | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "calc.py"), *args],
        input=stdin,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def call(capsys, *args: str) -> tuple[int, list[str], str]:
    """calc.main in this process: (exit status, stdout lines, stderr)."""
    status = calc.main(list(args))
    out = capsys.readouterr()
    return status, out.out.splitlines(), out.err


# ---- expressions ------------------------------------------------------------------------------------------
FMT = ProblemFormat(2, "+")


@pytest.mark.parametrize(
    "text,problem",
    [
        ("7+45", Problem(7, "+", 45)),
        ("  7+45\t", Problem(7, "+", 45)),
        ("7 + 45", Problem(7, "+", 45)),
        ("7+45=", Problem(7, "+", 45)),
        ("7 + 45 = ", Problem(7, "+", 45)),
        ("0+0", Problem(0, "+", 0)),
        ("007+99", Problem(7, "+", 99)),
    ],
)
def test_natural_writing_is_accepted(text, problem):
    assert parse_expression(text, FMT) == problem


MALFORMED = [  # (input, what the error line must mention) for a 2-digit '+' model
    ("", "empty"),
    ("   ", "empty"),
    ("abc", "letter 'a'"),
    ("12a+3", "letter 'a'"),
    ("1++2", "in a row"),
    ("+3", "missing number before '+'"),
    ("3+", "missing number after '+'"),
    ("(1+2)", "parentheses"),
    ("1+2+3", "one operation per line"),
    ("3-4", "not trained on '-'"),
    ("3*4", "not trained on '*'"),
    ("3/4", "not trained on '/'"),
    ("3÷4", "write '/' for division"),
    ("3x4", "'*'"),
    ("100+1", "100 has 3 digits"),
    ("1+" + "9" * 5000, "5000 digits"),
    ("-3+4", "negative"),
    ("3+-4", "negative"),
    ("١+٢", "not an ASCII digit"),
    ("３+４", "not an ASCII digit"),
    ("1.5+2", "whole numbers"),
    ("1,0+2", "whole numbers"),
    ("=3+4", "nothing before '='"),
    ("3+4==7", "more than one '='"),
    ("3+4=7", "only accepted when checking"),
    ("12", "no operator"),
    ("3 4", "no operator between"),
    ("1 2+3", "space inside a number"),
    ("3−4", "ASCII '-'"),
    ("3+4;", "unexpected character ';'"),
    ("3+4=x", "letter 'x'"),
    ("3+\x00", "unexpected character"),
]


def test_the_parser_tells_at_least_twenty_kinds_of_malformed_input_apart():
    """Each malformed line is refused by the parser itself (no model needed), and its messages say what is wrong
    in at least 20 different ways: a parser with one generic complaint for everything would fail here."""
    kinds = set()
    for text, needle in MALFORMED:
        with pytest.raises(ExpressionError, match=re.escape(needle)) as refused:
            parse_expression(text, FMT)
        kinds.add(re.sub(r"'[^']*'|\d+", "_", str(refused.value)))  # the same complaint about other numbers is one kind
    assert len(kinds) >= 20, sorted(kinds)


@pytest.mark.parametrize("text,needle", MALFORMED, ids=[repr(t[:12]) for t, _ in MALFORMED])
def test_malformed_input_is_one_error_line_and_exit_status_1(capsys, run_add, text, needle):
    status, lines, err = call(capsys, "--ckpt", str(run_add), text)
    assert status == 1 and len(lines) == 1, lines
    assert lines[0].startswith("error: ") and needle in lines[0], lines[0]
    assert "accepted" in lines[0] or "given answer" in lines[0]  # says what is accepted
    assert "Traceback" not in err


def test_malformed_inputs_through_the_real_cli_keep_their_lines(run_add):
    texts = [t for t, _ in MALFORMED if "\x00" not in t]  # a NUL cannot be passed in argv
    done = cli("--ckpt", str(run_add), "--", *texts, "12+34", "-3+4")
    lines = done.stdout.splitlines()
    assert done.returncode == 1 and len(lines) == len(texts) + 2, done.stdout + done.stderr
    assert all(line.startswith("error: ") for line in lines[: len(texts)])
    assert re.fullmatch(r"-?\d+|\? .*", lines[-2]) and lines[-1].startswith("error: ")
    assert "Traceback" not in done.stderr


def test_a_given_answer_must_be_right():
    assert parse_expression("3+4=7", FMT, allow_answer=True) == Problem(3, "+", 4, given=7)
    with pytest.raises(ExpressionError, match="given answer 8 is wrong: 3\\+4 = 7"):
        parse_expression("3+4=8", FMT, allow_answer=True)


# ---- answering --------------------------------------------------------------------------------------------
def test_one_line_per_input_in_order_and_they_are_the_models_answers(run_add):
    texts = ["12+34", "oops", "99+99", "5+5=", "1++2", "0+7"]
    done = cli("--ckpt", str(run_add), *texts)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(texts)
    assert [line.startswith("error: ") for line in lines] == [False, True, False, False, True, False]
    # the same problems decoded straight through the module: the answers the CLI printed are the model's own
    module = load_module(run_add / "checkpoints" / "best.ckpt")[0]
    fmt = module.fmt
    prompts = [f"{a:02d}+{b:02d}=" for a, b in ((12, 34), (99, 99), (5, 5), (0, 7))]
    tok = load_calculator(run_add).tokenizer
    ids = torch.tensor([tok.encode(p, bos=True) for p in prompts])
    module.eval()
    answers = module.net.generate(ids, fmt.answer_len)
    expected = [str(parse_answer(fmt, tok.decode(row))) for row in answers]
    assert [lines[i] for i in (0, 2, 3, 5)] == expected


def test_all_valid_inputs_exit_0(capsys, run_add):
    status, lines, _ = call(capsys, "--ckpt", str(run_add), "1+1", " 2 + 2 = ")
    assert status == 0 and len(lines) == 2 and all(re.fullmatch(r"\d+", line) for line in lines)


def test_stdin_mode_answers_each_line_in_order(capsys, monkeypatch, run_add):
    monkeypatch.setattr(sys, "stdin", io.StringIO("12+34\n\n56+7\nnope\n1+2=\n"))
    status, lines, _ = call(capsys, "--ckpt", str(run_add))
    assert status == 1 and len(lines) == 5
    assert [line.startswith("error: ") for line in lines] == [False, True, False, True, False]
    assert "empty" in lines[1]


@pytest.mark.parametrize("separator", ["\x0c", "\x0b", "\x1c", "\x85", "\u2028", "\r"])
def test_stdin_is_split_at_newlines_only(capsys, monkeypatch, run_add, separator):
    """One input line holding a form feed (or any other character str.splitlines() splits at) is one input,
    so it gets one line of output and every later line keeps its place."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"1+2{separator}3+4\n5+6\r\n7+8\n"))
    status, lines, _ = call(capsys, "--ckpt", str(run_add))
    assert status == 1 and len(lines) == 3
    assert lines[0].startswith("error: ") and not lines[1].startswith("error") and not lines[2].startswith("error")


def test_interactive_prompt_until_an_empty_line(capsys, monkeypatch, run_add):
    typed = iter(["12+34", "x", ""])
    monkeypatch.setattr(sys, "stdin", io.StringIO())
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt="": next(typed))
    status, lines, err = call(capsys, "--ckpt", str(run_add))
    assert status == 1 and len(lines) == 2 and lines[1].startswith("error: ") and "empty line" in err


def test_check_marks_each_answer(capsys, run_add):
    rng = random.Random(0)
    texts = [f"{rng.randrange(100)}+{rng.randrange(100)}" for _ in range(200)]
    status, lines, _ = call(capsys, "--ckpt", str(run_add), "--check", *texts, "3+4=7", "3+4=8")
    assert status == 1 and len(lines) == 202
    for text, line in zip(texts, lines, strict=False):
        truth = eval(text)
        assert line == f"{truth} ✓" or re.fullmatch(rf"(-?\d+|\? .*) ✗ \(truth {truth}\)", line), line
    right = sum(line.endswith("✓") for line in lines[:200])
    assert 0 < right < 200  # the 200-step model is right on most, not all: both branches are exercised
    assert lines[200].endswith(("✓", f"✗ (truth {7})")) and "given answer 8 is wrong" in lines[201]


def test_signed_and_unreadable_answers(capsys, run_mixed):
    status, lines, _ = call(capsys, "--ckpt", str(run_mixed), "--check", "3-40", "12*12", "99+99")
    assert status == 0 and len(lines) == 3
    assert all(re.fullmatch(r"(-?\d+|\? \(unreadable answer '.*'\)) (✓|✗ \(truth -?\d+\))", line) for line in lines)


# ---- evaluation -------------------------------------------------------------------------------------------
EVAL_FILE = """\
# carries and operand lengths are known by hand
1+2
99+1=100

9+9
  50 + 50 =
oops
10+10=21
3-4
"""


def test_eval_counts(capsys, tmp_path, run_add):
    path = tmp_path / "problems.txt"
    path.write_text(EVAL_FILE)
    status, lines, _ = call(capsys, "--ckpt", str(run_add), "--eval", str(path), "--json")
    report = json.loads("\n".join(lines))
    assert status == 1  # the invalid lines are listed, the valid problems scored, and the status says so
    assert report["n_problems"] == 4 and report["n_invalid"] == 3
    assert [bad["line"] for bad in report["invalid"]] == [7, 8, 9]
    assert "given answer 21 is wrong" in report["invalid"][1]["error"]
    assert {k: v["n"] for k, v in report["by_operator"].items()} == {"+": 4}
    assert {k: v["n"] for k, v in report["by_operand_digits"].items()} == {"1": 2, "2": 2}
    # 1+2: 0 carries; 99+1: 2; 9+9: 1; 50+50: 1
    assert {k: v["n"] for k, v in report["by_carries"].items()} == {"0": 1, "1": 2, "2": 1}
    # the batched evaluation agrees with the line-by-line answers of --check
    status, checked, _ = call(capsys, "--ckpt", str(run_add), "--check", "1+2", "99+1", "9+9", "50+50")
    assert report["right"] == sum(line.endswith("✓") for line in checked)
    assert report["n_mistakes"] == 4 - report["right"] == len(report["mistakes"])
    assert report["exact_match"] == report["right"] / 4


def test_eval_agrees_with_check_on_many_problems_and_lists_mistakes(capsys, tmp_path, run_add):
    rng = random.Random(1)
    texts = [f"{rng.randrange(100)}+{rng.randrange(100)}" for _ in range(300)]
    path = tmp_path / "many.txt"
    path.write_text("\n".join(texts) + "\n")
    _, checked, _ = call(capsys, "--ckpt", str(run_add), "--check", *texts)
    wrong = [i + 1 for i, line in enumerate(checked) if not line.endswith("✓")]
    _, lines, _ = call(capsys, "--ckpt", str(run_add), "--eval", str(path), "--json", "--show-mistakes", "1000")
    report = json.loads("\n".join(lines))
    assert report["right"] == 300 - len(wrong) and 0 < len(wrong) < 300
    assert [m["line"] for m in report["mistakes"]] == wrong
    first = report["mistakes"][0]
    assert first["problem"] == texts[first["line"] - 1] and first["truth"] == eval(first["problem"])
    assert checked[first["line"] - 1] == f"{first['model']} ✗ (truth {first['truth']})"
    # digit accuracy, counted here: the share of answer characters the model wrote right, as its own text
    c = load_calculator(run_add)
    problems = [parse_expression(text, c.fmt) for text in texts]
    written = c.generate(c.encode(problems)[:, : c.fmt.prompt_len]).tolist()
    right_chars = [
        sum(x == y for x, y in zip(row, c.tokenizer.encode(answer_text(c.fmt, p.truth)), strict=True))
        for p, row in zip(problems, written, strict=True)
    ]
    assert report["digit_accuracy"] == pytest.approx(sum(right_chars) / (300 * c.fmt.answer_len))
    assert report["exact_match"] < report["digit_accuracy"] < 1  # a wrong answer is rarely wrong in every digit


def test_eval_by_operator_and_borrows(capsys, tmp_path, run_mixed):
    path = tmp_path / "mixed.txt"
    path.write_text("10-1\n5-50\n12*19\n3+4\n")  # 10-1: 1 borrow; 5-50 (50-5): 1; 12*19 = 228: 2 carries; 3+4: 0
    _, lines, _ = call(capsys, "--ckpt", str(run_mixed), "--eval", str(path), "--json")
    report = json.loads("\n".join(lines))
    assert {k: v["n"] for k, v in report["by_operator"].items()} == {"+": 1, "-": 2, "*": 1}
    assert {k: v["n"] for k, v in report["by_carries"].items()} == {"0": 1, "1": 2, "2": 1}


def test_eval_table_and_missing_file(capsys, tmp_path, run_add):
    path = tmp_path / "problems.txt"
    path.write_text(EVAL_FILE)
    status, lines, _ = call(capsys, "--ckpt", str(run_add), "--eval", str(path), "--show-mistakes", "2")
    text = "\n".join(lines)
    assert status == 1 and "exact match" in text and "2-digit operands" in text and "2 carries" in text
    assert "1 carry " in text and "1 carries" not in text  # 3 invalid lines: status 1, the rest scored
    assert "line 8: '10+10=21'" in text and "3 invalid lines" in text
    status, lines, err = call(capsys, "--ckpt", str(run_add), "--eval", str(tmp_path / "nope.txt"))
    assert status == 2 and not lines and err.startswith("error: cannot read --eval file")
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n")
    status, _, err = call(capsys, "--ckpt", str(run_add), "--eval", str(empty), "--json")
    assert status == 1 and "no valid problem" in err


# ---- checkpoints ------------------------------------------------------------------------------------------
def bad_checkpoints(tmp_path: Path, good: Path) -> dict[str, tuple[Path, str]]:
    data = good.read_bytes()
    cases = {}

    def write(name: str, content: bytes) -> Path:
        (tmp_path / name).write_bytes(content)
        return tmp_path / name

    cases["missing"] = (tmp_path / "nope.ckpt", "no such checkpoint")
    (tmp_path / "empty_run").mkdir()
    cases["directory without a checkpoint"] = (tmp_path / "empty_run", "no checkpoints/best.ckpt in")
    cases["truncated"] = (write("truncated.ckpt", data[: len(data) // 2]), "corrupt or truncated")
    cases["random bytes"] = (write("random.ckpt", random.Random(0).randbytes(5000)), "not a")
    cases["empty file"] = (write("empty.ckpt", b""), "corrupt or truncated")
    torch.save({"weights": torch.zeros(3)}, tmp_path / "foreign.ckpt")
    cases["a torch file that is not ours"] = (tmp_path / "foreign.ckpt", "not a tinycalc checkpoint")
    write("object.ckpt", pickle.dumps(Path("x")))
    cases["a pickle of objects"] = (tmp_path / "object.ckpt", "not a tinycalc checkpoint")
    ckpt = torch.load(good, weights_only=True)
    torch.save({**ckpt, "hyper_parameters": {"model": ckpt["hyper_parameters"]["model"]}}, tmp_path / "nofmt.ckpt")
    cases["no data format"] = (tmp_path / "nofmt.ckpt", "lack fmt")
    hp = ckpt["hyper_parameters"]
    torch.save({**ckpt, "hyper_parameters": {**hp, "model": {**hp["model"], "d_model": 48}}}, tmp_path / "shape.ckpt")
    cases["weights of another shape"] = (tmp_path / "shape.ckpt", "incompatible")
    return cases


def test_bad_checkpoints_are_one_error_line_and_exit_status_2(capsys, tmp_path, run_add):
    for kind, (path, needle) in bad_checkpoints(tmp_path, run_add / "checkpoints" / "best.ckpt").items():
        with pytest.raises(CheckpointError, match=needle):
            load_calculator(path)
        status, lines, err = call(capsys, "--ckpt", str(path), "1+2")
        assert status == 2 and not lines, kind
        assert len(err.splitlines()) == 1 and err.startswith("error: ") and needle in err, (kind, err)


def test_a_corrupt_checkpoint_through_the_real_cli(tmp_path, run_add):
    data = (run_add / "checkpoints" / "best.ckpt").read_bytes()
    (tmp_path / "cut.ckpt").write_bytes(data[:1000])
    done = cli("--ckpt", str(tmp_path / "cut.ckpt"), "1+2")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("error: ") and len(done.stderr.splitlines()) == 1, done.stderr


def test_run_directory_file_and_tokenizer_fallback(run_add, tmp_path):
    from_dir, from_file = load_calculator(run_add), load_calculator(run_add / "checkpoints" / "best.ckpt")
    assert from_dir.path == from_file.path and from_dir.fmt == ProblemFormat(2, "+")
    lone = tmp_path / "lone.ckpt"  # outside a run directory: the built-in tokenizer
    lone.write_bytes((run_add / "checkpoints" / "best.ckpt").read_bytes())
    assert load_calculator(lone).tokenizer.vocab == from_dir.tokenizer.vocab


def test_the_newest_checkpoint_is_found(capsys, monkeypatch, tmp_path, run_add):
    with pytest.raises(CheckpointError, match="no checkpoint found"):
        newest_checkpoint(tmp_path)
    good = (run_add / "checkpoints" / "best.ckpt").read_bytes()
    paths = [
        tmp_path / "runs" / "2026-01-01_00-00-00",
        tmp_path / "multirun" / "2026-01-02_00-00-00" / "0_seed=1",
        tmp_path / "runs" / "2026-01-03_00-00-00",
    ]
    for i, run in enumerate(paths):
        (run / "checkpoints").mkdir(parents=True)
        (run / "checkpoints" / "best.ckpt").write_bytes(good)
        os.utime(run / "checkpoints" / "best.ckpt", (1_000_000 + i, 1_000_000 + i))
    os.utime(paths[1] / "checkpoints" / "best.ckpt", (2_000_000, 2_000_000))  # the multirun job is newest
    assert find_checkpoints(tmp_path)[0] == newest_checkpoint(tmp_path) == paths[1] / "checkpoints" / "best.ckpt"
    monkeypatch.chdir(tmp_path)
    status, lines, err = call(capsys, "1+2")
    assert status == 0 and len(lines) == 1
    assert "multirun/2026-01-02_00-00-00/0_seed=1/checkpoints/best.ckpt (newest of 3" in err


# ---- devices ----------------------------------------------------------------------------------------------
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
needs_mps = pytest.mark.skipif(not torch.backends.mps.is_available(), reason="needs an Apple GPU (MPS)")
ALL_ADDITIONS = [Problem(a, "+", b) for a in range(100) for b in range(100)]  # every 2-digit problem


def clear_cut(calc, problems: list[Problem], margin: float = 1e-3) -> list[Problem]:
    """The problems whose greedy answer float rounding cannot change: at every answer token the CPU's top logit
    beats the runner-up by more than ``margin``. Another device sums in another order (its logits differ in the last
    bits), so on a near-tie -- a 200-step model has a few dozen below 1e-3 -- it may rightly pick the other token."""
    seq = calc.encode(problems)[:, : calc.fmt.prompt_len]
    lowest = torch.full((len(problems),), float("inf"))
    with torch.inference_mode():
        for _ in range(calc.fmt.answer_len):
            logits = calc.net(seq.to(calc.device))[0][:, -1].cpu()
            top2 = logits.topk(2, dim=-1).values
            lowest = torch.minimum(lowest, top2[:, 0] - top2[:, 1])
            seq = torch.cat([seq, logits.argmax(dim=-1, keepdim=True)], dim=1)
    return [p for p, m in zip(problems, lowest.tolist(), strict=True) if m > margin]


@pytest.fixture
def fp32_matmuls():
    """Full fp32 matrix multiplies, as on the CPU, whatever an earlier test left: train.py's assemble() turns on
    TensorFloat-32 (matmul_precision) process-wide when it trains on CUDA."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    yield
    torch.set_float32_matmul_precision(previous)


def eval_report(capsys, run: Path, path: Path, *options: str, status: int = 0) -> dict:
    """--eval --json of ``path``, without the parts that depend on the machine (time, device); ``status``: the exit
    status expected (1 where the file has an invalid line)."""
    started = time.perf_counter()
    exited, lines, _ = call(
        capsys, "--ckpt", str(run), *options, "--eval", str(path), "--json", "--show-mistakes", "50"
    )
    elapsed = time.perf_counter() - started
    report = json.loads("\n".join(lines))
    # the evaluation's own time: measured (not 0), in seconds, and within the whole call's wall time
    assert exited == status and 0 < report.pop("seconds") <= elapsed
    return report


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_device_cuda_without_a_gpu_is_one_line_and_exit_status_2(run_add):
    done = cli("--ckpt", str(run_add), "--device", "cuda", "1+2")
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"error: --device cuda: no CUDA GPU is visible here (torch {torch.__version__}, ")
    assert done.stderr.endswith("); use --device cpu\n")
    with pytest.raises(DeviceError, match="no CUDA GPU is visible here"):
        load_calculator(run_add, device="cuda")
    calc = load_calculator(run_add)
    with pytest.raises(DeviceError, match="no CUDA GPU is visible here"):
        calc.to("cuda")
    assert calc.device == torch.device("cpu")  # left where it was


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="an Apple GPU is available here")
def test_device_mps_without_an_apple_gpu_is_one_line_and_exit_status_2(capsys, run_add):
    status, lines, err = call(capsys, "--ckpt", str(run_add), "--device", "mps", "1+2")
    assert status == 2 and not lines
    assert err == "error: --device mps: no Apple GPU is available here; use --device cpu\n"


def test_a_cuda_warning_joins_the_one_error_line(capsys, monkeypatch, run_add):
    def driver_too_old() -> bool:  # what a CUDA build of torch says when the driver is too old
        too_old = "CUDA initialization: The NVIDIA driver on your system is too old (found version 11040). Update it."
        warnings.warn(too_old, UserWarning, stacklevel=2)
        return False

    monkeypatch.setattr(torch.cuda, "is_available", driver_too_old)
    status, lines, err = call(capsys, "--ckpt", str(run_add), "--device", "cuda", "1+2")
    assert status == 2 and not lines and len(err.splitlines()) == 1, err
    assert "no CUDA GPU is visible here" in err and "driver on your system is too old (found version 11040))" in err


def test_device_options_are_checked(capsys):
    for argv in (["--device", "tpu", "1+2"], ["--device", "cuda", "--export", "hf", "out"]):
        with pytest.raises(SystemExit) as stopped:
            calc.parse_args(argv)
        assert stopped.value.code == 2
    assert "--export takes only --ckpt" in capsys.readouterr().err
    assert calc.parse_args(["1+2"]).device == "cpu"


def test_auto_prefers_cuda_then_mps_then_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("mps")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")
    with pytest.raises(DeviceError, match="not a device"):
        resolve_device("tpu")


def test_to_cpu_and_device_cpu_answer_as_the_default(capsys, tmp_path, run_add):
    calc = load_calculator(run_add)
    assert calc.device == torch.device("cpu") and "device=cpu" in repr(calc)
    before = calc.answer(ALL_ADDITIONS)
    assert calc.to("cpu") is calc and calc.to(torch.device("cpu")) is calc and calc.device == torch.device("cpu")
    assert calc.answer(ALL_ADDITIONS) == before
    assert load_calculator(run_add, device="cpu").answer(ALL_ADDITIONS) == before
    rng = random.Random(2)
    texts = [f"{rng.randrange(100)}+{rng.randrange(100)}" for _ in range(300)]
    _, default, _ = call(capsys, "--ckpt", str(run_add), "--check", *texts)
    _, on_cpu, _ = call(capsys, "--ckpt", str(run_add), "--device", "cpu", "--check", *texts)
    assert on_cpu == default and len(default) == 300
    path = tmp_path / "problems.txt"
    path.write_text("\n".join(texts) + "\n")
    report = eval_report(capsys, run_add, path)
    assert report == eval_report(capsys, run_add, path, "--device", "cpu") and report["device"] == "cpu"
    if resolve_device("auto").type == "cpu":  # no GPU here: auto is the CPU
        assert eval_report(capsys, run_add, path, "--device", "auto") == report


@pytest.mark.parametrize(
    "device",
    # "cpu": the same steps on every machine, so that the GPU's test cannot drift from the code while no card runs it
    ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, needs_cuda]), pytest.param("mps", marks=needs_mps)],
)
def test_answers_and_evaluation_on_a_gpu_equal_the_cpus(capsys, tmp_path, run_add, device, fp32_matmuls):
    cpu = load_calculator(run_add)
    gpu = load_calculator(run_add, device=device)
    assert gpu.device.type == device and all(p.device.type == device for p in gpu.net.parameters())
    problems = clear_cut(cpu, ALL_ADDITIONS)
    assert len(problems) > 1000  # enough for the comparisons below to mean something
    prompts = gpu.encode(problems)[:, : gpu.fmt.prompt_len]  # encoded on the CPU
    assert gpu.generate(prompts).device.type == "cpu"  # answers come back to the CPU
    assert gpu.generate(prompts.to(device)).device.type == "cpu"
    expected = cpu.answer(problems)
    assert gpu.answer(problems) == expected
    assert gpu.evaluate(problems) == cpu.evaluate(problems)
    assert gpu.to("cpu") is gpu and gpu.device.type == "cpu" and gpu.answer(problems) == expected
    assert gpu.to(device).device.type == device and gpu.answer(problems) == expected
    # through calc.py: answers, --check, --eval and --attention
    texts = [p.text for p in random.Random(3).sample(problems, 300)]
    _, on_cpu, _ = call(capsys, "--ckpt", str(run_add), "--check", *texts)
    status, on_gpu, _ = call(capsys, "--ckpt", str(run_add), "--device", device, "--check", *texts)
    assert status == 0 and on_gpu == on_cpu
    path = tmp_path / "problems.txt"
    path.write_text("\n".join(texts) + "\nnope\n")
    report = eval_report(capsys, run_add, path, "--device", device, status=1)  # 1: the invalid line 'nope'
    assert report.pop("device").startswith(device)
    cpu_report = eval_report(capsys, run_add, path, status=1)
    cpu_report.pop("device")
    assert report == cpu_report
    status, lines, err = call(capsys, "--ckpt", str(run_add), "--device", device, "--attention", problems[0].text)
    assert status == 0 and lines == [str(cpu.answer(problems[:1])[0])] and "layer 0 · head 0" in err
    if device == "cuda":
        assert eval_report(capsys, run_add, path, "--device", "auto", status=1)["device"].startswith("cuda")


# ---- attention --------------------------------------------------------------------------------------------
def test_attention_of_one_problem(run_add, capsys):
    c = load_calculator(run_add)
    prompt = c.encode([Problem(12, "+", 34)])[0, : c.fmt.prompt_len].tolist()
    att = problem_attention(c.net, c.tokenizer, prompt, c.fmt.answer_len)
    T = c.fmt.prompt_len + c.fmt.answer_len
    assert att.weights.shape == (c.net.cfg.n_layers, c.net.cfg.n_heads, T, T)
    assert torch.allclose(att.weights.sum(-1), torch.ones(()))  # each query's weights sum to 1
    assert (att.weights.triu(diagonal=1) == 0).all()  # causal: no query sees a later key
    assert att.labels[:7] == ["^", "1", "2", "+", "3", "4", "="] and len(att.labels) == T
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(render_attention(att, "12+34"))
    text = console.export_text()
    assert "layer 1 · head 1" in text and "^ 1 2 + 3 4 =" in text


def test_attention_goes_to_stderr_and_stdout_keeps_one_line_per_input(capsys, run_add):
    status, lines, err = call(capsys, "--ckpt", str(run_add), "--attention", "12+34", "bad")
    assert status == 1 and len(lines) == 2 and lines[1].startswith("error: ")
    assert err.count("layer 0 · head 0") == 1 and "12+34 = " in err


# ---- bench ------------------------------------------------------------------------------------------------
def test_bench_decode_reports_json(capsys):
    started = time.perf_counter()
    assert bench.main(["decode", "--n", "300", "--repeat", "2", "--json"]) == 0
    elapsed = time.perf_counter() - started
    result = json.loads(capsys.readouterr().out)["decode"]
    assert result["n"] == 300 and result["answer_tokens"] == 4  # 3-digit sums: 4 answer digits
    # the reported time is the fastest of the repeats, each measured within the command's wall time
    runs = result["eval_seconds_runs"]
    assert len(runs) == 2 and result["eval_seconds"] == min(runs) and 0 < sum(runs) <= elapsed
    decode = result["decode"]
    for name in ("kv_cache", "no_cache"):  # each rate is its problems' answer tokens over its own time
        seconds = decode[name]["seconds"]  # rounded to 0.1 ms: the rates come from the unrounded time
        assert 0 < seconds <= elapsed, name
        for key, amount in (("tokens_per_second", 300 * 4), ("problems_per_second", 300)):
            low, high = amount / (seconds + 5e-5) - 0.5, amount / (seconds - 5e-5) + 0.5
            assert low <= decode[name][key] <= high, (name, key, decode[name], seconds)
    speedup = decode["no_cache"]["seconds"] / decode["kv_cache"]["seconds"]
    assert result["kv_cache_speedup"] == pytest.approx(speedup, abs=0.01)


# ---- the real thing ---------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_default_checkpoint_answers_1000_additions(tmp_path):
    done = run_train(tmp_path, "logger=none")
    assert done.returncode == 0, done.stderr[-2000:]
    rng = random.Random(12345)
    pairs = [(rng.randrange(1000), rng.randrange(1000)) for _ in range(1000)]
    piped = cli("--ckpt", str(tmp_path), stdin="".join(f"{a}+{b}\n" for a, b in pairs))
    assert piped.returncode == 0 and "Traceback" not in piped.stderr
    lines = piped.stdout.splitlines()
    assert len(lines) == 1000
    right = sum(line == str(a + b) for line, (a, b) in zip(lines, pairs, strict=True))
    assert right >= 999, f"{right}/1000 right"
    (tmp_path / "problems.txt").write_text("".join(f"{a}+{b}={a + b}\n" for a, b in pairs))
    evaluated = cli("--ckpt", str(tmp_path), "--eval", str(tmp_path / "problems.txt"), "--json")
    report = json.loads(evaluated.stdout)
    assert report["n_problems"] == 1000 and report["right"] == right


@pytest.mark.parametrize("command", ["answer", "export", "verify"])
def test_answering_exporting_and_verifying_import_neither_lightning_nor_torch_dynamo(run_add, tmp_path, command):
    """``python calc.py --ckpt RUN 12+34``, ``calc.py --export hf`` and ``verify.py`` as whole commands: every module
    they import (python -X importtime lists them on stderr), none of Lightning's and (transformers aside) not
    torch._dynamo, which make an answer seconds slower (python bench.py calc)."""
    if command == "export":
        pytest.importorskip("transformers", reason='the interop extra: pip install -e ".[interop]"')
    args = {
        "answer": ["calc.py", "--ckpt", str(run_add), "12+34"],
        "export": ["calc.py", "--ckpt", str(run_add), "--export", "hf", str(tmp_path / "hf")],
        "verify": ["verify.py", str(run_add), "--digits", "2"],  # run_add: 2-digit addition
    }[command]
    done = subprocess.run([sys.executable, "-X", "importtime", *args], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr[-2000:]  # 1: verify.py's verdict on a small model
    imported = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "model.checkpoint" in imported and "torch" in imported  # it did load the run
    assert not {m for m in imported if m.split(".")[0] in ("lightning", "pytorch_lightning")}
    assert "torch._dynamo" not in imported or command == "export"  # transformers' masking_utils imports it itself
