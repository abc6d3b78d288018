"""Looking inside a trained calculator: attention maps, head ablation, pruning and head roles."""
