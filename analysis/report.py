"""Old run directories' config.yaml name ``analysis.report.HeadAnalysis``: it lives in analysis/pipeline.py."""

from analysis.pipeline import HeadAnalysis

__all__ = ["HeadAnalysis"]
