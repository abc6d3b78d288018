"""What the lab is given from outside -- an export dropped on it, a link -- held to its limits, in Chromium.

A table of crafted exports (each a small edit of a real one: config.json's sizes, model.safetensors' header) and
crafted links: each is answered within a second by one line, and the page's own model stays (modelIn is still
``M``, and it still answers the default problem as the Python model does). The export is written here, byte by
byte as the safetensors format says, from model/export.py's own ``gpt2_state_dict``: the interop extra
(transformers, safetensors) is not needed; a valid one opening and computing the model's logits is the control.
"""

from __future__ import annotations

import base64
import json
import struct

import pytest
import torch

from analysis.lab import lab_page, lab_payload
from data.expressions import parse_expression
from model.calculator import Calculator
from model.export import gpt2_state_dict
from model.positions import trained_len
from tests.test_lab import model_of


def export_config(calc: Calculator) -> dict:
    """config.json as model/export.py's gpt2_config writes it: the keys the lab reads."""
    net, fmt, tok = calc.net, calc.fmt, calc.tokenizer
    cfg = net.cfg
    return {
        "model_type": "gpt2",
        "activation_function": "gelu",
        "layer_norm_epsilon": net.ln_f.eps,
        "scale_attn_weights": True,
        "n_embd": cfg.d_model,
        "n_head": cfg.n_heads,
        "n_layer": cfg.n_layers,
        "n_inner": cfg.mlp_ratio * cfg.d_model,
        "n_positions": trained_len(net),
        "vocab_size": cfg.vocab_size,
        "tie_word_embeddings": cfg.tie_weights,
        "bos_token_id": tok.bos_id,
        "eos_token_id": tok.eos_id,
        "pad_token_id": tok.pad_id,
        "tinycalc": {
            "digits": fmt.digits,
            "operators": fmt.operators,
            "reverse_answer": fmt.reverse_answer,
            "show_work": fmt.show_work,
            "larger_first": fmt.larger_first,
            "prompt_len": fmt.prompt_len,
            "answer_len": fmt.answer_len,
        },
    }


def tensors_of(calc: Calculator) -> tuple[dict, bytes]:
    """model.safetensors' header (name -> dtype, shape, data_offsets) and data, in the order written."""
    header, data = {}, b""
    for name, t in gpt2_state_dict(calc.net).items():
        raw = t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    return header, data


def safetensors(header: dict, data: bytes, declared: int | None = None) -> bytes:
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    return struct.pack("<Q", len(blob) if declared is None else declared) + blob + data


def with_config(config: dict, **changes) -> dict:
    """config with keys changed; "tinycalc.x" changes the tinycalc block's x."""
    config = json.loads(json.dumps(config))
    for key, value in changes.items():
        where, _, name = key.rpartition("__")
        (config[where] if where else config)[name] = value
    return config


def crafted_exports(calc: Calculator) -> dict[str, tuple[dict | bytes, bytes, str]]:
    """name -> (config.json as a dict or bytes, model.safetensors, the line the lab must show)."""
    config, (header, data) = export_config(calc), tensors_of(calc)
    real = safetensors(header, data)
    first, second = "transformer.h.0.ln_1.weight", "transformer.h.0.ln_1.bias"  # the same shape, one after another

    def edited(name: str, **entry) -> bytes:
        return safetensors({**header, name: {**header[name], **entry}}, data)

    begin, end = header[first]["data_offsets"]
    big = {"n_embd": 2048, "n_head": 8, "n_layer": 16, "n_inner": 8192}  # each within its limit, together too much
    return {
        "n_layer 20,000,000": (with_config(config, n_layer=20_000_000), real,
                               "error: config.json: n_layer is 20000000; the lab runs at most 48"),
        "20,000 layers": (with_config(config, n_layer=20_000), real,
                          "error: config.json: n_layer is 20000; the lab runs at most 48"),
        "a 20,000-token answer": (with_config(config, tinycalc__show_work=True, tinycalc__answer_len=20_000), real,
                                  "error: config.json: tinycalc.answer_len is 20000; the lab runs at most 512"),
        "a 519-token problem and answer": (with_config(config, tinycalc__show_work=True, tinycalc__answer_len=510),
                                           real, "error: config.json: a problem and its answer are 519 tokens"),
        "300,000 digits": (with_config(config, tinycalc__digits=300_000, tinycalc__prompt_len=600_003), real,
                           "error: config.json: tinycalc.digits is 300000; the lab runs at most 64"),
        "100,000 heads": (with_config(config, n_head=100_000), real,
                          "error: config.json: n_head is 100000; the lab runs at most 64"),
        "n_embd 10^9": (with_config(config, n_embd=10**9), real,
                        "error: config.json: n_embd is 1000000000; the lab runs at most 2048"),
        "n_layer as text": (with_config(config, n_layer="2"), real, 'error: config.json: n_layer is "2", not a size'),
        "n_layer 1e300": (with_config(config, n_layer=1e300), real,
                          "error: config.json: n_layer is 1e+300, not a size"),
        "40 layers x 4 heads": (with_config(config, n_layer=40), real,
                                "error: config.json: 40 layers x 4 heads; the lab draws at most 128 heads"),
        "too much work": (with_config(config, **big, tinycalc__digits=64, tinycalc__prompt_len=131,
                                      tinycalc__answer_len=65), real,
                          "error: config.json: writing one answer would take"),
        "a 100 KB config": (with_config(config, padding="x" * 100_000), real,
                            "error: config.json is 100"),
        "a config that is not JSON": (b"{'n_layer': 2", real, "error: config.json is not JSON"),
        "an offset into the header": (config, edited(first, data_offsets=[-64, end - begin - 64]),
                                      "error: model.safetensors is damaged: transformer.h.0.ln_1.weight's "
                                      "data_offsets"),
        "an offset at another tensor's bytes": (config, edited(second, data_offsets=[begin, end]),
                                                "error: model.safetensors is damaged: transformer.h.0.ln_1.bias's "
                                                "bytes overlap transformer.h.0.ln_1.weight's"),
        "an offset past the data": (config, edited(first, data_offsets=[len(data), len(data) + end - begin]),
                                    "error: model.safetensors is damaged: transformer.h.0.ln_1.weight's data_offsets"),
        "offsets out of order": (config, edited(first, data_offsets=[end, begin]),
                                 "error: model.safetensors is damaged: transformer.h.0.ln_1.weight's data_offsets"),
        "a tensor named __proto__": (config, safetensors({**header, "__proto__": {
                                         "dtype": "F32", "shape": [1], "data_offsets": [len(data), len(data) + 4]}},
                                         data + b"\0" * 4),
                                     "error: model.safetensors holds __proto__, which the model config.json describes "
                                     "has no place for"),
        "bytes left over": (config, real + b"\0" * 8, "error: model.safetensors is damaged: 8 bytes after its last"),
        "a shape its bytes do not fill": (config, edited(first, shape=[header[first]["shape"][0] + 1]),
                                          "error: model.safetensors is damaged: transformer.h.0.ln_1.weight's data "
                                          "does not fill its shape"),
        "a shape of 2^40": (config, edited(first, shape=[2**40]), "error: model.safetensors is damaged: "
                            "transformer.h.0.ln_1.weight's data does not fill its shape"),
        "a rank-9 shape": (config, edited(first, shape=[1] * 9),
                           "error: model.safetensors is damaged: transformer.h.0.ln_1.weight has 9 dimensions; "
                           "the lab reads at most 4"),
        "F16 weights": (config, edited(first, dtype="F16"),
                        "error: model.safetensors holds transformer.h.0.ln_1.weight as F16; the lab reads float32"),
        "a 2^60-byte header": (config, safetensors(header, data, declared=2**60),
                               "error: model.safetensors declares a 1152921504606846976-byte header"),
        "a cut header": (config, safetensors(header, data, declared=len(real) + 1),
                         "error: model.safetensors is not a safetensors file (its header is cut)"),
        "2,000 tensors": (config, safetensors({f"t{i}": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}
                                               for i in range(2000)}, b""),
                          "error: model.safetensors holds 2000 tensors; the lab reads at most 1024"),
        "a header that is a list": (config, safetensors([1, 2], b""),  # type: ignore[arg-type]
                                    "error: model.safetensors is not a safetensors file (its header is no table)"),
    }  # fmt: skip


DROP_AND_WAIT = """async ([files]) => {
    const transfer = new DataTransfer();
    for (const [name, data] of files) {
        transfer.items.add(new File([Uint8Array.from(atob(data), (c) => c.charCodeAt(0))], name));
    }
    const lab = document.getElementById("lab");
    lab.querySelector(".lab-opened").replaceChildren();
    const started = performance.now();
    const event = new DragEvent("drop", { dataTransfer: transfer, bubbles: true, cancelable: true });
    lab.dispatchEvent(event);
    while (!lab.querySelector(".lab-opened").textContent) {
        if (performance.now() - started > 10000) return [null, 10000];
        await new Promise((resolve) => setTimeout(resolve, 1));
    }
    return [lab.querySelector(".lab-opened").innerText, performance.now() - started];
}"""

ANSWER = """(text) => {
    const m = TinycalcLab.modelIn(document.getElementById("lab"));
    return String(TinycalcLab.decode(m, TinycalcLab.encodeProblem(m, text).ids).answer);
}"""


class Lab:
    """The page's own model (3-digit addition, untrained, large weights) in its lab page, and its export."""

    def __init__(self, folder):
        net, fmt, tokenizer = model_of("default")
        self.calc = Calculator(net, fmt, tokenizer)
        self.page = folder / "lab.html"
        self.page.write_text(lab_page(lab_payload(net, fmt, tokenizer.vocab)))
        self.problem = "199+1"  # the lab's first problem (defaultProblem)
        (answer,) = self.calc.answer([parse_expression(self.problem, fmt)])
        self.answer = str(answer.value)  # what the Python model says: the page's model must keep saying it

    def kept(self, page) -> bool:
        """The page still runs its own model, and it answers as the Python model does, typed in the box too."""
        page.fill(".lab-problem", self.problem)
        shown = page.inner_text(".lab-result")
        same = page.evaluate("TinycalcLab.modelIn(document.getElementById('lab')) === M")
        return same and shown == self.answer and page.evaluate(ANSWER, self.problem) == self.answer


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Lab:
    return Lab(tmp_path_factory.mktemp("lab_inputs"))


def files_of(config: dict | bytes, weights: bytes) -> list[list[str]]:
    text = config if isinstance(config, bytes) else json.dumps(config).encode()
    files = (("config.json", text), ("model.safetensors", weights))
    return [[name, base64.b64encode(raw).decode()] for name, raw in files]


def test_a_real_export_written_here_opens_as_the_model(browser, lab):
    """The control: the export as written here opens, and the page's logits on it are the model's."""
    page = browser.new_page()
    page.goto(lab.page.as_uri())
    config, (header, data) = export_config(lab.calc), tensors_of(lab.calc)
    line, ms = page.evaluate(DROP_AND_WAIT, [files_of(config, safetensors(header, data))])
    assert line.startswith("Opened config.json + model.safetensors: 3-digit +, 2 layers x 4 heads."), line
    seq = lab.calc.encode([parse_expression("123+456", lab.calc.fmt)])[0, :-1]
    with torch.no_grad():
        want = lab.calc.net(seq[None])[0][0]
    got = torch.tensor(page.evaluate(
        "ids => TinycalcLab.forward(TinycalcLab.modelIn(document.getElementById('lab')), ids).logits.map(r => [...r])",
        seq.tolist()))  # fmt: skip
    assert float((got - want).abs().max()) <= 1e-4
    assert not page.evaluate("TinycalcLab.modelIn(document.getElementById('lab')) === M")  # it runs the export now


def test_every_crafted_export_is_one_line_within_a_second_and_the_page_keeps_its_model(browser, lab):
    page = browser.new_page()
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(lab.page.as_uri())
    before = page.inner_text(".lab-answer")
    table = []
    for name, (config, weights, expected) in crafted_exports(lab.calc).items():
        line, ms = page.evaluate(DROP_AND_WAIT, [files_of(config, weights)])
        table.append((name, line, ms))
        assert line is not None and line.startswith(expected), (name, line)
        assert "\n" not in line and len(line) < 400, (name, line)
        assert ms < 1000, (name, ms)
        assert page.inner_text(".lab-answer") == before, name  # the lab as it was ...
        assert lab.kept(page), name  # ... running the page's own model
    print("\n".join(f"{name:40} {ms:7.1f} ms  {line}" for name, line, ms in table))
    assert requests == [lab.page.as_uri()]


def link_cases(lab: Lab) -> dict[str, tuple[str, str]]:
    """name -> (the URL fragment, the line the lab shows)."""
    return {
        "200,000 spaces then x": ("problem=1%2B1" + " " * 200_000 + "x",
                                  "error: this link's experiment is "),
        "4,000 spaces then x": ("problem=1%2B1" + "%20" * 1300 + "x",
                                "error: the problem is 1,304 characters long; write one of at most 64"),
        "60 spaces then x": ("problem=1%2B1" + " " * 60 + "x", "error: write a problem as a+b (whole numbers)"),
        "a 100-digit operand": ("problem=" + "9" * 100 + "%2B1", "error: the problem is 102 characters long"),
        "a 40-digit operand": ("problem=" + "9" * 40 + "%2B1", "error: " + "9" * 40 + " has 40 digits; this model "
                               "was trained on at most 3"),
        "1,000 head switches": ("problem=199%2B1&heads=" + "L0h0%3Aoff%2C" * 1000,
                                "error: this link's experiment is 13,023 characters long; the lab reads links of at "
                                "most 4,096, so it starts from its own problem"),
        "a long second problem": ("problem=199%2B1&corrupted=" + "1" * 3000,
                                  "error: the problem is 3,000 characters long"),
    }  # fmt: skip


@pytest.mark.parametrize("name", ["200,000 spaces then x", "4,000 spaces then x", "60 spaces then x",
                                  "a 100-digit operand", "a 40-digit operand", "1,000 head switches",
                                  "a long second problem"])  # fmt: skip
def test_every_crafted_link_is_one_line_within_a_second_and_the_page_keeps_its_model(browser, lab, name):
    fragment, expected = link_cases(lab)[name]
    page = browser.new_page()
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    url = f"{lab.page.as_uri()}#{fragment}"
    page.goto(url)
    ms = float(page.get_attribute("#lab", "data-render-ms"))  # the lab's own time: the link read, the answer drawn
    lines = [e.inner_text() for e in page.query_selector_all(".lab-error")]
    assert len(lines) == 1 and lines[0].startswith(expected) and "\n" not in lines[0], (name, lines)
    assert ms < 1000, (name, ms)  # (Chromium takes ~0.6 s to open any page at a 0.6 MB address, before the lab)
    print(f"\n{name:40} {ms:7.1f} ms  {lines[0]}")
    assert lab.kept(page), name
    assert [r.split("#")[0] for r in requests] == [lab.page.as_uri()]


def test_the_limits_are_one_table_in_the_lab(browser, lab):
    """Every bound the lab holds its inputs to is one frozen table (TinycalcLab.LIMITS), read where it checks."""
    page = browser.new_page()
    page.goto(lab.page.as_uri())
    limits = page.evaluate("({...TinycalcLab.LIMITS, frozen: Object.isFrozen(TinycalcLab.LIMITS)})")
    sizes = {"layers", "heads", "width", "hidden", "digits", "sequence", "tensors", "fileBytes", "headerBytes", "work"}
    assert limits.pop("frozen") and set(limits) >= sizes | {"problemChars", "linkChars"}
    cases = "\n".join(expected for _, _, expected in crafted_exports(lab.calc).values())
    for key in ("layers", "heads", "width", "digits", "tensors"):
        assert f"at most {limits[key]}" in cases, key  # the line names the limit it read
