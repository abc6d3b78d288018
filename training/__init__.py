"""Everything a run needs that is neither model, data nor analysis: its directory, config rules, the run's
objects built from its config, callbacks, loggers and results record."""

# The accuracy a trained calculator is held to: exact-match on the held-out test set of at least 99.9% (the
# README's results, bench.py's converge section, the lessons' early stop, the long tests). train.py's own early
# stop, configs/train.yaml's target_accuracy, asks more of validation: every one of its problems right.
TARGET_ACCURACY = 0.999
