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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from training.collector import exit_quickly
from training.signals import guard_command

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
  runs/*/checkpoints/best.ckpt and multirun/*/*/checkpoints/best.ckpt under the current directory whose run
  finished (results.json status ok) -- a run still training or stopped early is never picked silently. stderr
  names it and its test exact-match. --export refuses a run that is still training.

--export hf OUT_DIR: a GPT2LMHeadModel, its tokenizer and a model card, loadable with transformers alone
  (AutoModelForCausalLM/AutoTokenizer.from_pretrained(OUT_DIR)); checked against this model before it is
  written. Needs the interop extra (pip install -e ".[interop]"). A model GPT-2 cannot express is refused.

exit status: 0 all inputs answered; 1 some input was invalid (an --eval file's valid problems are still
  scored) or an --eval file had no valid problem;
  2 no usable checkpoint or device, unreadable --eval file, bad options or a failed --export; 130 interrupted."""

MAX_SHOWN = 60  # characters of a bad input echoed back in its error line (and in --eval --json)
MAX_LINE_CHARS = 50_000  # an input line longer than this is invalid (its start is echoed, the rest dropped): room
# for two 10,000-digit operands and a product to check (model/calculator.py: ANY_LENGTH; tests/test_length.py)
PROGRESS_DIGITS = 1_000  # operands longer than this take seconds to answer: a progress line shows it (on a terminal)
MAX_LINES = 1_000_000  # lines of stdin or of an --eval file
MAX_INPUT_BYTES = 64 * 2**20  # bytes of stdin or of an --eval file
CHUNK = 1 << 16  # how much of an over-long line is read at a time
BATCH = 4096  # stdin lines answered at a time
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


def clipped(text: str) -> str:
    """At most MAX_SHOWN characters of an input (an invalid line may be megabytes long)."""
    text = text.strip()
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN].rstrip(".") + "..."


def shown(text: str) -> str:
    return repr(clipped(text))


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
        if isinstance(text, LongLine):
            parsed.append(ExpressionError(f"longer than {MAX_LINE_CHARS:,} characters"))
            continue
        try:
            parsed.append(parse_expression(text, calc.fmt, allow_answer=check, longest=calc.longest))
        except ExpressionError as e:
            parsed.append(e)
    longer = max((calc.width_of(p) for p in parsed if not isinstance(p, ExpressionError)), default=0)
    if longer > calc.trained_digits:  # answered, but the user should know it is a length never trained on
        print(
            f"warning: {longer}-digit operands: longer than the {calc.trained_digits} digits this model was trained "
            f"on (it can address up to {calc.longest}); its answers there are its own generalisation",
            file=sys.stderr,
        )
    if calc.fmt.larger_first and any(
        not isinstance(p, ExpressionError) and p.op == "-" and p.a < p.b for p in parsed
    ):  # answered too, as the model writes it
        print(
            "warning: a '-' problem with the smaller operand first: this model was trained on the larger first "
            "(data.larger_first) and never wrote a negative result",
            file=sys.stderr,
        )
    asked = [p for p in parsed if not isinstance(p, ExpressionError)]
    with decoding_progress(calc, asked):
        answers = iter(calc.answer(asked))
    status = 0
    for text, problem in zip(texts, parsed, strict=True):
        if isinstance(problem, ExpressionError):
            print(f"error: {shown(text + '...' if isinstance(text, LongLine) else text)}: {problem}", flush=True)
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


@contextmanager
def decoding_progress(calc, problems: list) -> Iterator[None]:
    """A progress line on the terminal while ``problems`` with an operand longer than :data:`PROGRESS_DIGITS` are
    answered: the positions the net has read (each prompt chunk and each answer token, as a forward hook sees them)
    out of all it will read, seq_len - 2 per problem's batch row."""
    widths = [calc.width_of(p) for p in problems]
    if max(widths, default=0) <= PROGRESS_DIGITS:
        yield
        return
    from analysis.progress import stage

    total = sum(calc.layout_for(p).seq_len - 2 for p in problems)  # a cached decode reads each position once
    with stage(f"answering {max(widths):,}-digit problems", total=total) as progress:
        reading = calc.net.register_forward_hook(lambda net, args, out: progress.advance(args[0].numel()))
        try:
            yield
        finally:
            reading.remove()


def draw_attention(calc, problem, answer) -> None:
    from rich.console import Console

    from analysis.terminal import problem_attention, render_attention

    fmt = calc.layout_for(problem)
    prompt = fmt.prompt_of(calc.encode([problem], fmt))[0].tolist()
    att = problem_attention(calc.net, calc.tokenizer, prompt, fmt.answer_len, calc.places(fmt))
    layout = ", answer written least-significant digit first" if calc.fmt.reverse_answer else ""
    title = f"{problem.text} = {answer}   (the model reads and writes: {''.join(att.labels)}{layout})"
    Console(stderr=True).print(render_attention(att, title))


def interactive(calc, check: bool, attention: bool) -> int:
    try:
        import readline  # noqa: F401  -- line editing and history for input()
    except ImportError:
        pass
    from data.expressions import accepted

    print(
        f"tinycalc: {calc.describe()}; {accepted(calc.fmt, calc.longest)}. An empty line or Ctrl-D quits.",
        file=sys.stderr,
    )
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


# ---- reading input, within limits -------------------------------------------------------------------------
class LongLine(str):
    """The first characters of an input line longer than MAX_LINE_CHARS (the rest was read and dropped)."""


def lab_html(calc) -> str:
    """The model's lab page (analysis/lab.py), the one a run's report.html opens with, as a page of its own: an
    export carries it (docs/interop.md), so whoever receives the model can switch its heads off in a browser."""
    from analysis.lab import lab_page, lab_payload

    return lab_page(lab_payload(calc.net, calc.fmt, calc.tokenizer.vocab), f"tinycalc lab: {calc.describe()}")


class InputTooLarge(Exception):
    """More input than MAX_LINES lines or MAX_INPUT_BYTES bytes; the message is one line."""


def input_lines(stream) -> Iterator[str]:
    """The lines of ``stream`` (binary or text), one at a time, split at '\n' only (and a '\r' before it):
    str.splitlines() would also split at form feeds, '\x1c', '\u2028' ..., giving two answers for one input
    line. Bytes that are not UTF-8 become '\ufffd' (so the line is reported invalid). Bounded: a line longer
    than MAX_LINE_CHARS comes as a :class:`LongLine` holding its start, and more than MAX_LINES lines or
    MAX_INPUT_BYTES in all raises :class:`InputTooLarge` -- never a read of the whole input at once."""
    n_lines = n_bytes = 0
    limit = MAX_LINE_CHARS * 4 + 2  # the longest allowed line in UTF-8, and its line ending

    def text(chunk) -> str:
        return chunk.decode("utf-8", errors="replace") if isinstance(chunk, bytes) else chunk

    def too_large(why: str) -> InputTooLarge:
        return InputTooLarge(f"{why}; split the input into smaller pieces")

    while True:
        chunk = stream.readline(limit)
        if not chunk:
            return
        n_bytes += len(chunk)
        n_lines += 1
        if n_lines > MAX_LINES:
            raise too_large(f"more than {MAX_LINES:,} lines (the limit)")
        line = text(chunk)
        ended = line.endswith("\n")
        while not ended:  # longer than any allowed line: drop the rest of it, within the byte budget
            if n_bytes > MAX_INPUT_BYTES:
                raise too_large(f"more than {MAX_INPUT_BYTES // 2**20} MiB (the limit)")
            more = stream.readline(CHUNK)
            if not more:
                break
            n_bytes += len(more)
            ended = text(more).endswith("\n")
            if len(line) <= MAX_LINE_CHARS:
                line += text(more)[: MAX_LINE_CHARS + 1]
        if n_bytes > MAX_INPUT_BYTES:
            raise too_large(f"more than {MAX_INPUT_BYTES // 2**20} MiB (the limit)")
        line = line.removesuffix("\n").removesuffix("\r")
        yield LongLine(line[:MAX_SHOWN]) if len(line) > MAX_LINE_CHARS else line


def batches(lines: Iterator[str], size: int | None = None) -> Iterator[list[str]]:
    size = size or BATCH
    batch = []
    for line in lines:
        batch.append(line)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def answer_stream(calc, stream, check: bool, attention: bool) -> int:
    """Answer the lines of ``stream`` a batch at a time, as they come: memory stays bounded however long it is."""
    status = 0
    lines = input_lines(stream)
    try:
        for batch in batches(lines):
            status = max(status, answer_lines(calc, batch, check, attention))
    except InputTooLarge as e:
        print(f"error: stdin: {e}; the lines before were answered", file=sys.stderr)
        return 2
    return status


# ---- evaluating a file -----------------------------------------------------------------------------------
def open_input(name: str):
    """The --eval file as a binary stream ('-': stdin), or OSError naming it."""
    if name == "-":
        return getattr(sys.stdin, "buffer", sys.stdin)
    try:
        return open(name, "rb")  # noqa: SIM115 -- closed by evaluate_file
    except OSError as e:
        raise OSError(f"{name}: {e.strerror or e}") from None


def read_eval_lines(name: str) -> tuple[list[str], list[tuple[int, str, str]]]:
    """The --eval file's lines (an over-long one as '', so it counts as no problem) and its over-long lines as
    invalid entries (line number, the start of it, why)."""
    stream = open_input(name)
    lines, long = [], []
    try:
        for number, line in enumerate(input_lines(stream), start=1):
            if isinstance(line, LongLine):
                long.append((number, line + "...", f"longer than {MAX_LINE_CHARS:,} characters"))
                line = ""
            lines.append(line)
    finally:
        if stream is not getattr(sys.stdin, "buffer", sys.stdin):
            stream.close()
    return lines, long


def evaluate_file(calc, name: str, show_mistakes: int, as_json: bool) -> int:
    from data.expressions import read_problems

    try:
        lines, long = read_eval_lines(name)
    except OSError as e:
        print(f"error: cannot read --eval file {e}", file=sys.stderr)
        return 2
    except InputTooLarge as e:
        print(f"error: --eval {name}: {e}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    problems = read_problems(lines, calc.fmt, calc.longest)
    problems.invalid[:] = sorted(problems.invalid + long)
    del lines
    with decoding_progress(calc, problems.problems):
        report = calc.evaluate(problems.problems, problems.lines, show_mistakes)
    seconds = time.perf_counter() - started
    result = {
        "checkpoint": str(calc.path),
        "file": name,
        "model": calc.describe(),
        "device": str(calc.device),
        **report,
        "n_invalid": len(problems.invalid),
        "invalid": [{"line": n, "text": clipped(t), "error": e} for n, t, e in problems.invalid[:show_mistakes]],
        "seconds": round(seconds, 4),
    }
    if as_json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        print_report(result)
    if not problems.problems:
        print(f"error: no valid problem in {name}", file=sys.stderr)
        return 1
    return 1 if problems.invalid else 0  # the valid problems are scored either way


def percent(x: float | None) -> str:
    return "-" if x is None else f"{x:.2%}"


def counted(n: int, one: str, many: str | None = None) -> str:
    """``1 carry``, ``2 carries``, ``1,000 invalid lines``: the number with the noun it takes."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


CARRY_WORDS = {"carries": "carry", "borrows": "borrow", "steps": "step", "division steps": "division step"}


def print_report(r: dict) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(highlight=False)
    console.print(
        Text(
            f"{r['file']}: {counted(r['n_problems'], 'problem')}, {counted(r['n_invalid'], 'invalid line')} skipped, "
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
    kinds = ["carries"] * bool(ops & {"+", "*"}) + ["borrows"] * ("-" in ops) + ["steps"] * ("/" in ops)
    carried = "division steps" if ops == {"/"} else "/".join(kinds)  # data/difficulty.py: what each counts
    one = "/".join(CARRY_WORDS[k] for k in carried.split("/"))
    labels = {
        "by_operator": lambda v: f"operator {v}",
        "by_operand_digits": lambda v: f"{v}-digit operands",
        "by_carries": lambda v: counted(int(v), one, carried) if str(v).isdigit() else f"{v} {carried}",
    }
    for key, label in labels.items():
        table.add_section()
        for value, stats in r[key].items():
            row(label(value), stats)
    console.print(table)
    if r["n_mistakes"]:
        console.print(Text(f"first {len(r['mistakes'])} of {counted(r['n_mistakes'], 'mistake')}:", style="bold"))
        for m in r["mistakes"]:
            said = m["model"] if m["model"] is not None else f"? (unreadable answer {m['model_text']!r})"
            console.print(Text(f"  line {m['line']}: model says {m['problem']}={said}, truth {m['truth']}"))
    if r["n_invalid"]:
        console.print(
            Text(f"{counted(r['n_invalid'], 'invalid line')} (skipped), first {len(r['invalid'])}:", style="bold")
        )
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
    from model.checkpoint import find_checkpoints, finished, load_calculator, newest_checkpoint, recorded_exact_match

    if ckpt is not None:
        calc = load_calculator(ckpt, device)
    else:
        path = newest_checkpoint(Path.cwd())
        calc = load_calculator(path, device)
        found = find_checkpoints(Path.cwd())
        n_finished = sum(map(finished, found))
        score = recorded_exact_match(path)
        which = f"newest finished run of {len(found)}" if finished(path) else f"newest of {len(found)}, none finished"
        quality = f"test exact-match {score:.2%}" if score is not None else "test exact-match not recorded"
        print(f"checkpoint: {display_path(path)} ({which}; {quality}; {calc.describe()})", file=sys.stderr)
        newer = found.index(path)
        if n_finished and newer:  # a sweep's newest jobs may still be training, or have stopped early
            print(f"note: skipped {newer} newer run(s) that did not finish; --ckpt picks one", file=sys.stderr)
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
    from training.collector import alive_frozen
    from training.threads import use_threads

    use_threads()  # one thread, or OMP_NUM_THREADS (training/threads.py)
    from model.checkpoint import CheckpointError

    try:
        calc = load(args.ckpt, device)
    except CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    with alive_frozen():  # training/collector.py: the collector's scans skip what the imports made
        if args.export is not None:
            from model.export import export_command

            # the export travels with its lab: the same weights, heads to switch off in a browser
            return export_command(calc, *args.export, extras={"lab.html": lab_html(calc)})
        if args.eval is not None:
            return evaluate_file(calc, args.eval, args.show_mistakes, args.json)
        if args.exprs:
            return answer_lines(calc, args.exprs, args.check, args.attention)
        if not sys.stdin.isatty():
            return answer_stream(calc, getattr(sys.stdin, "buffer", sys.stdin), args.check, args.attention)
        return interactive(calc, args.check, args.attention)


if __name__ == "__main__":
    guard_command()  # Ctrl-C or SIGTERM from here on (main()'s imports too): one line, exit 130 / 143
    try:
        exit_quickly(main())
    except KeyboardInterrupt:
        print(file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:  # e.g. | head: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
