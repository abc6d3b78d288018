"""compile=: a callback beside the lesson's module (training/compiling.py) compiles its training loss, or refuses a
mode torch.compile does not have in one line; the module itself trains eagerly."""

from __future__ import annotations

import pytest

from tests.conftest import compose_config, with_run_dir
from training.assemble import build_objects
from training.compiling import CompiledStep
from training.config import ConfigError


def built(tmp_path, *overrides: str) -> tuple:
    return build_objects(with_run_dir(compose_config(["analysis=none", "logger=none", *overrides]), tmp_path))


def test_a_mode_torch_compile_lacks_is_one_line_naming_the_key(tmp_path):
    with pytest.raises(ValueError) as refused:
        CompiledStep("bogus")
    assert str(refused.value).startswith("compile='bogus': use null (eager)") and "\n" not in str(refused.value)
    with pytest.raises(ConfigError, match="compile='bogus'"):
        built(tmp_path, "compile=bogus")


def test_the_run_compiles_the_training_loss_only_when_asked(tmp_path):
    _, eager, _, callbacks = built(tmp_path)
    assert not [c for c in callbacks if isinstance(c, CompiledStep)]
    assert eager.training_loss == eager.teacher_forced_loss  # the lesson's module: eager
    _, module, _, callbacks = built(tmp_path, "compile=default")
    (compiled,) = [c for c in callbacks if isinstance(c, CompiledStep)]
    compiled.setup(None, module, "validate")
    assert module.training_loss == module.teacher_forced_loss  # evaluation stays eager
    compiled.setup(None, module, "fit")
    assert module.training_loss != module.teacher_forced_loss  # torch.compile's wrapper of it
