"""The results.json schema, in one place: every key a run writes, its type and what it means.

Keys are an interface (sweep summaries, the report, calc.py, users' scripts read them): add, never rename or
drop; a change of layout bumps SCHEMA. Each registered analysis adds its own entries (analysis/metrics/*.py,
``results``) beside these.
"""

from __future__ import annotations

from typing import Literal, TypedDict

SCHEMA = 2  # 1: results.json before it recorded "schema"

Status = Literal["running", "ok", "failed", "interrupted"]


class Results(TypedDict, total=False):
    schema: int
    status: Status  # "running" from the first write: a run killed with no chance to say so is unfinished
    error: str  # failed: the one line the run ended with
    # interrupted (Ctrl-C, SIGTERM) or running
    # the phase a signal stopped: "training" (status interrupted; resume continues it), "test" (status
    # interrupted: training had finished, no test results), "analysis" or "report" (status ok: training and test
    # finished and recorded; the end-of-run analysis / report.html did not finish). Absent: nothing was stopped
    interrupted_phase: Literal["training", "test", "analysis", "report"]
    step: int
    checkpoint: str | None  # the checkpoint that continues the run (interrupted) or its best one (ok)
    resume: str  # the command that continues it
    resumed_from: str | None
    wandb_run_id: str | None
    # ok: what the run learned (training/results.py: run_record)
    test_exact_match: float
    test_digit_accuracy: float
    test_loss: float
    val_exact_match: float | None
    n_test: int
    n_params: int
    attention_params: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    n_layers: int
    data: dict  # the problem format (data.build.format_dict: ProblemFormat.to_dict, and b_digits where b is short)
    seed: int
    steps: int
    processes: int
    device: str
    precision: str
    compile: str | None
    train_seconds: float
    tokens_per_second: int
    run_dir: str
    # trained with a learner's own block (model.attention=FILE.py:CLASS): spec (as typed), sha256 (of the file),
    # mask (how its forward reads the mask: keep, hide or none) and source (its copy in the run directory, data)
    attention_block: dict
    # the end-of-run analysis (analysis/pipeline.py), when it ran
    analysis_problems: int
    intact_exact_match: float
    learned: bool  # intact_exact_match >= learned_threshold: only then do summaries claim pruning or roles
    learned_threshold: float
    images: dict  # "attention": [PNG paths], <analysis name>: its PNG
    analysis_summary: list  # [label, text] rows of the terminal summary
    tolerance: float  # the exact-match a pruning may lose
    analysis_seconds: float
    analyses_not_run: dict  # an analysis that cannot run on this model -> the one-line reason (a learner's block)
    maps_seconds: float  # drawing attention maps during training
    total_seconds: float  # the whole run in process: training, test, analysis, report
    # wall seconds per phase of train.py (training/phases.py): startup (its imports and the config, from its first
    # line; 0 for a sweep's later runs), build (data, model, trainer, loggers), training (validation included),
    # test, analysis (test mistakes, the end-of-run analysis), report (report.html), total (from startup on)
    phases: dict


def wrong_types(data: dict) -> list[str]:
    """The keys of ``data`` that the schema types otherwise ("test_exact_match: str, not float"); [] when sound."""
    import typing

    kinds = typing.get_type_hints(Results)
    wrong = []
    for key, value in data.items():
        if key not in kinds:
            continue
        allowed = typing.get_args(kinds[key]) or (kinds[key],)
        if kinds[key] is float or float in allowed:
            allowed = (*allowed, int)  # JSON writes 1.0 as 1
        if typing.get_origin(kinds[key]) is Literal:
            ok = value in allowed
        else:
            ok = isinstance(value, tuple(type(None) if a is type(None) else a for a in allowed if isinstance(a, type)))
        if not ok or (isinstance(value, bool) and bool not in allowed):
            wrong.append(f"{key}: {type(value).__name__}, not {getattr(kinds[key], '__name__', kinds[key])}")
    return wrong
