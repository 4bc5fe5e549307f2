"""Which floating-point precision the machine computes natively, and the training precision
that fits it.

bf16 is fast only where the hardware has bf16 instructions: CUDA devices from Ampere on, and
CPUs with AVX512-BF16 or AMX. Elsewhere PyTorch emulates it, correctly but slowly (on CPUs
without those instructions the GEMMs fall back to a generic kernel). ``precision: auto`` in a
config asks for what fits: bf16-mixed where bf16 is native, fp16-mixed with loss scaling on a
CUDA device without it, 32-true everywhere else. An explicit bf16 request where bf16 is
emulated is honoured, with one warning line (``emulated_bf16_warning``).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path

import torch

log = logging.getLogger("seq2seq")

AUTO = "auto"
BF16_PRECISIONS = frozenset({"bf16-mixed", "bf16-true", "bf16"})
CPU_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})  # /proc/cpuinfo's names
# How much slower than fp32 bf16 ran where it is emulated, by PyTorch's CPU capability and
# the work: the shipped Transformer recipe's training steps, and beam search with a Multi30k
# RNN (measured on one CPU of each kind: docs/benchmarks/precision.md).
EMULATED_BF16_SLOWDOWN = {
    ("AVX2", "training"): "about 30 times",
    ("AVX512", "training"): "about 2.5 times",
    ("AVX2", "decoding"): "about 2 times",
    ("AVX512", "decoding"): "about 2 times",
}
PRECISION_HELP = "docs/benchmarks/precision.md"


@dataclass(frozen=True)
class Machine:
    """What decides the precision: the CPU's bf16 support and CUDA's.

    Attributes:
        cpu_capability: PyTorch's name for the CPU's vector instructions (AVX2, AVX512, ...)
        cpu_bf16: the CPU has bf16 instructions (AVX512-BF16 or AMX)
        cuda: a CUDA device is available
        cuda_bf16: the CUDA device computes bf16 natively (not by emulation)
        cuda_name: the CUDA device's name ("" without one)
    """

    cpu_capability: str
    cpu_bf16: bool
    cuda: bool = False
    cuda_bf16: bool = False
    cuda_name: str = ""

    @staticmethod
    def this() -> Machine:
        """The machine this process runs on."""
        cuda = torch.cuda.is_available()
        return Machine(
            cpu_capability=torch.backends.cpu.get_cpu_capability(),
            cpu_bf16=cpu_has_native_bf16(),
            cuda=cuda,
            cuda_bf16=cuda and torch.cuda.is_bf16_supported(including_emulation=False),
            cuda_name=torch.cuda.get_device_name() if cuda else "",
        )

    def cpu_kind(self) -> str:
        """``AVX2, no bf16 instructions``: the kind of CPU, as benchmarks name it."""
        return f"{self.cpu_capability}, {'with' if self.cpu_bf16 else 'no'} bf16 instructions"

    def describe_cpu(self) -> str:
        """``this AVX2 CPU, which has no bf16 instructions``."""
        has = "has bf16 instructions" if self.cpu_bf16 else "has no bf16 instructions"
        return f"this {self.cpu_capability} CPU, which {has}"


def cpu_has_native_bf16() -> bool:
    """Whether the CPU has bf16 instructions: PyTorch's own checks where this version has
    them, the flags of /proc/cpuinfo otherwise."""
    checks = [getattr(torch.cpu, name, None) for name in ("_is_avx512_bf16_supported",
                                                          "_is_amx_tile_supported")]  # fmt: skip
    available = [check for check in checks if callable(check)]
    if len(available) == len(checks):
        return any(check() for check in available)
    return bool(CPU_BF16_FLAGS & cpu_flags())


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU's feature flags as Linux lists them (empty where there is no such file)."""
    try:
        text = cpuinfo.read_text(encoding="ascii", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


@dataclass(frozen=True)
class Precision:
    """A training precision and why: ``precision`` is a value of Lightning's
    ``Trainer(precision=...)``."""

    precision: str
    reason: str
    warning: str | None = None  # an explicit bf16 request the device can only emulate


def device_type(accelerator: object, machine: Machine) -> str:
    """``cuda`` or ``cpu`` for a Trainer's ``accelerator`` setting (an object: another
    accelerator, which neither rule covers)."""
    name = str(accelerator if accelerator is not None else AUTO).lower()
    if name in ("gpu", "cuda") or (name == AUTO and machine.cuda):
        return "cuda"
    return "cpu" if name in ("cpu", AUTO) else name


def training_precision(requested: object, accelerator: object, machine: Machine) -> Precision:
    """What ``Trainer(precision=requested)`` trains in on ``machine``: ``auto`` resolved to
    what the device computes natively; anything else as asked (None: Lightning's default,
    32-true), with a warning where it asks for bf16 that the device would emulate."""
    device = device_type(accelerator, machine)
    if requested == AUTO:
        return auto_precision(device, machine)
    if requested is None:
        return Precision("32-true", "Lightning's default")
    precision = str(requested)
    emulated = emulated_bf16(device, machine) if precision in BF16_PRECISIONS else None
    if emulated is None:
        return Precision(precision, "as configured")
    fitting = auto_precision(device, machine).precision
    warning = (
        f"trainer.precision {precision} asked for, but {emulated}; precision auto (here "
        f"{fitting}) trains at the device's speed. Going on in {precision} as asked"
    )
    return Precision(precision, "as configured, and emulated here", warning)


def auto_precision(device: str, machine: Machine) -> Precision:
    """``precision: auto`` on ``device`` (``cpu``, ``cuda`` or another accelerator)."""
    if device == "cuda":
        if not machine.cuda:
            return Precision("32-true", "auto: no CUDA device is available")
        if machine.cuda_bf16:
            return Precision("bf16-mixed", f"auto: {machine.cuda_name} computes bf16 natively")
        return Precision(
            "16-mixed", f"auto: {machine.cuda_name} has no native bf16, so fp16 with loss scaling"
        )
    if device == "cpu":
        if machine.cpu_bf16:
            return Precision("bf16-mixed", f"auto: {machine.describe_cpu()}")
        return Precision("32-true", f"auto: {machine.describe_cpu()}, so fp32")
    return Precision("32-true", f"auto: fp32 on the {device} accelerator")


def emulated_bf16(device: str, machine: Machine, work: str = "training") -> str | None:
    """Why bf16 on ``device`` would be slow (None: the device computes it natively);
    ``work``: ``training`` or ``decoding``, whose measured slowdowns differ."""
    if device == "cuda" and machine.cuda and not machine.cuda_bf16:
        return f"{machine.cuda_name} has no native bf16: it is emulated there, and slow"
    if device == "cpu" and not machine.cpu_bf16:
        slowdown = EMULATED_BF16_SLOWDOWN.get((machine.cpu_capability, work), "several times")
        return (
            f"{machine.describe_cpu()}, emulates it: {work} measured {slowdown} slower than "
            f"in fp32 on such a CPU ({PRECISION_HELP})"
        )
    return None


@functools.cache
def warn_once_if_bf16_emulated(device: str) -> None:
    """For a search under bf16 autocast on ``device`` (``cpu``, ``cuda``): one warning per
    process where bf16 is emulated there."""
    if emulated := emulated_bf16(device, Machine.this(), "decoding"):
        log.warning(
            f"bf16 asked for, but {emulated}; without bf16 it decodes in fp32. Going on in "
            "bf16 as asked"
        )
