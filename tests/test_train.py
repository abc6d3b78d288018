"""train.py end to end, as a user runs it."""

from __future__ import annotations

import csv
import json
import time

import pytest
from omegaconf import OmegaConf

from tests.conftest import run_train
from training import TARGET_ACCURACY
from training.load import load_module

SMALL = [
    "data.digits=2",
    "data.val_fraction=0.05",
    "data.test_fraction=0.05",
    "data.n_val=500",
    "data.n_test=500",
    "trainer.val_check_interval=50",
    "analysis.probes=[99+1,45+67]",
]


def test_a_short_run_really_learns_two_digit_addition_and_looks_inside(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")  # a 100-column terminal
    started = time.perf_counter()
    done = run_train(
        tmp_path,
        *SMALL,
        "trainer.max_steps=300",  # it is right on >99% of the validation problems from step ~150
        "target_accuracy=null",  # all 300 steps
        "callbacks.attention_maps.every_n_val=2",
    )
    elapsed = time.perf_counter() - started
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((tmp_path / "results.json").read_text())
    # 2-digit sums have 3 answer digits: guessing gets ~0.1% right
    assert results["test_exact_match"] >= 0.9, results
    assert results["n_test"] >= 400 and results["steps"] == 300
    assert (tmp_path / "tokenizer.json").exists() and (tmp_path / "config.yaml").exists()
    module = load_module(tmp_path / "checkpoints" / "best.ckpt")[0]
    assert results["n_params"] == sum(p.numel() for p in module.net.parameters())  # the saved model's own count
    history = json.loads((tmp_path / "history.json").read_text())["val"]
    assert history[-1]["step"] == results["steps"]  # the whole curve, not the best checkpoint's part of it
    assert results["val_exact_match"] == pytest.approx(max(h["exact_match"] for h in history))  # the best one's
    # the training time is within the command's, and the speed is the tokens trained (a batch a step) over it
    assert 0 < results["train_seconds"] < elapsed
    batch = OmegaConf.load(tmp_path / "config.yaml").data.batch_size
    tokens = results["steps"] * batch * (module.fmt.seq_len - 1)
    assert results["tokens_per_second"] == pytest.approx(tokens / results["train_seconds"], rel=0.01)
    assert f"run directory: {tmp_path}" in done.stdout
    # the summary a learner reads (analysis/summary.py): at most 30 lines of at most 100 characters, in the
    # course's words, each head on its own line
    summary = done.stdout[done.stdout.index("tinycalc run") :].splitlines()
    assert len(summary) <= 30 and max(len(line) for line in summary if "tmp" not in line) <= 100, summary
    assert not any(word in "\n".join(summary).lower() for word in ("logit", "attribution", "patching")), summary
    assert [line[:4] for line in summary if line[:1] == "L"] == [f"L{i}h{j}" for i in range(2) for j in range(4)]
    # every key is the schema's (storage/results.py), with its type, or one a registered analysis says it wrote
    from storage.results import SCHEMA, Results, wrong_types

    assert results["schema"] == SCHEMA and wrong_types(results) == []
    facts = json.loads((tmp_path / "analysis.json").read_text())
    analysis_keys = {key for a in facts["analyses"] for key in a["results_keys"]}
    assert set(results) - set(Results.__annotations__) == analysis_keys
    assert {"head_roles", "most_important_heads", "prunable_fraction", "direct_logit_attribution"} <= analysis_keys

    # attention maps: every layer, during training (every 2nd validation) and at the end, plus raw weights
    for tag in ("step000100", "step000200", "final"):
        assert [p.name for p in sorted((tmp_path / "attention").glob(f"{tag}_layer*.png"))] == [
            f"{tag}_layer0.png",
            f"{tag}_layer1.png",
        ]
        raw = json.loads((tmp_path / "attention" / f"{tag}.json").read_text())
        assert len(raw["weights"]) == 2 and len(raw["weights"][0]) == 2  # layers x probes
    # ablation: layers x heads x (zero, mean) rows; pruning curve; headline numbers
    with (tmp_path / "ablation.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * 4 * 2 and {r["ablation"] for r in rows} == {"zero", "mean"}
    assert all(r["role"] for r in rows)
    assert (tmp_path / "ablation.png").exists() and (tmp_path / "pruning.png").exists()
    # the headline numbers are what the written tables say: the three zero-ablations that cost the most, and the
    # largest fraction of the pruning curve before it first loses more than the tolerance (0.01)
    zeroed = sorted(
        (r for r in rows if r["ablation"] == "zero"),
        key=lambda r: (float(r["delta_exact_match"]), -float(r["delta_loss"])),
    )
    assert [(h["layer"], h["head"]) for h in results["most_important_heads"]] == [
        (int(r["layer"]), int(r["head"])) for r in zeroed[:3]
    ]
    with (tmp_path / "pruning.csv").open() as f:
        curve = [(float(r["fraction_removed"]), float(r["exact_match"])) for r in csv.DictReader(f)]
    assert [c[0] for c in curve] == [n / 8 for n in range(len(curve))]  # one more of the 8 heads removed each step
    kept = 0.0
    for fraction, exact_match in curve:
        if exact_match < curve[0][1] - 0.01:
            break
        kept = fraction
    assert results["prunable_fraction"] == kept
    assert f"{kept * 8:.0f} of 8 heads can be removed together" in done.stdout  # the end-of-run summary says so
    # the offline wandb run holds the images and tables
    (run,) = (tmp_path / "wandb").glob("offline-run-*")
    media = {p.relative_to(run / "files" / "media").parts[:2] for p in (run / "files" / "media").rglob("*.*")}
    assert {
        ("images", "attention"),
        ("images", "ablation"),
        ("images", "pruning"),
        ("table", "ablation"),
        ("table", "pruning"),
    } <= media
    (page,) = (run / "files" / "media" / "html").glob("report_*.html")  # the run's page, its lab included
    assert "TinycalcLab" in page.read_text() and '"lab":{"config"' in page.read_text()
    # what wandb recorded (its own file, as `wandb sync` uploads it) is what the run directory says: config.yaml
    # once (not the module's hyperparameters over it), results.json's headline numbers, the run's files as one artifact
    from tests import wandb_record

    assert wandb_record.config(run) == OmegaConf.to_container(OmegaConf.load(tmp_path / "config.yaml"))
    (begun,) = wandb_record.of_kind(run, "run")
    assert begun.job_type == "train" and begun.project == "tinycalc"
    summary = wandb_record.summary(run)
    for key in ("test_exact_match", "n_params", "steps", "train_seconds", "total_seconds", "tokens_per_second"):
        assert summary[key] == results[key], key
    (artifact,) = [a for a in wandb_record.of_kind(run, "artifact") if a.type == "run"]  # the tables are artifacts too
    assert artifact.name == f"run-{begun.run_id}"
    kept = {entry.path for entry in artifact.manifest.contents}
    assert {"checkpoints/best.ckpt", "results.json", "config.yaml", "report.html", "tokenizer.json"} <= kept
    assert not any(path.startswith("wandb/") or path.startswith("run.lock") for path in kept)


@pytest.mark.slow
def test_the_default_run_reaches_the_published_accuracy(tmp_path):
    done = run_train(tmp_path, "logger=none", "analysis.circuits=true")
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["test_exact_match"] >= TARGET_ACCURACY and results["n_test"] == 10_000
    # docs/circuits.md: every answer digit's circuit recovers >= 90% with at most half of the edges and half of the
    # head -> head edges, random sets as large clearly less; attribution follows exact patching
    circuits = results["circuits"]
    assert set(circuits) == {"r0", "r1", "r2", "r3"}
    for c in circuits.values():
        assert c["faithfulness"] >= 0.9 and c["fraction"] <= 0.5 and c["head_to_head"] <= c["head_to_head_total"] / 2
        assert c["random_mean"] + 2 * c["random_std"] < 0.5
    assert results["attribution_correlation_heads"] >= 0.9 and results["attribution_correlation_edges"] >= 0.9
    assert (tmp_path / "circuit.png").is_file() and "circuits" in (tmp_path / "report.html").read_text()


def test_the_best_checkpoint_goes_to_the_later_weights_on_a_tie(tmp_path):
    from types import SimpleNamespace

    import torch

    from training.callbacks import BestCheckpoint

    keeper = BestCheckpoint(tmp_path)
    trainer = SimpleNamespace(strategy=SimpleNamespace(reduce_boolean_decision=lambda decision: decision))
    assert keeper.check_monitor_top_k(trainer, torch.tensor(0.5))  # the first one is kept
    keeper.best_k_models, keeper.kth_best_model_path = {"best.ckpt": torch.tensor(1.0)}, "best.ckpt"
    assert keeper.check_monitor_top_k(trainer, torch.tensor(1.0))  # every problem right again: the later weights
    assert not keeper.check_monitor_top_k(trainer, torch.tensor(0.9996))
    assert not keeper.check_monitor_top_k(trainer, None)


def test_the_process_wide_quiet_of_wandb_is_still_needed():
    """training/loggers.py quiets wandb for the whole process (wandb.setup), not through the run's own settings,
    because Lightning always passes ``anonymous=None`` and wandb warns of any value given before a run's settings
    apply. Fails once either changes: then the run's own settings will do again."""
    import subprocess
    import sys

    from lightning.pytorch.loggers import WandbLogger

    assert WandbLogger(project="p", offline=True)._wandb_init.get("anonymous", "absent") is None
    warned = subprocess.run(
        [sys.executable, "-c", "import wandb; wandb.Settings(anonymous=None)"], capture_output=True, text=True
    )
    assert "anonymous" in warned.stderr, warned.stderr
