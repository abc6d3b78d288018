"""The engines every analysis shares, pure computations that know nothing of analyses, files or the page.

cache.py       one forward pass, every activation (``run_with_cache``, ``ActivationCache``)
evaluator.py   a fixed set of problems scored with heads switched off (``Evaluator``)
pairs.py       clean / corrupted problem pairs that isolate one written digit (``contrast_pairs``)
graph.py       the network as components and edges, run edge by edge (``ComponentGraph``)
pair_runs.py   the pairs' clean and corrupted runs, and what patching between them measures
"""
