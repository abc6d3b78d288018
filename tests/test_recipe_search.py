"""benchmarks/recipe_search.py checks every recipe before it trains any."""

from __future__ import annotations

import pytest

from benchmarks import recipe_search
from training.cli import compose_train_config


def test_a_bad_recipe_is_refused_in_one_line_before_any_recipe_trains(monkeypatch, capsys):
    trained = []
    monkeypatch.setattr(recipe_search, "steps_to_target", lambda *args: trained.append(args))
    with pytest.raises(SystemExit) as exit_:
        recipe_search.main(["--seeds", "0", "threads=1", "threads=1 optim.decay_step=400"])
    assert exit_.value.code == 2 and trained == []
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("error: optim.decay_step is not a setting"), error


def test_both_optimizer_configs_take_the_same_schedule_keys():
    muon, adamw = (compose_train_config([f"optim={name}"]).optim for name in ("muon", "adamw"))
    schedule = {"lr", "weight_decay", "betas", "warmup_steps", "min_lr_ratio", "decay_steps"}
    assert schedule <= set(muon) and schedule <= set(adamw)
    assert compose_train_config(["optim=adamw", "optim.decay_steps=400"]).optim.decay_steps == 400
