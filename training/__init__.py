"""Everything a run needs that is neither model, data nor analysis: its directory, config rules, callbacks,
loggers, results record and the speed harness."""
