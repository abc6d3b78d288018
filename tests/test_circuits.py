"""Circuits: the pairs isolate one digit, patching is exact where it must be, and a known circuit is found exactly."""

from __future__ import annotations

import pytest
import torch

from analysis.engine.graph import ComponentGraph, Edge
from analysis.engine.pair_runs import PairRuns, edge_patching, faithfulness, head_attribution, head_patching, pair_runs
from analysis.engine.pairs import Pairs, contrast_pairs, studied_digits
from analysis.metrics.circuit import find_circuit
from data.positions import positions
from data.problems import ProblemEncoder, ProblemFormat
from data.tokenizer import CharTokenizer
from model.transformer import Transformer, TransformerConfig
from tests.conftest import untrained_calculator

VOCAB = CharTokenizer().vocab


def operands(fmt: ProblemFormat, seq: torch.Tensor) -> tuple[int, int]:
    digits = {v: k for k, v in VOCAB.items()}
    text = "".join(digits[int(t)] for t in seq[1 : fmt.prompt_len - 1])
    return int(text[: fmt.digits]), int(text[fmt.digits + 1 :])


@pytest.mark.parametrize("operators", ["+", "-"])
def test_pairs_change_one_place_and_the_studied_digit_only(operators):
    fmt = ProblemFormat(digits=3, operators=operators)
    where = positions(fmt)
    for at in studied_digits(fmt):
        pairs = contrast_pairs(fmt, at, n=64)
        assert len(pairs) > 0 and (pairs.clean_token != pairs.corrupted_token).all()
        for clean, corrupted, kind in zip(pairs.clean, pairs.corrupted, pairs.kinds, strict=True):
            (a, b), (a2, b2) = operands(fmt, clean), operands(fmt, corrupted)
            changed = {
                p for p in range(fmt.digits) for x, y in ((a, a2), (b, b2)) if x // 10**p % 10 != y // 10**p % 10
            }
            assert len(changed) == 1  # one place's digits, of a, b or both
            place, k = changed.pop(), where[at].place
            written = slice(fmt.prompt_len, at)
            if kind.endswith("cascade"):  # the carry ripples through 9s: equal up to the changed place's digit
                assert place < k - 1
            else:
                assert torch.equal(clean[written], corrupted[written])  # everything before the digit is shared
                assert place == {"base add": k, "base subtract": k, "carry": k - 1, "borrow": k - 1}.get(kind, place)
            if kind == "carry":  # the carry into r_k flips: the digit sums at place k-1 sit on either side of 10
                low = 10 ** (k - 1)
                assert (a % (10 * low) + b % (10 * low) >= 10 * low) != (a2 % (10 * low) + b2 % (10 * low) >= 10 * low)


def test_every_kind_of_addition_pair_is_found():
    fmt = ProblemFormat(digits=3)
    kinds = {kind for at in studied_digits(fmt) for kind in contrast_pairs(fmt, at, n=128).kinds}
    assert kinds == {"base add", "carry", "sum-9 cascade"}


@pytest.fixture(scope="module")
def small():
    module, test = untrained_calculator(n_layers=2)
    fmt = module.fmt
    pairs = contrast_pairs(fmt, studied_digits(fmt)[1], n=32)
    graph = ComponentGraph(module.net)
    return module.net, graph, pairs


def test_the_component_graph_is_the_model(small):
    net, graph, pairs = small
    x, x2 = pairs.clean[:, :-1], pairs.corrupted[:, :-1]
    with torch.no_grad():
        logits, outs = graph.run(x)
        assert torch.allclose(logits, net(x)[0], atol=1e-5)
        _, corrupted_outs = graph.run(x2)
        # every edge patched from the corrupted run is the corrupted run; every edge kept is the clean run
        none = graph.run(x, graph.weights(set()), corrupted_outs)[0]
        every = graph.run(x2, graph.weights(set()), outs)[0]
        assert torch.allclose(none, net(x2)[0], atol=1e-5) and torch.allclose(every, net(x)[0], atol=1e-5)
        # C variants at once are the same runs as one at a time
        weights = torch.ones(3, len(graph))
        weights[1, 5], weights[2, -1] = 0.0, 0.5
        batched = graph.run(x, weights, corrupted_outs)[0]
        for i in range(3):
            assert torch.allclose(batched[i], graph.run(x, weights[i], corrupted_outs)[0], atol=1e-5)


def test_patching_a_head_with_its_own_output_changes_nothing(small):
    net, graph, pairs = small
    runs = pair_runs(graph, pairs)
    itself = PairRuns(
        pairs,
        runs.clean_lds,
        runs.corrupted_lds,
        runs.corrupted_z,
        runs.corrupted_z,
        runs.corrupted_outs,
        runs.corrupted_outs,
    )
    assert head_patching(net, itself).abs().max() < 1e-4  # restored nothing: LD stayed the corrupted run's
    assert faithfulness(graph, runs, [set(graph.edges)]) == pytest.approx([1.0], abs=1e-4)  # every edge: clean
    assert faithfulness(graph, runs, [set()]) == pytest.approx([0.0], abs=1e-4)


def copying_model() -> tuple[Transformer, Pairs]:
    """A 1-layer, 2-head model built by hand: head 0 attends from '=' to a's digit and copies it to the logits;
    head 1 and the MLP write nothing. Pairs change a: the circuit is embed -> L0h0 (value) -> logits, exactly."""
    fmt = ProblemFormat(digits=1)
    T, V = fmt.seq_len, len(VOCAB)
    cfg = TransformerConfig(vocab_size=V, block_size=T, d_model=32, n_heads=2, n_layers=1, mlp_ratio=1)
    net = Transformer(cfg).eval()
    with torch.no_grad():
        for p in net.parameters():
            p.zero_()
        for ln in (net.blocks[0].ln_attn, net.blocks[0].ln_mlp, net.ln_f):
            ln.weight.fill_(1.0)
        net.tok_emb.weight[:, :V] = torch.eye(V)  # dims 0..V-1: the token (the tied unembedding reads them back)
        net.pos_emb.weight[:, V : V + T] = torch.eye(T)  # dims V..V+T-1: the position
        attn, query, key = net.blocks[0].attn, fmt.prompt_len - 1, 1  # '=' attends to a's digit
        attn.W_q.weight[0, V + query] = attn.W_k.weight[0, V + key] = 10.0
        for d in range(10):  # head 0 carries each digit token through its value and back
            attn.W_v.weight[d, VOCAB[str(d)]] = 1.0
            attn.W_o.weight[VOCAB[str(d)], d] = 1.0
        attn.W_v.weight[16:, :V] = torch.eye(16, V)  # head 1 reads too, but its W_o columns stay 0
    a = torch.arange(10)
    a2 = (a + 3) % 10
    b = torch.full((10,), 4)
    op = torch.zeros(10, dtype=torch.long)
    encoder = ProblemEncoder(fmt, VOCAB)
    clean, corrupted = encoder.encode(a, op, b), encoder.encode(a2, op, b)
    digit = torch.tensor([VOCAB[str(d)] for d in range(10)])
    return net, Pairs("a0", fmt.prompt_len - 1, clean, corrupted, digit[a], digit[a2], ["copy"] * 10)


@pytest.mark.parametrize(
    "scheme", [{"place_bias": 2}, {"place_bias": 2, "place_window": True}, {"log_scale": 4}], ids=str
)
def test_the_component_graph_is_the_model_with_every_position_scheme(scheme):
    """Patching and circuits run the model as a graph: with place scores, the window or log-scaled attention the
    graph adds what the model adds (it once left them out, and studied another function than the model's)."""
    from model.build import network_for

    torch.manual_seed(0)
    fmt = ProblemFormat(digits=3)
    model = {"vocab_size": len(VOCAB), "block_size": fmt.seq_len, "place_embedding": True, **scheme}
    net = network_for(model, fmt).eval()
    if scheme.get("place_bias"):
        torch.nn.init.normal_(net.places.place_scores.weight)  # trained scores, not the zeros a new model starts with
    x = contrast_pairs(fmt, studied_digits(fmt)[1], n=16).clean[:, :-1]
    with torch.no_grad():
        assert torch.allclose(ComponentGraph(net).run(x)[0], net(x)[0], atol=1e-5)


@pytest.mark.parametrize(
    "scheme", [{}, {"n_kv_heads": 2}, {"place_bias": 2, "place_window": True}, {"log_scale": 4}], ids=str
)
def test_the_patching_shortcuts_change_no_number(scheme):
    """Patching runs each variant with three shortcuts (analysis/engine/graph.py): the layers before the first one a
    changed edge reaches come from the clean run (``own``), the last layer computes the last position alone
    (``last_only``), and a search's variants that agree on the edges into the first layers take those layers from
    a memo; and without gradients the receivers that weigh every sender alike share one read. Their logits and
    their edge gradients are the whole graph's, for an edge into every layer."""
    from model.build import network_for

    torch.manual_seed(0)
    fmt = ProblemFormat(digits=3)
    model = {"vocab_size": len(VOCAB), "block_size": fmt.seq_len, "n_layers": 3, "place_embedding": True, **scheme}
    net = network_for(model, fmt).eval()
    with torch.no_grad():  # as if trained: biases and place scores are zero in a new model
        for p in net.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    pairs = contrast_pairs(fmt, studied_digits(fmt)[2], n=16)
    graph = ComponentGraph(net)
    x, x2 = pairs.inputs, pairs.corrupted_inputs
    with torch.no_grad():
        own, reference = graph.run(x)[1], graph.run(x2)[1]
        firsts = list({e.receiver: i for i, e in reversed(list(enumerate(graph.edges)))}.values())  # one per receiver
        weights = torch.ones(len(firsts) + 1, len(graph))
        weights[torch.arange(len(firsts)), firsts] = 0.0  # variant i patches an edge into receiver i ...
        weights[-1] = (torch.rand(len(graph)) < 0.3).float()  # ... and the last keeps a random set
        whole = graph.run(x, weights, reference)[0][:, :, -1:]
        # one variant a pass, so each starts at its own edge's layer
        fast = torch.cat([graph.run(x, w, reference, own, last_only=True)[0] for w in weights.split(1)])
    assert fast.shape == whole.shape and torch.allclose(fast, whole, atol=1e-5)
    with torch.enable_grad():  # with gradients every receiver reads on its own: no reads shared
        each_its_own = graph.run(x, weights, reference)[0][:, :, -1:].detach()
    assert torch.allclose(whole, each_its_own, atol=1e-5)

    # variants of the random set that differ only in edges into the logits: after the first, every one finds the
    # layers below the last in the memo, and gets the same bits as computing them
    into_logits = [i for i, e in enumerate(graph.edges) if e.receiver == "logits"][:3]
    variants = weights[-1].repeat(len(into_logits), 1)
    variants[range(len(into_logits)), into_logits] = 1 - variants[range(len(into_logits)), into_logits]
    memo: dict = {}
    with torch.no_grad():
        plain = torch.cat([graph.run(x, w, reference, own, last_only=True)[0] for w in variants.split(1)])
        remembered = torch.cat([graph.run(x, w, reference, own, True, memo)[0] for w in variants.split(1)])
        assert torch.equal(remembered, plain) and memo
        for key in memo:  # a memo that lies is believed: the variants read it
            memo[key] = torch.zeros_like(memo[key])
        misled = graph.run(x, variants[1:2], reference, own, True, memo)[0]
    assert not torch.allclose(misled, plain[1:2], atol=1e-3)

    def edge_gradient(**shortcuts) -> torch.Tensor:
        w = torch.full((2, len(graph)), 0.5).requires_grad_()
        logits = graph.run(x, w, reference, **shortcuts)[0]
        metric = sum(pairs.digit_logit_diff(variant[:, -1]).sum() for variant in logits)
        return torch.autograd.grad(metric, [w])[0]

    assert torch.allclose(edge_gradient(own=own, last_only=True), edge_gradient(), atol=1e-5)


def test_a_known_circuit_is_found_exactly():
    net, pairs = copying_model()
    graph = ComponentGraph(net)
    runs = pair_runs(graph, pairs)
    assert runs.gap > 1.0
    restored = head_patching(net, runs)
    assert restored[0, 0] == pytest.approx(1.0, abs=1e-3) and restored[0, 1] == pytest.approx(0.0, abs=1e-3)
    assert head_attribution(net, runs)[0, 1] == pytest.approx(0.0, abs=1e-3)
    lost = edge_patching(graph, runs)
    circuit = find_circuit(graph, runs, lost)
    assert set(circuit.edges) == {Edge("embed", "L0h0", "v"), Edge("L0h0", "logits", "in")}
    assert circuit.faithfulness == pytest.approx(1.0, abs=1e-3)
    assert circuit.random_mean < 0.5


def test_a_heads_jobs_read_one_phrase_per_kind():
    from analysis.metrics.circuit_roles import jobs_in_words

    found = [(0.5, "base add", True, "r0"), (0.6, "base add", True, "r1"), (0.7, "carry", True, "r2")]
    assert jobs_in_words(found + [(0.2, "carry", False, "r3")]) == [
        "makes the carry into r2",
        "base add r0 r1",
        "uses the carry into r3",
    ]


def test_a_kind_of_pairs_the_model_does_not_tell_apart_is_measured_by_no_patching(small):
    """A partly learned model (experiment=sub_length after 200 steps, 19.7%) tells a digit apart overall but not
    one kind of its pairs: that kind's gap was 0 and the circuit roles divided by it (ZeroDivisionError). A kind
    not told apart names no role; the kinds told apart still do."""
    from types import SimpleNamespace

    from analysis.metrics.ablation import Ablation
    from analysis.metrics.circuit import Circuit, Circuits, DigitCircuit
    from analysis.metrics.circuit_roles import MIN_PAIRS, CircuitRoles
    from analysis.metrics.roles import Roles

    net, graph, pairs = small
    runs = pair_runs(graph, pairs)
    kinds = sorted(set(pairs.kinds))
    assert len(kinds) >= 2 and all(pairs.kinds.count(k) >= MIN_PAIRS for k in kinds[:2]), pairs.kinds
    learned, unlearned = kinds[0], kinds[1]
    # the learned kind: the right digit ahead on both runs; the other: the model says the same on both (gap 0)
    clean = torch.tensor([2.0 if k == learned else 0.0 for k in pairs.kinds])
    corrupted = torch.tensor([-2.0 if k == learned else 0.0 for k in pairs.kinds])
    runs = PairRuns(pairs, clean, corrupted, runs.clean_z, runs.corrupted_z, runs.corrupted_outs, runs.clean_outs)
    assert runs.told_apart and runs.subset(learned).told_apart and not runs.subset(unlearned).told_apart
    assert runs.subset(unlearned).gap == 0.0

    heads = {f"L{layer}h{head}" for layer in range(graph.n_layers) for head in range(graph.n_heads)}
    circuit = Circuit([Edge(h, "logits", "in") for h in sorted(heads)], 1.0, 0.0, 0.0, len(graph), 0)
    results = {Circuits: [DigitCircuit(runs, torch.zeros(0), torch.zeros(0), circuit)], Ablation: [], Roles: []}
    ctx = SimpleNamespace(
        result=results.get, module=SimpleNamespace(net=net), n_layers=graph.n_layers, n_heads=graph.n_heads,
        tolerance=0.01,
    )  # fmt: skip
    rows = CircuitRoles().compute(ctx)  # raised ZeroDivisionError
    assert len(rows) == graph.n_layers * graph.n_heads
    assert not any(unlearned in row.role for row in rows)


UNLEARNED = [  # (operators, digits, data settings, steps): models from untrained to barely trained, every task
    pytest.param("+-*", 2, {}, 0, id="untrained +-*", marks=pytest.mark.slow),
    pytest.param("-", 3, {"larger_first": True}, 30, id="30 steps of 3-digit - larger first"),
    pytest.param("+", 2, {}, 0, id="untrained +", marks=pytest.mark.slow),
    pytest.param("-", 2, {}, 30, id="30 steps of -", marks=pytest.mark.slow),
    pytest.param("*", 2, {}, 30, id="30 steps of *", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("operators,digits,settings,steps", UNLEARNED)
def test_every_analysis_is_defined_on_a_model_that_has_not_learned(operators, digits, settings, steps, tmp_path):
    """The whole end-of-run analysis, circuits and their roles included, on a model that has learned little or
    nothing: no division by a zero gap, no empty mean; the summary says "not learned"."""
    import warnings

    import lightning as L

    from analysis.pipeline import HeadAnalysis
    from data.build import data_module, data_settings
    from storage.rundir import RunDir
    from training.load import calculator_module
    from training.optim import OptimConfig

    torch.manual_seed(0)
    dm = data_module(
        data_settings(
            digits=digits, operators=operators, batch_size=128, val_fraction=0.05, test_fraction=0.05, n_val=10,
            n_test=200, **settings,
        )
    )  # fmt: skip
    model = TransformerConfig(vocab_size=dm.vocab_size, block_size=dm.fmt.seq_len, d_model=32, n_heads=2)
    optim = OptimConfig(lr=1e-2, warmup_steps=5).to_dict()
    module = calculator_module(model.to_dict(), dm.fmt.to_dict(), optim)
    if steps:
        trainer = L.Trainer(
            max_steps=steps, logger=False, enable_checkpointing=False, enable_progress_bar=False,
            enable_model_summary=False, limit_val_batches=0, accelerator="cpu",
        )  # fmt: skip
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*val_dataloader")
            trainer.fit(module, train_dataloaders=dm.train_dataloader())
    found = HeadAnalysis(n_problems=200, circuits=True, length_problems=50).run(
        module.eval(), dm.held_out_set("test"), RunDir(tmp_path)
    )
    summary = dict(found["analysis_summary"])
    assert summary["heads"].startswith("not learned"), summary
