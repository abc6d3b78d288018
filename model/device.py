"""Which device torch can compute on here, said in a few words: one home for "no CUDA GPU is visible here", used by
train.py's config check, calc.py and bench.py. Imports only torch."""

from __future__ import annotations

import warnings

import torch


class DeviceError(ValueError):
    """A device that is not there: ``why`` is a short reason ('no CUDA GPU is visible here (...)'), so a
    caller can name its own option and remedy around it in one line."""

    def __init__(self, device: str, why: str):
        super().__init__(f"device {device}: {why}")
        self.device, self.why = device, why


def device_unavailable(kind: str) -> str | None:
    """Why torch cannot compute on device type ``kind`` here, in a few words; None when it can. 'gpu' is taken as
    'cuda' (Lightning's accelerator name); 'cpu' is always there; another type (xpu, ...) is asked its
    ``torch.<type>.is_available()`` when torch has one. Only ``is_available()`` is called: no tensor is made."""
    if kind in ("gpu", "cuda"):
        with warnings.catch_warnings(record=True) as caught:  # e.g. 'CUDA initialization: driver too old': one line
            warnings.simplefilter("always")
            available = torch.cuda.is_available()
        if available:
            return None
        build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
        said = [str(w.message).strip().split(". ")[0][:120] for w in caught if str(w.message).strip()]
        return f"no CUDA GPU is visible here (torch {torch.__version__}, {build}{': ' + said[0] if said else ''})"
    if kind == "mps":
        return None if torch.backends.mps.is_available() else "no Apple GPU is available here"
    backend = getattr(torch, kind, None) if kind not in ("cpu", "meta") else None
    if callable(getattr(backend, "is_available", None)) and not backend.is_available():
        return f"no {kind} device is available here"
    return None


def gpus_short(wanted: int) -> str | None:
    """Why ``wanted`` CUDA GPUs cannot be had here, in a few words; None when torch sees that many."""
    have = torch.cuda.device_count()
    return None if wanted <= have else f"torch sees {have} CUDA GPU{'' if have == 1 else 's'} here"


def remedy(kind: str, cpu_setting: str) -> str:
    """What to do about a missing device of type ``kind``: the CPU instead (``cpu_setting``), or for CUDA, torch's
    CUDA build."""
    return f"use {cpu_setting}" + (
        ", or on a GPU machine install the CUDA build of torch" if kind in ("gpu", "cuda") else ""
    )


def resolve_device(device: str | torch.device = "cpu") -> torch.device:
    """'auto' -> cuda if available, else mps if available, else cpu; any other device (a name such as 'cuda',
    'cuda:1', or a torch.device) is checked to be present here. Raises :class:`DeviceError` otherwise."""
    if device == "auto":
        device = next((kind for kind in ("cuda", "mps") if device_unavailable(kind) is None), "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError):
        raise DeviceError(str(device), "not a device torch knows") from None
    why = device_unavailable(resolved.type)
    if why is None and resolved.type == "cuda" and resolved.index is not None:
        if resolved.index >= torch.cuda.device_count():
            why = f"there is no CUDA GPU {resolved.index} (torch sees {torch.cuda.device_count()})"
    if why is not None:
        raise DeviceError(str(device), why)
    return resolved


def device_name(device: torch.device) -> str:
    """e.g. 'cpu' or 'cuda: NVIDIA H100 80GB HBM3' -- what a run's or a benchmark's figures were measured on."""
    return f"cuda: {torch.cuda.get_device_name(device)}" if device.type == "cuda" else device.type
