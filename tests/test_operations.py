"""docs/architecture.md "Add an operation": the worked example's file and registration line, executed as written,
then a model trained on it end to end -- its format, tokens, text, parser, hard-case sampling and checkpoint -- with
nothing else changed. And the registry's own rules."""

import re

import pytest
import torch

from data import operations
from data.build import arithmetic_data, data_settings, problem_format
from data.division import DividingFormat, tokenizer_for
from data.expressions import ExpressionError, parse_expression
from data.operation import Operation
from data.text import evaluate, parse_answer, written_text
from data.tokenizer import CharTokenizer
from tests.conftest import ROOT, fit


@pytest.fixture
def modulo():
    """The worked example's Operation, registered by its own line for the test's length."""
    text = (ROOT / "docs" / "architecture.md").read_text().split("## Add an operation", 1)[1].split("\n## ")[0]
    operation_file, registration = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert registration.strip() == "register(MODULO)"  # one line
    namespace: dict = {}
    exec(compile(operation_file, "data/modulo.py", "exec"), namespace)
    exec(registration, {**namespace, "register": operations.register})
    try:
        yield namespace["MODULO"]
    finally:
        del operations.OPERATIONS["%"]


def test_the_worked_example_writes_draws_and_parses_its_problems(modulo):
    fmt = problem_format(digits=2, operators="+%")
    assert isinstance(fmt, DividingFormat) and fmt.answer_digits == 3  # '+''s 3 digits, the widest
    assert written_text(fmt, 17, "%", 5) == "200" and evaluate(17, "%", 5) == 2  # reversed, zero-padded: 002
    assert parse_answer(fmt, "200", "%") == 2 and parse_answer(fmt, "200", "+") == 2
    tokenizer = tokenizer_for(fmt)
    assert tokenizer.vocab["%"] == CharTokenizer().vocab_size  # after the lesson's tokens
    both = tokenizer_for(DividingFormat(2, "/%"))
    assert (both.vocab["/"], both.vocab["%"]) == (17, 18)  # in the table's order: a dividing model's ids stay
    data = arithmetic_data(
        data_settings(digits=2, operators="+%", n_val=10, n_test=10, hard_share=0.5, hard_fade_steps=100)
    )
    a, op_idx, b = data.sampler.sample("train", 4000, torch.Generator().manual_seed(0))
    assert not (fmt.nonzero_b(op_idx) & (b == 0)).any() and (b[op_idx == 0] == 0).any()  # '+' takes b = 0
    tokens = data.encoder.encode(a[:50], op_idx[:50], b[:50])
    for row, x, o, y in zip(tokens, a[:50].tolist(), op_idx[:50].tolist(), b[:50].tolist(), strict=True):
        text = f"{x:02d}{fmt.operators[o]}{y:02d}=" + written_text(fmt, x, fmt.operators[o], y)
        assert tokenizer.decode(row.tolist()) == text
    from analysis.maps import default_probes

    assert default_probes(fmt) == ["99+1", "45+78", "99%7", "12%45"]  # its attention drawn as division's would be
    assert parse_expression("17 % 5 = 2", fmt, allow_answer=True).given == 2
    with pytest.raises(ExpressionError, match=r"^remainder by zero: b must be a whole number of at least 1"):
        parse_expression("17%0", fmt)
    with pytest.raises(ExpressionError, match=r"the given answer 3 is wrong: 17%5 = 2"):
        parse_expression("17%5=3", fmt, allow_answer=True)


def test_a_model_of_the_worked_example_trains_saves_and_answers(modulo, tmp_path):
    from data.build import data_module
    from model.checkpoint import load_calculator
    from model.transformer import TransformerConfig
    from training.load import calculator_module

    torch.manual_seed(0)
    dm = data_module(data_settings(digits=2, operators="+%", batch_size=128, n_val=10, n_test=200))
    model = TransformerConfig(vocab_size=dm.vocab_size, block_size=dm.fmt.seq_len, d_model=32, n_heads=2)
    module = calculator_module(model=model.to_dict(), fmt=dm.fmt.to_dict(), optim={"lr": 1e-2, "warmup_steps": 10})
    batch = next(iter(dm.train_dataloader()))
    loss = lambda: float(module.score(batch, greedy=False)["loss"].detach())  # noqa: E731
    before = loss()
    fit(module, dm, 150, tmp_path)
    assert loss() < before / 2  # it learns from the new operation's tokens
    calc = load_calculator(tmp_path)  # the tokenizer.json with '%' checked against the one the registry builds
    assert calc.fmt.operators == "+%" and calc.tokenizer.vocab["%"] == 17
    problems = [parse_expression(e, calc.fmt) for e in ("17%5", "99%7", "42+8")]
    answers = calc.answer(problems)
    assert len(answers) == 3 and all(isinstance(x.value, int) or x.value is None for x in answers)


def test_a_taken_symbol_or_the_lessons_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"its symbol '/' is division's; give another"):
        operations.register(Operation("/", "halving", lambda d: d, lambda a, b, d: a // 2, lambda a, b: a // 2))
    with pytest.raises(ValueError, match=r"symbol '\+' must be one new printable character"):
        Operation("+", "plus", lambda d: d, lambda a, b, d: a + b, lambda a, b: a + b)
    assert operations.symbols() == "+-*/" and operations.name_of("/") == "division" and operations.name_of("?") == "'?'"
