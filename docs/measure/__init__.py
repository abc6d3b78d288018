"""docs/regenerate.py's sections, one module each, in the order ``python docs/regenerate.py`` measures them.

Every section module defines ``COMMAND`` (what it runs), ``measure(scratch) -> dict`` (runs it; the dict becomes
docs/measured/<section>.json) and ``BLOCKS`` (the Markdown blocks it renders from docs/measured/); also ``COST``
(rough wall time on a 2-core CPU) and, where it has them, ``DRAWS`` (figure -> the code that draws it) and ``EXTRA``
(optional packages its commands import). common.py holds what they share.
"""

SECTIONS = [
    "default",
    "bad_configs",
    "calc_eval",
    "calc_start",
    "own_block",
    "decode",
    "lab",
    "export",
    "patching",
    "circuits",
    "quick_sweep",
    "why_multi_head",
    "notebooks",
    "seeds",
    "head_sweep",
    "length",
    "length_far",
    "length_options",
    "long_times_short",
    "long_times_two",
    "long_times_long",
    "many_operands",
    "answer_order",
    "add10",
    "add10_recipe",
    "add10_speedrun",
    "mul_working",
    "division",
    "long_division",
    "circuits_tasks",
    "recipe_search",
    "arithmetic",
    "performance",
    "collector",
    "phases",
    "tests",
    "gpu",  # only on a machine with an NVIDIA GPU
]
