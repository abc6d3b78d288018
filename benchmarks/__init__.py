"""The benchmarks behind ``python bench.py``: each section's measuring, apart from the command that prints it."""
