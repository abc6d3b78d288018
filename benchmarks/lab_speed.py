"""How quickly the lab answers in its page: ``python bench.py lab [--ckpt RUN] [--n N]``.

The lab's page (analysis/lab.py: lab_page) is opened in headless Chromium -- the system's, as the browser tests use
it -- and N problems are typed into it one after another. For each, the page's own clock measures from the input
event to the answer drawn: greedy decoding token by token with probabilities, and every head's map for the problem
(``data-ms`` on the lab). Also the size of the model in the page. Without --ckpt a freshly initialised default
model: the time does not depend on the weights.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
from pathlib import Path

import torch

from analysis.lab import lab_page, lab_payload


def browser_path() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


def bench_lab(calc, n: int) -> dict:
    """Milliseconds from a keystroke to the answer and the maps, over ``n`` typed problems; the payload's size."""
    from playwright.sync_api import sync_playwright

    path = browser_path()
    if path is None:
        raise RuntimeError("no Chromium found (apt-get install chromium)")
    payload = lab_payload(calc.net, calc.fmt, calc.tokenizer.vocab)
    html = lab_page(payload)
    a, op_idx, b = calc.fmt.random_problems(n, torch.Generator().manual_seed(0))
    problems = [
        f"{x}{calc.fmt.operators[o]}{y}" for x, o, y in zip(a.tolist(), op_idx.tolist(), b.tolist(), strict=True)
    ]
    with tempfile.TemporaryDirectory() as scratch, sync_playwright() as p:
        page_file = Path(scratch) / "lab.html"
        page_file.write_text(html)
        browser = p.chromium.launch(executable_path=path, args=["--no-sandbox"])
        page = browser.new_page()
        page.goto(page_file.as_uri())
        times = []
        for problem in problems:
            page.fill(".lab-problem", problem)
            times.append(float(page.get_attribute("#lab", "data-ms")))
        browser.close()
    return {
        "problems": n,
        "model": calc.describe(),
        "median_ms": round(statistics.median(times), 1),
        "p90_ms": round(sorted(times)[int(0.9 * (len(times) - 1))], 1),
        "max_ms": round(max(times), 1),
        "page_bytes": len(html.encode()),
        "heads": calc.net.cfg.n_layers * calc.net.cfg.n_heads,
        "answer_tokens": calc.fmt.answer_len,
    }
