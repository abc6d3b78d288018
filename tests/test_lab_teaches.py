"""The lab teaches (issue 54): on a real run's report.html, in Chromium, what the lab shows is what the model does.

The run is the small sweep's trained job (tests/conftest.py's ``small_sweep``: 2-digit addition, 2 layers x 2
heads), shared with tests/test_html_report.py. Each number the page writes is set against the Python model's own
(its attention, its greedy answers with heads zeroed or at their means, its patching) and against the run's
recorded results (results.json, ablation.csv, patching.csv).
"""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest
import torch

from analysis.engine.cache import run_with_cache
from analysis.html_report import write_run_report
from analysis.lab import format_of, head_means
from data.build import problem_format
from data.expressions import parse_expression
from data.positions import positions
from data.text import parse_answer
from data.tokenizer import CharTokenizer
from model.checkpoint import load_calculator
from model.hooks import ablated, hook_name
from tests.test_html_report import MISTAKES, Page, inlined_data


@pytest.fixture(scope="module")
def run(small_sweep) -> Path:
    sweep, done = small_sweep
    assert done.returncode == 0, done.stderr[-2000:]
    (job,) = sweep.glob("1_*")
    write_run_report(job)  # this checkout's page
    return job


@pytest.fixture(scope="module")
def calc(run):
    return load_calculator(run)


def tokens_of(calc, problem: str, heads: dict | None = None) -> list[str]:
    """The tokens the lab's maps read for ``problem``: [BOS] (shown '^'), the prompt and the answer written
    greedily with ``heads`` ({(layer, head): value}) set, its last token too."""
    with ablated(calc.net, heads or {}):
        (answer,) = calc.answer([parse_expression(problem, calc.fmt)])
    prompt = "".join(c for c in problem if not c.isspace()) + "="
    a, op, b = re.match(r"(\d+)([+\-*])(\d+)", prompt).groups()
    width = calc.fmt.digits
    return ["^", *f"{a.zfill(width)}{op}{b.zfill(width)}=", *answer.text]


def answer_of(calc, problem: str, heads: dict | None = None):
    with ablated(calc.net, heads or {}):
        (answer,) = calc.answer([parse_expression(problem, calc.fmt)])
    return answer


def greedy_at_mean(calc, problem: str, head: tuple[int, int], means: torch.Tensor):
    """``problem``'s answer with ``head`` set to its mean output at every position, written greedily one whole
    pass per token (as the page does; a mean per position does not fit calc.py's cached decoding)."""
    fmt, vocab = calc.fmt, calc.tokenizer.vocab
    ids = calc.encode([parse_expression(problem, fmt)])[0, : fmt.prompt_len]
    for _ in range(fmt.answer_len):
        with ablated(calc.net, {head: means[head[0], head[1], : len(ids)]}), torch.no_grad():
            ids = torch.cat([ids, calc.net(ids[None])[0][0, -1].argmax()[None]])
    token = {i: t for t, i in vocab.items()}
    return parse_answer(fmt, "".join(token[int(i)] for i in ids[fmt.prompt_len :]))


def ids_of(calc, tokens: list[str]) -> torch.Tensor:
    vocab = calc.tokenizer.vocab
    return torch.tensor([vocab["[BOS]"] if t == "^" else vocab[t] for t in tokens])


def head_index(label: str) -> tuple[int, int]:
    layer, head = re.fullmatch(r"L(\d+)h(\d+)", label).groups()
    return int(layer), int(head)


def hover(page, one_map, i: int, j: int, T: int) -> str:
    canvas = one_map.query_selector("canvas")
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    page.mouse.move(box["x"] + (j + 0.5) * box["width"] / T, box["y"] + (i + 0.5) * box["height"] / T)
    return page.inner_text("#lab .lab-readout")


@pytest.mark.parametrize("switched", [None, "L0h0"])
def test_every_lab_map_has_token_labels_and_a_hover_readout_of_the_models_weight(browser, run, calc, switched):
    view = Page(browser, run / "report.html")
    page = view.page
    problem = page.input_value("#lab .lab-problem")
    if switched:
        page.click(f'#lab .lab-switch[data-head="{switched}"]')
    heads = {head_index(switched): 0.0} if switched else {}
    # what each figure shows: with a head switched, every head on first, then as switched
    runs = [("every head on", {}), (f"with {switched} off", heads)] if switched else [("", {})]
    shown = []
    for caption, setting in runs:
        tokens = tokens_of(calc, problem, setting)
        with ablated(calc.net, setting):
            cache = run_with_cache(calc.net, ids_of(calc, tokens)[None], None)
        shown.append((caption, tokens, cache))
    T = len(shown[0][1])
    names = [p.short for p in positions(calc.fmt)][:T]
    assert T == calc.fmt.prompt_len + calc.fmt.answer_len  # every answer token, the last one too
    figures = page.query_selector_all("#lab figure.lab-figure")
    cfg = calc.net.cfg
    assert len(figures) == cfg.n_layers * cfg.n_heads
    worst = 0.0
    for figure in figures:
        label = figure.get_attribute("data-head")
        layer, head = head_index(label)
        marked = figure.get_attribute("data-state")
        assert marked == ("off" if label == switched else "on")
        assert ("lab-off" in figure.get_attribute("class")) == (label == switched)
        if label == switched:
            assert "off: its output zeroed" in figure.inner_text()
        maps = figure.query_selector_all(".lab-map-one")
        assert len(maps) == len(shown)
        for one, (caption, tokens, cache) in zip(maps, shown, strict=True):
            assert one.inner_text().startswith(caption)
            assert [s.inner_text() for s in one.query_selector_all(".lab-rows span")] == names  # queries' places
            assert [s.inner_text() for s in one.query_selector_all(".lab-cols span")] == names  # keys' places
            assert [s.get_attribute("title").split(":")[0] for s in one.query_selector_all(".lab-cols span")] == tokens
            pattern = cache[hook_name(layer, "attn.hook_pattern")][0, head]  # (T, T)
            for i in range(T):
                for j in range(i + 1):
                    said = hover(page, one, i, j, T)
                    want = f"query {tokens[i]} ({names[i]}) reads key {tokens[j]} ({names[j]}) with weight "
                    assert want in said and said.startswith(label + (f" ({caption})" if caption else ":")), said
                    worst = max(worst, abs(float(said.rsplit(" ", 1)[1]) - float(pattern[i, j])))
    assert worst <= 1e-4, worst
    assert page.locator("#lab .lab-scale").count() == 1  # the colour scale
    view.offline_and_clean()


def test_the_lab_names_places_as_the_rest_of_the_page(browser, run, calc, tmp_path):
    """The lab's position names are data/positions.py's for every kind of format, and its answer reads most
    significant first under the names the page's mistakes table uses: r0 the units, r1 the tens, ..."""
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    (copy / "test_mistakes.json").write_text(json.dumps(MISTAKES))  # mistakes to list by place
    run = copy
    write_run_report(run)
    view = Page(browser, run / "report.html")
    page = view.page
    tokenizer = CharTokenizer()
    for fmt in (problem_format(), problem_format(operators="-"), problem_format(2, "*", show_work=True),
                problem_format(operators="+-*"), problem_format(reverse_answer=False, operators="+-")):  # fmt: skip
        want = [p.short for p in positions(fmt)][:-1]  # every position but [EOS]
        assert page.evaluate("f => TinycalcLab.positionsOf(f)", format_of(fmt, tokenizer.vocab)) == want, fmt
    data = inlined_data((run / "report.html").read_text())
    places = data["answer_places"]  # the page's own facts: the result's places in the order written
    shown = page.eval_on_selector_all("#lab .lab-digits thead th.lab-place", "els => els.map(e => e.dataset.place)")
    assert shown == places[::-1]  # read most significant first
    named = page.eval_on_selector_all("#lab .lab-digits thead th.lab-place", "els => els.map(e => e.innerText)")
    words = ["units", "tens", "hundreds", "thousands"]
    assert [n.split("\n") for n in named] == [[words[int(p[1:])], p] for p in places[::-1]]
    order = page.inner_text("#lab .lab-order")
    assert order.startswith(f"The model writes the units first ({places[0]}, then {', '.join(places[1:])})")
    rows = page.eval_on_selector_all("#mistakes tbody tr td:first-child", "els => els.map(e => e.innerText)")
    assert rows[: len(places)] == [f"{p} ({words[int(p[1:])]})" for p in places]  # one numbering on the page
    view.offline_and_clean()


def test_switching_a_head_shows_the_clean_answer_beside_the_changed_one(browser, run, calc):
    view = Page(browser, run / "report.html")
    page = view.page
    problem = page.input_value("#lab .lab-problem")
    page.click('#lab .lab-switch[data-head="L0h1"]')
    rows = page.query_selector_all("#lab .lab-digits tbody tr")
    assert [r.query_selector("th").inner_text() for r in rows] == ["every head on", "L0h1 off"]
    places = [p.short for p in positions(calc.fmt)]
    for row, heads in zip(rows, ({}, {(0, 1): 0.0}), strict=True):
        tokens = tokens_of(calc, problem, heads)
        with ablated(calc.net, heads), torch.no_grad():
            probs = calc.net(ids_of(calc, tokens[:-1])[None])[0][0].softmax(-1)  # (T, vocab)
        for cell in row.query_selector_all("td.lab-digit"):
            place = cell.get_attribute("data-place")
            at = places.index(place)  # the token's position in the sequence
            digit, p = cell.inner_text().split("\n")
            assert digit == tokens[at]
            assert abs(float(p.rstrip("%")) - 100 * float(probs[at - 1, calc.tokenizer.vocab[digit]])) <= 0.051
    clean, changed = answer_of(calc, problem), answer_of(calc, problem, {(0, 1): 0.0})
    assert page.inner_text("#lab .lab-result") == str(changed.value)
    assert page.inner_text("#lab .lab-clean-result") == str(clean.value)
    view.offline_and_clean()


def shares(calc, clean: str, corrupted: str) -> tuple[str, str, str, dict[str, float]]:
    """The Python model's patching of ``clean`` into ``corrupted`` at the first answer token where their greedy
    answers differ: (its place, the clean token, the corrupted token, {head: share of the logit difference})."""
    net, vocab, fmt = calc.net, calc.tokenizer.vocab, calc.fmt
    a = ids_of(calc, tokens_of(calc, clean))
    b = ids_of(calc, tokens_of(calc, corrupted))
    at = next(i for i in range(fmt.prompt_len, len(a)) if a[i] != b[i])
    right, wrong = int(a[at]), int(b[at])
    names = [hook_name(layer, "attn.hook_z") for layer in range(net.cfg.n_layers)]
    z = run_with_cache(net, a[None, :at], names)

    def ld(patch: dict) -> float:
        with ablated(net, patch), torch.no_grad():
            logits = net(b[None, :at])[0][0]
        return float(logits[at - 1, right] - logits[at - 1, wrong])

    with torch.no_grad():
        first = net(a[None, :at])[0][0]
    ld_clean, ld_corrupted = float(first[at - 1, right] - first[at - 1, wrong]), ld({})
    out = {}
    for layer in range(net.cfg.n_layers):
        for head in range(net.cfg.n_heads):
            patched = ld({(layer, head): z[names[layer]][:, :, head]})
            out[f"L{layer}h{head}"] = (patched - ld_corrupted) / (ld_clean - ld_corrupted)
    token = {i: t for t, i in vocab.items()}
    return [p.short for p in positions(fmt)][at], token[right], token[wrong], out


def test_patching_names_the_digit_and_the_two_tokens_with_shares_in_percent(browser, run, calc):
    view = Page(browser, run / "report.html")
    page = view.page
    page.fill("#lab .lab-problem", "15+5")
    page.fill("#lab .lab-corrupted", "10+0")
    place, right, wrong, want = shares(calc, "15+5", "10+0")
    text = page.inner_text("#lab .lab-patching")
    words = {"r0": "units", "r1": "tens", "r2": "hundreds"}
    assert f"The answers first differ at the {words[place]} digit ({place}): the first problem writes {right}, " \
           f"the second {wrong}." in text  # fmt: skip
    assert f"Logit difference: the model's score for {right} minus its score for {wrong} at that digit" in text
    rows = page.query_selector_all("#lab .lab-patch-table tr")
    assert len(rows) == len(want)
    for row in rows:
        head, share = row.query_selector_all("td")[0].inner_text(), row.query_selector_all("td")[1].inner_text()
        assert share.endswith("%") and abs(float(share[:-1]) - 100 * want[head]) <= 0.06, (head, share, want[head])
        bar = row.query_selector(".lab-bar")
        assert abs(float(bar.get_attribute("style").split(":")[1].rstrip("%")) - 100 * min(1, abs(want[head]))) < 0.2
    view.offline_and_clean()


def percent(x: float) -> str:
    return f"{100 * x:.1f}%"


def recorded(run: Path) -> tuple[dict, dict, dict]:
    """results.json; {(head, "zero" | "mean"): exact-match} from ablation.csv; {digit: {head: restored}}."""
    results = json.loads((run / "results.json").read_text())
    with open(run / "ablation.csv") as f:
        ablation = {(f"L{r['layer']}h{r['head']}", r["ablation"]): float(r["exact_match"]) for r in csv.DictReader(f)}
    restored: dict[str, dict[str, float]] = {}
    with open(run / "patching.csv") as f:
        for r in csv.DictReader(f):
            restored.setdefault(r["digit"], {})[f"L{r['layer']}h{r['head']}"] = float(r["restored"])
    return results, ablation, restored


def test_each_guided_experiment_says_what_the_model_does_and_what_the_results_say(browser, run, calc):
    view = Page(browser, run / "report.html")
    page = view.page
    results, ablation, restored = recorded(run)
    intact, n = results["intact_exact_match"], results["analysis_problems"]
    kinds = page.eval_on_selector_all("#lab .lab-experiment", "els => els.map(e => e.dataset.kind)")
    assert kinds == ["off", "carry", "mean", "patch"]  # the course's four, in the page
    experiments = {x["kind"]: x for x in inlined_data((run / "report.html").read_text())["lab"]["experiments"]}
    zero = {h: em for (h, how), em in ablation.items() if how == "zero"}
    worst = min(zero, key=zero.get)
    assert experiments["off"]["head"] == worst
    top = results["most_important_heads"][0]
    assert worst == f"L{top['layer']}h{top['head']}"  # results.json says the same head
    means = head_means(calc.net, calc.fmt, calc.tokenizer.vocab)

    for kind in kinds:
        x = experiments[kind]
        page.click(f'#lab .lab-experiment[data-kind="{kind}"]')
        problem = x["problem"]
        heads = [f"L{layer}h{head}" for layer in range(2) for head in range(2)]
        state = lambda label: page.get_attribute(f'#lab .lab-switch[data-head="{label}"]', "data-state")  # noqa: E731
        # it asks first: the problem set, every head still on, no second problem, nothing said
        assert page.input_value("#lab .lab-problem") == problem
        assert page.input_value("#lab .lab-corrupted") == "" and [state(h) for h in heads] == ["on"] * len(heads)
        assert page.inner_text("#lab .lab-ask") == x["question"] and page.inner_text("#lab .lab-said") == ""
        choice = x["choices"][0]
        page.click(f'#lab .lab-choice >> text="{choice}"')
        assert page.input_value("#lab .lab-corrupted") == x.get("corrupted", "")  # then the experiment is set
        assert [state(h) for h in heads] == [x["heads"].get(h, "on") for h in heads]
        said = page.inner_text("#lab .lab-said")
        truth = parse_expression(problem, calc.fmt).truth
        clean = answer_of(calc, problem)
        shown = lambda a, truth=truth: f"{a.value} ({'right' if a.value == truth else 'wrong'})"  # noqa: E731
        if kind in ("off", "carry"):
            head = x["head"]
            off = answer_of(calc, problem, {head_index(head): 0.0})
            assert said.startswith(f"With {head} off the model answers {problem} with {shown(off)}; with every head "
                                   f"on, {shown(clean)}.")  # fmt: skip
            assert f"zeroing {head} leaves {percent(zero[head])} right against {percent(intact)}" in said
            assert f"On the test set ({n:,} problems, this run's results)" in said
            still = off.value == truth
            relation = f"among the {percent(zero[head])} still right" if still else "one of those it breaks"
            assert relation in said if clean.value == truth else "wrong even with every head on" in said
        if kind == "carry":
            carried = sorted(d for d in restored if d != "r0" and d.startswith("r"))
            others = {h: sum(restored[d][h] for d in carried) for h in zero if h != worst}
            assert x["head"] == max(others, key=others.get)
            assert ", ".join(f"{restored[d][x['head']]:.0%} of {d}" for d in carried) in said
        if kind == "mean":
            head = x["head"]
            assert head == max(zero, key=lambda h: ablation[h, "mean"] - zero[h])
            layer, index = head_index(head)
            at_mean = greedy_at_mean(calc, problem, (layer, index), means)
            off = answer_of(calc, problem, {(layer, index): 0.0})
            mean_said = f"{at_mean} ({'right' if at_mean == truth else 'wrong'})"
            assert said.startswith(f"Zeroed, {head} makes {problem} {shown(off)}; at its mean, {mean_said}")
            assert f"zeroing it leaves {percent(zero[head])} right" in said
            assert f"its mean {percent(ablation[head, 'mean'])}" in said
        if kind == "patch":
            place, right, wrong, want = shares(calc, problem, x["corrupted"])
            best = max(want, key=want.get)
            assert f"the first problem writes {right}, the second {wrong}" in said and f"({place})" in said
            got = re.search(rf"Patching {best} restores (-?[0-9.]+)% of the logit difference", said)
            assert got and abs(float(got.group(1)) - 100 * want[best]) <= 0.06, said
            average = restored[place]
            top_head = max(average, key=average.get)
            assert f"{top_head} restores the most on average, {percent(average[top_head])}" in said
    view.offline_and_clean()


def split_numbers(page) -> list[str]:
    """Every number in the page's text (12, -52.4, 10,000, 99.5%) that the layout breaks across two lines (a path's
    digits, which break anywhere, aside)."""
    return page.evaluate(r"""[...document.querySelectorAll('#report *')].flatMap(e => [...e.childNodes])
        .filter(n => n.nodeType === Node.TEXT_NODE && !n.parentElement.closest('td.long, pre'))
        .flatMap(n => [...n.textContent.matchAll(/[-+−±]?\d[\d,.]*%?/g)]
          .filter(m => { const r = document.createRange(); r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
                         return new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => x.top)).size > 1; })
          .map(m => `${m[0]} in ${(n.parentElement.closest('section') || {}).id}`))""")


def test_the_lab_and_the_reports_maps_share_one_colour_scale(browser, run):
    """viridis, as the run's PNG maps (analysis/plots.py): the lab's key and maps, and the report's own key."""
    from analysis.plots import ATTENTION_COLOURS

    view = Page(browser, run / "report.html")
    ends = view.page.evaluate("[0, 0.5, 1].map(t => TinycalcLab.viridis(t))")
    for t, rgb in zip([0, 0.5, 1], ends, strict=True):
        assert max(abs(c - 255 * m) for c, m in zip(rgb, ATTENTION_COLOURS(float(t))[:3], strict=False)) <= 3, (t, rgb)
    pixel = "(c, x) => [...c.getContext('2d').getImageData(x, 5, 1, 1).data.slice(0, 3)]"
    for key in ("#lab .lab-scale", "#attention .viewer div.muted canvas"):
        canvas = view.page.query_selector(key)
        width = canvas.evaluate("c => c.width")
        assert [canvas.evaluate(pixel, x) for x in (0, width - 1)] == [ends[0], ends[2]], key
    view.offline_and_clean()


def test_the_lab_fits_420_pixels_problem_box_first_nothing_cut_off(browser, run):
    page = browser.new_page(viewport={"width": 420, "height": 900})
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto((run / "report.html").as_uri())
    page.wait_for_selector("body[data-rendered]")
    for kind in ("", "off", "patch"):  # as it opens, and with an experiment's statement and patching shown
        if kind:
            page.click(f'#lab .lab-experiment[data-kind="{kind}"]')
            page.click("#lab .lab-choice >> nth=0")
        width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1], width  # no sideways scroll
        lab = page.evaluate("(s => [s.scrollWidth, s.clientWidth])(document.getElementById('lab'))")
        assert lab[0] <= lab[1], lab  # nor inside the lab's section
        cut = page.evaluate("""[...document.querySelectorAll('#report *')].filter(e =>
            e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'visible'
            && e.tagName !== 'INPUT').map(e => (e.closest('section') || {}).id + ' ' + e.tagName)""")  # fmt: skip
        assert cut == [], cut  # no section of the page, the lab's or another, scrolls sideways
        assert split_numbers(page) == []
    first = page.evaluate("""document.querySelector('#lab .lab-problem').compareDocumentPosition(
        document.querySelector('#lab .lab-open')) & Node.DOCUMENT_POSITION_FOLLOWING""")
    assert first  # the problem box first, the export's drop below it
    assert page.evaluate("document.querySelector('#lab .lab-corrupted').placeholder") == ""  # no placeholder to cut
    assert requests == [(run / "report.html").as_uri()]
