"""Each head's one sentence (analysis/metrics/head_story.py) follows its numbers: a head whose removal costs nothing is
never called needed, one that looks at no operand yet matters is explained, and so on. (That the sentence is the
same in results.json, the terminal and the page: tests/test_html_report.py, on a real run.)"""

from __future__ import annotations

import pytest

from analysis.metrics.head_story import HeadFacts, head_story

OPERANDS = "answer digit 10^k reads a and b digit 10^k (the same place)"


def facts(**changes) -> HeadFacts:
    """A needed layer-1 head of a 2-layer model that attends to its own token (the default run's L1h0)."""
    base = dict(
        layer=1,
        head=0,
        n_layers=2,
        pattern="current token",
        zero=-0.233,
        mean=-0.25,
        direct=0.2,
        logit=8.0,
        restores=(("r2", 0.26), ("r1", 0.22)),
        circuit=None,
        tolerance=0.01,
        exact_match=1.0,
    )
    return HeadFacts(**(base | changes))


NEEDED = ("costs 23.3", "its job", "written there", "writes the answer")
NOT_NEEDED = ("at most 1 point",)

# (case, the facts, phrases the sentence must hold, phrases it must not)
CASES = [
    (
        "looks at its own token, yet matters: what it reads was written by the layer below",
        facts(),
        [
            "L1h0 attends mostly to its own token, yet zeroing it costs 23.3 points (mean-ablating it, 25.0)",
            "+0.20 of the right token's 8.0 logits directly",
            "patching it restores 26% of r2 and 22% of r1",
            "written there by the layers below",
            "through the MLP after it, not directly",
        ],
        ["pruned", "stand in", "its pattern is its job", *NOT_NEEDED],
    ),
    (
        "looks at its own token and costs nothing: prunable, never called needed",
        facts(head=1, zero=-0.001, mean=0.0, direct=-0.04, restores=()),
        ["L1h1 attends mostly to its own token, and removing it costs at most 1 point", "it can be pruned"],
        [", yet", "written there", "writes the answer", "costs 0", *NEEDED],
    ),
    (
        "a cost exactly at the tolerance is no cost",
        facts(zero=-0.01, mean=-0.01, restores=()),
        ["removing it costs at most 1 point", "it can be pruned"],
        NEEDED,
    ),
    (
        "reads the operands and matters: its pattern is its job",
        facts(layer=0, pattern=OPERANDS, zero=-1.0, mean=-0.994, restores=(("r0", 0.76),)),
        [f"L0h0's mean pattern is '{OPERANDS}', and zeroing it costs 100.0 points", "its pattern is its job"],
        [", yet", "written there", *NOT_NEEDED],
    ),
    (
        "reads the operands, in a circuit, yet costs nothing: others stand in",
        facts(layer=0, pattern=OPERANDS, zero=-0.002, mean=0.0, restores=(), circuit="base add r0"),
        ["', yet removing it costs at most 1 point", "the circuits name it 'base add r0'", "other heads stand in"],
        ["pruned", *NEEDED],
    ),
    (
        "only zeroing costs: its average output is what is needed, not what it reads",
        facts(layer=0, pattern=OPERANDS, zero=-0.062, mean=-0.001, restores=()),
        ["zeroing it costs 6.2 points (mean-ablating it, 0.1)", "only its average output matters", "costs 0.1 points"],
        ["its pattern is its job", "outside the pairs", "pruned"],
    ),
    (
        "only mean-ablating costs",
        facts(zero=0.0, mean=-0.05),
        ["mean-ablating it costs 5.0 points (zeroing it, 0.0)"],
        ["only its average", *NOT_NEEDED],
    ),
    (
        "a large direct effect: it writes the answer itself",
        facts(direct=2.0),
        ["+2.00 of the right token's 8.0 logits directly", "it writes the answer itself"],
        ["not directly"],
    ),
    (
        "needed but no studied digit runs through it",
        facts(restores=()),
        ["restores under 10% of any digit", "outside the pairs patching tried"],
        ["pruned"],
    ),
    (
        "the circuits say it uses the carry: the carry is what it passes on from its own token",
        facts(circuit="uses the carry into r1 r2"),
        ["the circuits name it 'uses the carry into r1 r2'", "so it can pass on the carry computed earlier"],
        ["patching it restores", *NOT_NEEDED],
    ),
    (
        "a head that writes against the answer directly",
        facts(direct=-1.0),
        ["-1.00 of the right token's 8.0 logits directly", "pushes against the right token directly"],
        ["writes the answer itself", "not directly"],
    ),
    (
        "patching studied no digit: nothing claimed of it",
        facts(restores=None),
        ["patching studied no digit"],
        ["outside the pairs", "restores"],
    ),
    (
        "the circuits were found and it is in none",
        facts(head=1, zero=0.0, mean=0.0, direct=0.01, restores=(("r0", 0.5),), circuit=""),
        ["it is in no digit's circuit", "it can be pruned"],
        ["restores 50%", *NEEDED],
    ),
    (
        "layer 0, looking at [BOS], needed: it matters for what it writes",
        facts(layer=0, pattern="attends to [BOS]", zero=-0.3, mean=-0.3),
        ["L0h0 attends mostly to [BOS], yet zeroing it costs 30.0 points", "in layer 0 nothing is computed yet"],
        ["written there by the layers below", *NOT_NEEDED],
    ),
    (
        "a fixed operand digit is an operand: no surprise when it matters",
        facts(layer=0, pattern="attends to a·10^0", zero=-0.3, mean=-0.3),
        ["L0h0's mean pattern is 'attends to a·10^0', and zeroing it costs 30.0 points", "its pattern is its job"],
        [", yet"],
    ),
    (
        "a head of a middle layer writes through the layers after it",
        facts(n_layers=3),
        ["through the MLPs and layers after it, not directly"],
        ["the MLP after it,"],
    ),
    (
        "nothing measured: nothing claimed",
        facts(zero=None, mean=None, direct=None, logit=None),
        ["its ablation was not measured", "its direct effect was not measured"],
        ["pruned", "yet", *NEEDED],
    ),
    (
        "a model that has not learned: no role claimed",
        facts(exact_match=0.3),
        ["L1h0: the model has not learned its task (30.0% exact-match)"],
        ["costs", "pruned", "restores"],
    ),
]


@pytest.mark.parametrize(("case", "head", "holds", "lacks"), CASES, ids=[c[0] for c in CASES])
def test_the_sentence_follows_the_numbers(case, head, holds, lacks):
    story = head_story(head)
    assert all(phrase in story for phrase in holds), story
    assert not any(phrase in story for phrase in lacks), story
    assert "\n" not in story and not story.endswith(".")  # one sentence, a line of its own in every place
