"""Ask a trained calculator, see its attention, or evaluate it on a file of problems.

    python calc.py 123+456 7+45            one answer line per expression, in order
    echo 7+45 | python calc.py             one expression per line from stdin
    python calc.py                         interactive prompt (on a terminal)
    python calc.py --check --attention 99+1
    python calc.py --eval problems.txt [--json] [--show-mistakes N]
    python calc.py --device cuda --eval problems.txt   on a GPU (or mps, or auto; the default is cpu)
    python calc.py --export hf OUT_DIR     write a Hugging Face transformers model directory

The model's training layout (zero padding, reversed digits, sign) is internal: write 7+45, get 52.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

HELP = __doc__.split("\n\n")[0]
EPILOG = """\
input: a op b with whole numbers (ASCII digits, at most as many digits as the model was trained on) and one
  of the model's operators; spaces around the operator and a trailing '=' are fine (7+45, 7 + 45 =).
  'a op b=answer' is accepted only with --check and in --eval files, and the answer must be right
  (it is a label). Anything else gives 'error: <what is wrong>; accepted: ...' on that input's line.

output: stdout has exactly one line per input expression, in order: the model's answer in normal digit
  order, or 'error: ...'. With --check: '579 ✓' or '578 ✗ (truth 579)'. A model answer that is not a
  number in its format shows as '? (unreadable answer ...)'. --attention draws on stderr, so stdout keeps
  one line per input. Which checkpoint is used (when found automatically) is said on stderr.

--eval FILE: lines 'expr' or 'expr=answer' ('-' reads stdin); blank lines and '#' comments are skipped;
  invalid lines are counted and listed, not fatal. Digit accuracy is the share of answer tokens right
  (padding zeros and sign included, and the working of a show_work model), as in training; exact match
  needs all of them right, so there a right product after a wrong line of working counts as a mistake
  (answering and --check judge the product alone).

--device: where the model computes: cpu (the default: single answers are fastest there, with no GPU start-up),
  cuda, mps (an Apple GPU) or auto (cuda if available, else mps, else cpu). A GPU pays off on large --eval
  files only. A device that is not there is one error line and exit status 2.
  --export works on the CPU.

checkpoint: --ckpt takes a .ckpt file or a run directory; without it the newest (by modification time) of
  runs/*/checkpoints/best.ckpt and multirun/*/*/checkpoints/best.ckpt under the current directory.

--export hf OUT_DIR: a GPT2LMHeadModel, its tokenizer and a model card, loadable with transformers alone
  (AutoModelForCausalLM/AutoTokenizer.from_pretrained(OUT_DIR)); checked against this model before it is
  written. Needs the interop extra (pip install -e ".[interop]"). A model GPT-2 cannot express is refused.

exit status: 0 all inputs answered; 1 some input was invalid (or an --eval file had no valid problem);
  2 no usable checkpoint or device, unreadable --eval file, bad options or a failed --export; 130 interrupted."""

MAX_SHOWN = 60  # characters of a bad input echoed back in its error line
DEVICES = ("cpu", "cuda", "mps", "auto")  # --device; each is checked by model.device.resolve_device


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="calc.py",
        description=HELP,
        epilog=EPILOG,
        allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("exprs", nargs="*", metavar="EXPR", help="problems to answer, e.g. 123+456")
    p.add_argument("--ckpt", metavar="PATH", help="checkpoint file or run directory (default: the newest run's)")
    p.add_argument(
        "--device",
        choices=DEVICES,
        default="cpu",
        help="where the model computes (default cpu; auto: cuda, else mps, else cpu)",
    )
    p.add_argument("--check", action="store_true", help="also say whether each answer is right")
    p.add_argument(
        "--attention", action="store_true", help="draw each problem's attention per layer and head (on stderr)"
    )
    p.add_argument("--eval", metavar="FILE", help="score the model on every problem of FILE")
    p.add_argument(
        "--show-mistakes",
        type=int,
        metavar="N",
        help="with --eval: how many mistakes and invalid lines to list (default 10)",
    )
    p.add_argument("--json", action="store_true", help="with --eval: print one JSON object instead of tables")
    p.add_argument(
        "--export",
        nargs=2,
        metavar=("hf", "OUT_DIR"),
        help="write the model as a Hugging Face transformers directory (see below)",
    )
    return p


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = build_parser()
    # '-3+4' would look like an option to argparse: a leading space makes it an expression (stripped later)
    argv = [" " + a if re.match(r"-+[^a-zA-Z-]", a) else a for a in argv]
    args = parser.parse_args(argv)
    if args.export is not None:
        if args.export[0] != "hf":
            parser.error(f"--export {args.export[0]}: unknown format; the one supported is  --export hf OUT_DIR")
        if args.exprs or args.eval is not None or args.check or args.attention or args.json or args.device != "cpu":
            parser.error("--export takes only --ckpt (it works on the CPU)")
    if args.eval is not None:
        if args.exprs or args.attention:
            parser.error("--eval takes no expressions and no --attention")
        if args.show_mistakes is None:
            args.show_mistakes = 10
        elif args.show_mistakes < 0:
            parser.error("--show-mistakes must be >= 0")
    elif args.json or args.show_mistakes is not None:
        parser.error("--json and --show-mistakes go with --eval FILE")
    return args


def shown(text: str) -> str:
    text = text.strip()
    return repr(text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "...")


def display_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


# ---- answering expressions -----------------------------------------------------------------------------
def answer_lines(calc, texts: list[str], check: bool, attention: bool) -> int:
    """Print one line per text, in order; 1 if any was invalid, else 0."""
    from data.expressions import ExpressionError, parse_expression

    parsed = []
    for text in texts:
        try:
            parsed.append(parse_expression(text, calc.fmt, allow_answer=check))
        except ExpressionError as e:
            parsed.append(e)
    answers = iter(calc.answer([p for p in parsed if not isinstance(p, ExpressionError)]))
    status = 0
    for text, problem in zip(texts, parsed, strict=True):
        if isinstance(problem, ExpressionError):
            print(f"error: {shown(text)}: {problem}", flush=True)
            status = 1
            continue
        answer = next(answers)
        line = str(answer)
        if check:
            line += " ✓" if answer.value == problem.truth else f" ✗ (truth {problem.truth})"
        print(line, flush=True)
        if attention:
            draw_attention(calc, problem, answer)
    return status


def draw_attention(calc, problem, answer) -> None:
    from rich.console import Console

    from analysis.terminal import problem_attention, render_attention

    prompt = calc.encode([problem])[0, : calc.fmt.prompt_len].tolist()
    att = problem_attention(calc.net, calc.tokenizer, prompt, calc.fmt.answer_len)
    layout = ", answer written least-significant digit first" if calc.fmt.reverse_answer else ""
    title = f"{problem.text} = {answer}   (the model reads and writes: {''.join(att.labels)}{layout})"
    Console(stderr=True).print(render_attention(att, title))


def interactive(calc, check: bool, attention: bool) -> int:
    try:
        import readline  # noqa: F401  -- line editing and history for input()
    except ImportError:
        pass
    from data.expressions import accepted

    print(f"tinycalc: {calc.describe()}; {accepted(calc.fmt)}. An empty line or Ctrl-D quits.", file=sys.stderr)
    status = 0
    while True:
        try:
            if sys.stdout.isatty():
                line = input("> ")  # readline draws the prompt
            else:  # answers redirected to a file: keep the prompt out of it
                print("> ", end="", file=sys.stderr, flush=True)
                line = input()
        except EOFError:
            print(file=sys.stderr)
            return status
        if not line.strip():
            return status
        status = max(status, answer_lines(calc, [line], check, attention))


# ---- evaluating a file -----------------------------------------------------------------------------------
def input_lines(text: str) -> list[str]:
    """Lines split at '\n' only (and a '\r' before it): str.splitlines() would also split at form feeds,
    '\x1c', '\u2028' ..., giving two answers for one input line and misaligning every later one."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line
    return [line.removesuffix("\r") for line in lines]


def read_text(name: str) -> str:
    """The file's text; bytes that are not UTF-8 become '\ufffd', so their lines are reported as invalid."""
    if name == "-":
        return sys.stdin.read()
    try:
        return Path(name).read_bytes().decode("utf-8", errors="replace")
    except OSError as e:
        raise OSError(f"{name}: {e.strerror or e}") from None


def evaluate_file(calc, name: str, show_mistakes: int, as_json: bool) -> int:
    from data.expressions import read_problems

    try:
        text = read_text(name)
    except OSError as e:
        print(f"error: cannot read --eval file {e}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    problems = read_problems(input_lines(text), calc.fmt)
    report = calc.evaluate(problems.problems, problems.lines, show_mistakes)
    seconds = time.perf_counter() - started
    result = {
        "checkpoint": str(calc.path),
        "file": name,
        "model": calc.describe(),
        "device": str(calc.device),
        **report,
        "n_invalid": len(problems.invalid),
        "invalid": [{"line": n, "text": t, "error": e} for n, t, e in problems.invalid[:show_mistakes]],
        "seconds": round(seconds, 4),
    }
    if as_json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        print_report(result)
    if not problems.problems:
        print(f"error: no valid problem in {name}", file=sys.stderr)
        return 1
    return 0


def percent(x: float | None) -> str:
    return "-" if x is None else f"{x:.2%}"


def print_report(r: dict) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False)
    console.print(
        Text(
            f"{r['file']}: {r['n_problems']:,} problems, {r['n_invalid']:,} invalid lines skipped, "
            f"evaluated in {r['seconds']:.2f} s on {r['device']}"
        )
    )
    console.print(Text(f"model: {r['model']} ({display_path(Path(r['checkpoint']))})"))
    table = Table(title="exact match and digit accuracy", title_justify="left")
    for name, justify in (
        ("problems", "left"),
        ("n", "right"),
        ("right", "right"),
        ("exact match", "right"),
        ("digit accuracy", "right"),
    ):
        table.add_column(name, justify=justify)
    row = lambda label, s: table.add_row(
        label,
        f"{s['n']:,}",
        f"{s['right']:,}",  # noqa: E731
        percent(s["exact_match"]),
        percent(s["digit_accuracy"]),
    )
    row("all", {**r, "n": r["n_problems"]})
    ops = set(r["by_operator"])
    carried = "borrows" if ops == {"-"} else "carries/borrows" if "-" in ops else "carries"
    for key, label in (
        ("by_operator", "operator {}"),
        ("by_operand_digits", "{}-digit operands"),
        ("by_carries", "{} " + carried),
    ):
        table.add_section()
        for value, stats in r[key].items():
            row(label.format(value), stats)
    console.print(table)
    if r["n_mistakes"]:
        console.print(Text(f"first {len(r['mistakes'])} of {r['n_mistakes']:,} mistakes:", style="bold"))
        for m in r["mistakes"]:
            said = m["model"] if m["model"] is not None else f"? (unreadable answer {m['model_text']!r})"
            console.print(Text(f"  line {m['line']}: model says {m['problem']}={said}, truth {m['truth']}"))
    if r["n_invalid"]:
        console.print(Text(f"{r['n_invalid']:,} invalid lines (skipped), first {len(r['invalid'])}:", style="bold"))
        for bad in r["invalid"]:
            console.print(Text(f"  line {bad['line']}: {shown(bad['text'])}: {bad['error']}"))


# ---- entry point ---------------------------------------------------------------------------------------
def unfinished_warning(ckpt: Path) -> str | None:
    """A warning line when ``ckpt`` belongs to a run that never finished (killed, or still training)."""
    from storage.rundir import RunDir

    run = RunDir.of_checkpoint(ckpt)
    if run is None or not run.unfinished:
        return None
    return f"warning: {run.describe_unfinished()}; its best.ckpt may be an early one"


def load(ckpt: str | None, device):
    from model.checkpoint import find_checkpoints, load_calculator, newest_checkpoint

    if ckpt is not None:
        calc = load_calculator(ckpt, device)
    else:
        path = newest_checkpoint(Path.cwd())
        calc = load_calculator(path, device)
        n = len(find_checkpoints(Path.cwd()))
        print(f"checkpoint: {display_path(path)} (newest of {n}; {calc.describe()})", file=sys.stderr)
    warning = unfinished_warning(calc.path)
    if warning:
        print(warning, file=sys.stderr)
    return calc


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    for stream in (sys.stdin, sys.stdout, sys.stderr):  # never die on bytes that are not text, or on ✓
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    from model.device import DeviceError, resolve_device

    try:  # before the checkpoint is read (and Lightning imported): a missing GPU is said at once
        device = resolve_device(args.device)
    except DeviceError as e:
        print(f"error: --device {args.device}: {e.why}; use --device cpu", file=sys.stderr)
        return 2
    from model.checkpoint import CheckpointError

    try:
        calc = load(args.ckpt, device)
    except CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.export is not None:
        from model.export import export_command

        return export_command(calc, *args.export)
    if args.eval is not None:
        return evaluate_file(calc, args.eval, args.show_mistakes, args.json)
    if args.exprs:
        return answer_lines(calc, args.exprs, args.check, args.attention)
    if not sys.stdin.isatty():
        return answer_lines(calc, input_lines(sys.stdin.read()), args.check, args.attention)
    return interactive(calc, args.check, args.attention)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print(file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:  # e.g. | head: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
