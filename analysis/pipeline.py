"""The end-of-run look inside, as one pipeline: one cached forward pass -> every registered analysis -> one recorder.

cache = run_with_cache(net, probes + problems)       one pass; every analysis reads it
for analysis in analyses():                          analysis/registry.py
    rows = ctx.result(type(analysis))                pure; what it needs is computed first, once
    recorder.record(analysis, rows, analysis.figure(rows, ctx))
analysis.json                                        what the page needs to render them (written, not rebuilt)
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from analysis.engine.cache import run_with_cache
from analysis.engine.evaluator import Evaluator
from analysis.maps import attention_maps, checked_probes, probe_sequences
from analysis.metric import LEARNED, CannotRun, Context, HeadMetric, learned, not_learned_text, points
from analysis.progress import track
from analysis.record import Recorder
from data.checks import check_whole
from data.positions import positions
from data.problems import MASTERED
from model.hooks import head_label
from storage.rundir import RunDir

ANALYSIS_SCHEMA = 1  # analysis.json's layout


# problems per width and operator the length analysis decodes at once: 10,000 measure an exact-match to within
# 0.5 points (one standard error); far more never ended (length_problems=1e23)
MAX_LENGTH_PROBLEMS = 10_000


@dataclass
class HeadAnalysis:
    """What the end-of-run look inside the heads does (configs/analysis/default.yaml builds one).

    Args:
        probes: problems whose attention is drawn, e.g. ["999+1", "456+789"]; None = chosen for the task.
        n_problems: test problems the analyses are measured on (None = the whole test set).
        ablation: "zero" (head output x 0 before W_o) and/or "mean" (replaced by its test-set average).
        prune: "ranked", "greedy" (see ``analysis.metrics.pruning.prune_heads``) or None for no pruning curve.
        tolerance: prunable_fraction counts heads removable losing at most this much exact-match.
        length_problems: problems per length (and operator) in the length analysis of a model that can address
            longer problems than it trained on (``model.place_offset``); 0 skips it.
        circuits: also find each digit's circuit by path patching (analysis/metrics/circuit.py; seconds to a minute
            on a CPU). ``python analyse.py RUN`` adds them to a finished run.
        enabled: False skips it all (``analysis=none`` does the same).
    """

    probes: list[str] | None = None
    n_problems: int | None = 1000
    ablation: tuple[str, ...] = ("zero", "mean")
    prune: str | None = "ranked"
    tolerance: float = 0.01
    length_problems: int = 500
    circuits: bool = False
    enabled: bool = True

    def __post_init__(self) -> None:
        if self.probes is not None:
            if isinstance(self.probes, str) or not self.probes:
                raise ValueError(
                    f"probes={self.probes!r}: give a list of problems such as [456+789] (null for the task's own)"
                )
            self.probes = [str(p) for p in self.probes]
        if self.n_problems is not None:
            check_whole("n_problems", self.n_problems, hint=", or null for all")
        kinds = self.ablation
        if isinstance(kinds, str) or not all(k in ("zero", "mean") for k in kinds) or len(set(kinds)) < len(kinds):
            raise ValueError(f"ablation={kinds!r}: must be a list of zero and/or mean, each once")
        self.ablation = tuple(kinds)
        if self.prune not in ("ranked", "greedy", None):
            raise ValueError(f"prune={self.prune!r}: must be ranked, greedy or null")
        if (
            isinstance(self.tolerance, bool)
            or not isinstance(self.tolerance, (int, float))
            or not 0 <= self.tolerance < 1
        ):
            raise ValueError(f"tolerance={self.tolerance!r}: must be a number in [0, 1)")
        check_whole("length_problems", self.length_problems, least=0, hint=" (0 skips it)", most=MAX_LENGTH_PROBLEMS)
        for name in ("circuits", "enabled"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}={getattr(self, name)!r}: must be true or false")

    def probes_for(self, module) -> list[str]:
        """The probe problems, checked against the model's format (ValueError naming the bad one)."""
        return checked_probes(module, self.probes)

    @torch.no_grad()
    def run(self, module, test_set: torch.Tensor, run_dir: RunDir, loggers=()) -> dict:
        """Every registered analysis on the first n_problems of ``test_set``, recorded in ``run_dir``; returns
        the entries for results.json (the terminal summary's rows under "analysis_summary")."""
        from analysis.plots import map_figures
        from analysis.registry import analyses

        started = time.perf_counter()
        module.net.eval()
        probes = self.probes_for(module)
        probe_seqs = probe_sequences(module, probes).to(module.device)
        problems = test_set[: self.n_problems].to(module.device)
        both = run_with_cache(module.net, torch.cat([probe_seqs, problems])[:, :-1])  # the one forward pass
        probe_cache, cache = both[: len(probes)], both[len(probes) :]

        recorder = Recorder(run_dir, loggers)
        maps = attention_maps(module.fmt, probes, probe_seqs, probe_cache)
        images = {"attention": [str(p) for p in recorder.attention_maps(maps, map_figures(maps, "final"), "final")]}
        ctx = Context(
            module, problems, cache, Evaluator(module, problems, cache), self.tolerance, self.ablation, self.prune,
            self.length_problems, self.circuits,
        )  # fmt: skip
        results, summary, described, not_run = {}, [], [], {}
        chosen = [a for a in analyses() if not a.opt_in or getattr(self, a.opt_in)]
        for analysis in track(chosen, "analysis", part=lambda a: a.name):  # in the terminal only
            try:
                rows = ctx.result(type(analysis))
            except CannotRun as e:  # this model lacks what it reads: said in one line, the others run
                not_run[analysis.name] = str(e)
                continue
            if not rows:
                continue
            written = recorder.record(analysis, rows, analysis.figure(rows, ctx))
            if "figure" in written:
                images[analysis.name] = str(written["figure"])
            entries = analysis.results(rows, ctx)
            results |= entries
            recorder.summary({key: value for key, value in entries.items() if isinstance(value, (int, float))})
            summary += analysis.summary(rows, ctx)
            described.append(
                analysis.describe()
                | analysis.facts(rows, ctx)
                | {"notes": head_notes(analysis, rows), "results_keys": sorted(entries)}
            )
        run_dir.write_json(run_dir.analysis, page_facts(module.fmt, self.tolerance, described))
        seconds = round(time.perf_counter() - started, 2)
        intact = ctx.evaluator.intact.exact_match
        if not learned(intact):  # nothing to lose: every head "prunable", every role noise; the rows stay recorded
            summary = [("heads", not_learned_text(intact))]
        if not_run:
            results["analyses_not_run"] = not_run
        return results | {
            "learned": learned(intact),
            "learned_threshold": LEARNED,
            "analysis_problems": len(problems),
            "intact_exact_match": ctx.evaluator.intact.exact_match,
            "images": images,
            "analysis_summary": summary,
            "tolerance": self.tolerance,
            "analysis_seconds": seconds,
        }


def head_notes(analysis, rows: list) -> dict[str, str]:
    """{"L0h1": the line the page writes under that head}, from a head metric's rows (the first per head)."""
    notes: dict[str, str] = {}
    if isinstance(analysis, HeadMetric):
        for row in rows:
            notes.setdefault(head_label(row.layer, row.head), analysis.note(row))
    return notes


def page_facts(fmt, tolerance: float, analyses: list[dict]) -> dict:
    """Everything the page needs besides the rows, recorded when the run writes them (analysis.json); ``fmt``
    (the problem format) labels the positions, None for none."""
    facts = {
        "schema": ANALYSIS_SCHEMA,
        "tolerance": tolerance,
        "tolerance_text": points(tolerance),  # "1 point": the page's words for it
        "milestone": MASTERED,
        "analyses": analyses,
    }
    if fmt is not None:
        where = positions(fmt)[:-1]  # model inputs stop before [EOS]
        facts["key_labels"] = [p.short for p in where]
        facts["key_names"] = [p.label for p in where]
        facts["answer_places"] = [p.short for p in where[fmt.prompt_len :]]
    return facts


def legacy_facts(data: dict | None, tolerance: float) -> dict:
    """The page's facts for a run recorded before analysis.json: its format from results.json, every analysis as
    registered now (the page shows those whose CSV the run has), no notes under the heads."""
    from analysis.registry import analyses
    from data.build import problem_format

    described = [a.describe() | {"notes": {}} for a in analyses()]
    return page_facts(problem_format(**data) if data else None, tolerance, described)
