"""What this machine can hold: a run's sizes checked against its memory and cores before anything is allocated.

A setting with no upper bound can take the machine down (``data.batch_size=100000000`` grew to 23.8 GB before
the kernel's OOM killer ended it; ``threads=100000`` segfaults). :func:`check_sizes` refuses such a run with one
line naming the setting and the limit, from the config alone: nothing of the run has been built yet.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from data.checks import is_whole

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
FP32, INT64 = 4, 8  # bytes per weight/activation and per token id
# what each further process of a run on this machine holds besides its share of the run: Python, torch and
# Lightning loaded (a CPU process of trainer=ddp measured ~370 MB resident before its first step)
PROCESS = 400 * 10**6


def machine_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS says, else os.cpu_count())."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def _meminfo(field: str, path: str = "/proc/meminfo") -> int | None:
    """A field of /proc/meminfo or /proc/self/status in bytes (Linux), else None."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024  # "MemAvailable:  5123456 kB"
    except (OSError, ValueError, IndexError):
        pass
    return None


def available_memory() -> tuple[int | None, str]:
    """(bytes this process can still allocate, what bounds it), or (None, ...) where the OS does not say.

    Linux: MemAvailable (what can be allocated without swapping), or less under an address-space limit
    (``ulimit -v``: the limit minus what this process has mapped already). Elsewhere: free physical pages
    (os.sysconf), or None -- then no memory check is made."""
    available, what = _meminfo("MemAvailable"), "MemAvailable of /proc/meminfo"
    if available is None:
        try:
            available, what = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "free memory"
        except (AttributeError, ValueError, OSError):
            available = None
    try:
        import resource  # Unix only

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        unlimited = limit == resource.RLIM_INFINITY
    except (ImportError, AttributeError, ValueError, OSError):  # Windows: no address-space limit to read
        unlimited = True
    if not unlimited:
        left = max(0, limit - (_meminfo("VmSize", "/proc/self/status") or 0))
        if available is None or left < available:
            available, what = left, "under this process's address-space limit, ulimit -v"
    return available, what


@dataclass(frozen=True)
class Sizes:
    """The settings the estimate reads (config keys in comments)."""

    d_model: int  # model.d_model
    n_layers: int  # model.n_layers
    n_heads: int  # model.n_heads
    n_kv_heads: int  # model.n_kv_heads (null = n_heads)
    mlp_ratio: int  # model.mlp_ratio
    tie_weights: bool  # model.tie_weights
    batch_size: int  # data.batch_size
    eval_batch_size: int  # data.eval_batch_size
    draw_steps: int  # data.draw_steps (null = 1 on a CPU, 64 on a GPU)
    held_out: int  # data.n_val + data.n_test, + data.n_train when data.streaming=false
    seq_len: int  # from data.digits, data.operators, data.show_work
    vocab: int  # the tokenizer's (fixed) vocabulary
    # the position tables (model/positions.py), sized by how much longer problems the model can be asked
    position_embedding: bool = True  # model.position_embedding: a learned vector per position up to block_size
    places: int = 0  # the trained layout's digit places + 1 when model.place_embedding, else 0 (no place table)
    place_offset: int = 0  # model.place_offset: places (and positions) beyond the trained width
    len_per_place: float = 0.0  # tokens a problem grows by per digit of width (block_size = seq_len + this * offset)
    place_bias: int = 0  # model.place_bias: 2 * place_bias + 4 score buckets per layer and head
    processes: int = 1  # trainer.devices on the CPU: one process each, all on this machine (a GPU's are bounded)


KEYS = {  # Sizes field -> the config key it comes from, as named in a refusal
    "d_model": "model.d_model",
    "n_layers": "model.n_layers",
    "n_heads": "model.n_heads",
    "mlp_ratio": "model.mlp_ratio",
    "batch_size": "data.batch_size",
    "eval_batch_size": "data.eval_batch_size",
    "draw_steps": "data.draw_steps",
    "place_offset": "model.place_offset",
    "place_bias": "model.place_bias",
    "processes": "trainer.devices",
}


@dataclass(frozen=True)
class Estimate:
    parameters: int  # how many
    weights: int  # bytes: weights, gradients and AdamW's two moments
    activations: int  # bytes: the larger of a training step's saved activations and an evaluation batch's
    data: int  # bytes: the training batches drawn at once and the held-out sets
    processes: int = 1  # each holds all of the above; each one after the first, PROCESS more

    @property
    def total(self) -> int:
        return self.processes * (self.weights + self.activations + self.data) + (self.processes - 1) * PROCESS


def memory_estimate(s: Sizes) -> Estimate:
    """The memory a run of these sizes needs at its peak, in bytes (fp32 weights and activations, int64 ids).

    With d = d_model, L = n_layers, H = n_heads, kv = n_kv_heads * d / H, r = mlp_ratio, V = vocab,
    T = seq_len, B = batch_size, E = eval_batch_size, N = block_size (T + len_per_place * place_offset: the
    longest problem the model can be asked), Q = places + place_offset (with a place embedding), S = 2 *
    place_bias + 4 (with place_bias):

    - parameters P = V*d (tokens) + N*d (positions, unless position_embedding is off) + Q*d (places) + S*L*H
      (place scores) + L * (2*d*d + 2*d*kv (attention) + 2*r*d*d (MLP) + (9 + r)*d + 2*kv (biases, layer
      norms)) + 2*d + (V*d unless tied); weights = 16 * P bytes (the weights, their gradients and AdamW's two
      moments, fp32 each);
    - a training step keeps, per token and layer, about (9 + 2r)*d activations for the backward pass (layer
      norms, q/k/v, attention output, the MLP's hidden layer before and after GELU, residuals) and 2*H*T
      attention weights (scores and softmax), plus 3*V for the logits and the loss:
      4 * B*T * (L*((9 + 2r)*d + 2*H*T) + 3*V) bytes; an evaluation batch keeps one layer's at a time:
      4 * E*T * ((4 + r)*d + 2*H*T + 3*V); the larger of the two counts;
    - data: 2 * 8 * B*T * draw_steps (the batches drawn at once, and the problems they are drawn from) and
      8 * T * held_out (the validation and test sets, and a fixed training set when not streaming);
    - with trainer.devices = D processes on the CPU, each holds all of that (batch_size is per process), and each
      after the first PROCESS bytes of its own.

    An estimate of the largest allocations, not a measurement: Python, torch and Lightning need some hundred
    MB besides, which the available memory it is compared with already excludes (they are loaded by then)."""
    d, L, H, r, V, T = s.d_model, s.n_layers, s.n_heads, s.mlp_ratio, s.vocab, s.seq_len
    N = T + round(s.len_per_place * s.place_offset)
    kv = s.n_kv_heads * (d // max(H, 1))
    per_layer = 2 * d * d + 2 * d * kv + 2 * r * d * d + (9 + r) * d + 2 * kv
    tables = (N * d if s.position_embedding else 0) + (s.places + s.place_offset) * d * (s.places > 0)
    tables += (2 * s.place_bias + 4) * L * H if s.place_bias else 0
    parameters = V * d + tables + L * per_layer + 2 * d + (0 if s.tie_weights else V * d)
    training = FP32 * s.batch_size * T * (L * ((9 + 2 * r) * d + 2 * H * T) + 3 * V)
    evaluation = FP32 * s.eval_batch_size * T * ((4 + r) * d + 2 * H * T + 3 * V)
    data = 2 * INT64 * s.batch_size * T * s.draw_steps + INT64 * T * s.held_out
    return Estimate(parameters, 4 * FP32 * parameters, max(training, evaluation), data, s.processes)


def _whole(value) -> bool:
    return is_whole(value) and value >= 1


def sizes_of(cfg: DictConfig) -> Sizes | None:
    """The sizes a config asks for, or None when one is not a valid value (its owner then says so)."""
    from data.build import FORMAT_KEYS, problem_format
    from data.positions import place_ids
    from data.tokenizer import CharTokenizer

    model, data = cfg.get("model"), cfg.get("data")
    if not isinstance(model, DictConfig) or not isinstance(data, DictConfig):
        return None
    m, t = OmegaConf.to_container(model, resolve=True), OmegaConf.to_container(data, resolve=True)
    n_kv = m.get("n_kv_heads") if m.get("n_kv_heads") is not None else m.get("n_heads")
    accelerator = OmegaConf.select(cfg, "trainer.accelerator")
    on_gpu = accelerator in ("gpu", "cuda")
    draw = t.get("draw_steps") if t.get("draw_steps") is not None else (64 if on_gpu else 1)  # the datamodule's
    whole = [m.get(k) for k in ("d_model", "n_layers", "n_heads", "mlp_ratio")] + [n_kv, draw]
    whole += [t.get(k) for k in ("batch_size", "eval_batch_size", "n_val", "n_test")]
    if not all(_whole(v) for v in whole):
        return None
    try:
        fmt = problem_format(**{key: t[key] for key in FORMAT_KEYS if key in t})  # with its working's own lines
    except (TypeError, ValueError):
        return None
    held_out = t["n_val"] + t["n_test"] + (0 if t.get("streaming", True) else int(t.get("n_train") or 0))
    offset, bias = m.get("place_offset", 0), m.get("place_bias", 0)
    if not all(is_whole(v) and v >= 0 for v in (offset, bias)):
        return None
    longest = fmt.at_width(fmt.digits + offset).seq_len  # assemble's block_size: arithmetic, nothing allocated
    devices = OmegaConf.select(cfg, "trainer.devices")
    on_cpu = accelerator == "cpu" or (accelerator == "auto" and not _cuda_here())
    processes = devices if on_cpu and _whole(devices) else 1
    table = m.get("place_embedding") is True and m.get("place_vectors") is not False  # place_emb's rows
    places = max(place_ids(fmt, m.get("place_of", "predicted"))) + 1 if table else 0
    return Sizes(
        m["d_model"], m["n_layers"], m["n_heads"], n_kv, m["mlp_ratio"], m.get("tie_weights") is not False,
        t["batch_size"], t["eval_batch_size"], draw, held_out, fmt.seq_len, CharTokenizer().vocab_size,
        m.get("position_embedding") is not False, places, offset, (longest - fmt.seq_len) / max(offset, 1), bias,
        processes,
    )  # fmt: skip


def _cuda_here() -> bool:
    """Does trainer.accelerator=auto pick a GPU here (model/device.py's answer; torch is loaded by then)?"""
    from model.device import device_unavailable

    return device_unavailable("cuda") is None


def _baseline() -> dict:
    """The project's own sizes (configs/model/calculator.yaml, configs/data/addition.yaml)."""
    model = OmegaConf.to_container(OmegaConf.load(CONFIGS / "model" / "calculator.yaml"))
    data = OmegaConf.to_container(OmegaConf.load(CONFIGS / "data" / "addition.yaml"))
    values = {**model, **data, "draw_steps": 1, "processes": 1}  # place_offset and place_bias: 0
    return {field: values[field] for field in KEYS}


def human(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError  # unreachable


def culprit(s: Sizes) -> str:
    """The setting whose return to the project's default shrinks the estimate most, as ``key=value``."""
    baseline = _baseline()
    shrunk = {f: memory_estimate(replace(s, **{f: baseline[f]})).total for f in KEYS if getattr(s, f) != baseline[f]}
    if not shrunk:
        return "the model and batch sizes"
    field = min(shrunk, key=shrunk.get)
    return f"{KEYS[field]}={getattr(s, field)}"


def check_sizes(cfg: DictConfig, available: tuple[int | None, str] | None = None) -> str | None:
    """A one-line refusal when the run would not fit in the memory left, else None."""
    s = sizes_of(cfg)
    if s is None:
        return None
    need = memory_estimate(s)
    free, what = available or available_memory()
    if free is None or need.total <= free:
        return None
    each = f", in each of {s.processes} processes" if s.processes > 1 else ""
    return (
        f"{culprit(s)}: the run would need about {human(need.total)} of memory (weights and optimizer "
        f"{human(need.weights)} for {need.parameters:,} parameters, activations {human(need.activations)}, "
        f"data {human(need.data)}{each}) but only {human(free)} is available ({what}); make it smaller"
    )
