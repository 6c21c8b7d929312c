"""How PyTorch's dispatcher serves an aten operator on the device, asked of the dispatcher
itself, so the ops layer knows for every vendor (not only those with a verify hook) whether an
operator × dtype ran on the device's own kernels or on its CPU fallback.

The device's dispatch key is its device type's backend key (``torch._C
._dispatch_key_for_device``: ``CPU``, ``CUDA``, ``XLA``, ``HPU``, ``XPU``; ``PrivateUse1`` for
refdev and torch_npu). For one operator on that key the dispatcher takes, in this order (c10's
``OperatorEntry::computeDispatchTableEntryWithDebug``), and :attr:`Answers.how` says which:

1. ``kernel``: a kernel registered for the key itself: the backend's own;
2. ``composite``: a kernel of CompositeExplicitAutogradNonFunctional, CompositeExplicitAutograd
   or CompositeImplicitAutograd whose alias set includes the key: PyTorch's decomposition,
   which serves the operator through other operators' kernels (not missing);
3. ``fallback``: the backend's boxed fallback (refdev's and PyTorch/XLA's run the operator on
   the CPU);
4. ``missing``: nothing; a call raises NotImplementedError.

The answers were checked against the dispatcher's own computed table (``_dispatch_dump_table``)
on torch 2.13.0 for the CPU key, PrivateUse1 with refdev loaded and with no backend, and XLA
and HPU with no backend (tests/data/dispatch/, recorded with :func:`record_answers`).

What the dispatcher cannot know: what a kernel does (refdev registers its host fallback as the
kernel of a few operators; a vendor's kernel may copy to the host itself), and where the calls
of a composite went. The recorder (:class:`CallRecorder`) sits at the Python dispatch key, below
autograd: a CompositeImplicitAutograd operator is seen as the operators it decomposes into, but
a CompositeExplicitAutograd one is seen whole. A key without a boxed fallback cannot have sent
those calls to the CPU; on one with it, only the vendor's counters can say (verify/oota_hooks.py).

The classification is standard library only (the toolkit's unit tests check it on recorded
answers); asking the dispatcher and recording calls import torch when first used.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

KERNEL, COMPOSITE, FALLBACK, MISSING = "kernel", "composite", "fallback", "missing"
HOWS = (KERNEL, COMPOSITE, FALLBACK, MISSING)
# The alias keys whose kernels serve a backend that has none of its own, in the dispatcher's
# order (CompositeImplicitAutogradNestedTensor serves only nested tensors' keys).
ALIASES = ("CompositeExplicitAutogradNonFunctional", "CompositeExplicitAutograd",
           "CompositeImplicitAutograd")
# The dispatcher's computed table (_dispatch_dump_table) names its choice so.
TABLE_TAGS = {"kernel": KERNEL, "default backend kernel": COMPOSITE, "math kernel": COMPOSITE,
              "backend fallback": FALLBACK}
CPU_KEY = "CPU"
ATEN = "aten::"
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True, slots=True)
class Answers:
    """What the dispatcher answers about one operator on one dispatch key."""

    op: str  # 'aten::add.Tensor' ('aten::tanh' for a default overload)
    key: str  # 'PrivateUse1'
    kernel: bool  # _dispatch_has_kernel_for_dispatch_key(op, key)
    composites: tuple[str, ...]  # ALIASES with a kernel for op whose alias set holds key
    fallback: bool  # _dispatch_has_backend_fallback(key): the backend's boxed fallback

    @property
    def how(self) -> str:
        """kernel, composite, fallback or missing: what the dispatcher takes, in its order."""
        if self.kernel:
            return KERNEL
        if self.composites:
            return COMPOSITE
        return FALLBACK if self.fallback else MISSING

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Answers:
        return cls(op=str(data["op"]), key=str(data["key"]), kernel=bool(data["kernel"]),
                   composites=tuple(str(a) for a in data["composites"]),
                   fallback=bool(data["fallback"]))

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "key": self.key, "kernel": self.kernel,
                "composites": list(self.composites), "fallback": self.fallback}


def short(op: str) -> str:
    """'add.Tensor' for 'aten::add.Tensor' (as the vendors' fallback counters name them)."""
    return op.removeprefix(ATEN)


def pair_served(hows: Collection[str], *, boxed_fallback: bool, counters: bool,
                counters_grew: bool) -> str:
    """How one operator × dtype was served on the device, from how the dispatcher serves each
    operator its samples called there (``hows``), whether the key has a boxed fallback, and
    whether the vendor's fallback counters watched the runs (``counters``) and grew.

    ``missing`` where a call had nothing; ``fallback`` where one went to the boxed fallback
    or the counters grew; ``composite`` where a composite's own calls may have gone to a boxed
    fallback that no counter watched (where they ran is not known); else ``kernel``: the
    device's own kernels, directly or under composites on a key that has no fallback or
    whose counters stayed quiet. "" where nothing was called on the device."""
    if MISSING in hows:
        return MISSING
    if FALLBACK in hows or counters_grew:
        return FALLBACK
    if not hows:
        return ""
    if COMPOSITE in hows and boxed_fallback and not counters:
        return COMPOSITE
    return KERNEL


def by_how(served: Mapping[str, str]) -> dict[str, list[str]]:
    """{how: sorted operators} of ``served`` (operator -> how), in HOWS order, none empty."""
    return {how: sorted(op for op, h in served.items() if h == how)
            for how in HOWS if how in served.values()}


# -- asking the dispatcher (torch) -----------------------------------------------------------

_asked: dict[tuple[str, str], Answers] = {}


def device_key(device_type: str) -> str:
    """The backend dispatch key of a device type ('refdev' -> 'PrivateUse1')."""
    import torch

    return str(torch._C._dispatch_key_for_device(device_type))


def has_boxed_fallback(key: str) -> bool:
    import torch

    return bool(torch._C._dispatch_has_backend_fallback(getattr(torch._C.DispatchKey, key)))


def ask(op: str, key: str) -> Answers:
    """The dispatcher's answers for ``op`` ('aten::add.Tensor') on ``key`` (cached: they change
    only when a library registers kernels, which the suite's backends do at import)."""
    import torch

    found = _asked.get((op, key))
    if found is None:
        dispatch = torch._C
        backend = getattr(dispatch.DispatchKey, key)
        found = Answers(
            op=op, key=key, kernel=bool(dispatch._dispatch_has_kernel_for_dispatch_key(op, key)),
            composites=tuple(a for a in ALIASES
                             if dispatch._dispatch_has_kernel_for_dispatch_key(op, a)
                             and dispatch._dispatch_is_included_in_alias(
                                 backend, getattr(dispatch.DispatchKey, a))),
            fallback=has_boxed_fallback(key))
        _asked[(op, key)] = found
    return found


def table_how(op: str, key: str) -> str:
    """What the dispatcher's own computed table says it takes for ``op`` on ``key`` (its
    debugging dump; kept for checking :attr:`Answers.how`, not used by the ops layer)."""
    import torch

    for line in torch._C._dispatch_dump_table(op).splitlines():
        name, _, rest = line.partition(": ")
        if name == key and rest.endswith("]"):
            tag = rest[rest.rindex("[") + 1:-1]
            return TABLE_TAGS.get(tag, tag)
    return MISSING


def record_answers(ops: Iterable[str], keys: Iterable[str]) -> list[dict[str, Any]]:
    """Every ``op`` × ``key``: the dispatcher's answers and its computed table's choice
    ('table'), as tests/data/dispatch/ holds them."""
    return [{**ask(op, key).to_json(), "table": table_how(op, key)}
            for key in keys for op in ops]


# -- what a device run calls (torch) ---------------------------------------------------------

def _below_python() -> Any:
    """The dispatch keys a call reaches after the Python key, where the recorder sees it."""
    import torch

    return torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.Python)


def call_key(args: Any, kwargs: Any, device_type: str, device_key: str) -> str:
    """The dispatch key a call goes to, where it goes to the device ('' elsewhere): the
    dispatcher's own choice from its tensors' key sets (a sparse tensor's call goes to
    SparseCPU, not CPU), else ``device_key`` for a call that names the device (a factory) or,
    naming no device and holding no tensor, runs on the default device, the CPU."""
    import torch
    from torch.utils._pytree import tree_leaves

    keys, mine, named, placed = None, False, False, False
    for leaf in tree_leaves((args, kwargs)):
        if isinstance(leaf, torch.Tensor):
            found = torch._C._dispatch_keys(leaf)
            keys = found if keys is None else keys | found
            mine = mine or leaf.device.type == device_type
            placed = True
        elif isinstance(leaf, torch.device):
            named = named or leaf.type == device_type
            placed = True
    if mine and keys is not None:
        return str((keys & _below_python()).highestPriorityTypeId().name)
    return device_key if named or (not placed and device_type == "cpu") else ""


class CallRecorder:
    """The operators one run calls on the device (:meth:`during`), each with how the
    device's dispatch key serves it (:attr:`calls`, the last run's)."""

    def __init__(self, device_type: str) -> None:
        self.device_type = device_type
        self.key = device_key(device_type)
        self.boxed_fallback = has_boxed_fallback(self.key)
        self.calls: dict[str, str] = {}

    def see(self, op: str, args: Any, kwargs: Any) -> None:
        if op in self.calls:
            return
        try:
            key = call_key(args, kwargs, self.device_type, self.key)
            if key:
                self.calls[op] = ask(op, key).how
        except (RuntimeError, AttributeError):  # an operator or key the dispatcher cannot name
            pass

    def during(self, run: Callable[[], T]) -> T:
        """``run()``, its calls recorded; it runs as it would unwatched: each call is passed
        on unchanged."""
        self.calls = {}
        with _mode_class()(self):
            return run()


def named(aten_name: str, key: str) -> dict[str, str]:
    """How ``key`` serves the overloads of ``aten::<aten_name>`` that mutate nothing (an
    OpInfo's ``aten_name``), for a pair none of whose samples ran on the device; {} where
    aten has no operator of that name (an OpInfo of a Python function)."""
    import torch

    try:
        packet = getattr(torch.ops.aten, aten_name)
        overloads = [getattr(packet, name) for name in packet.overloads()]
        return {f.name(): ask(f.name(), key).how for f in overloads
                if not f._schema.is_mutable}
    except (AttributeError, RuntimeError):
        return {}


def recorder_for(device_type: str) -> CallRecorder | None:
    """A recorder for the device type (None where the dispatcher knows no key for it: the
    counters alone then say where it ran)."""
    try:
        return CallRecorder(device_type)
    except (RuntimeError, AttributeError):
        return None


def called(run: Callable[[], Any]) -> list[str]:
    """The aten operators ``run()`` dispatches (overload packets, in first-call order, on any
    device), what it called before an error included: which operators a failure is built on."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Calls(TorchDispatchMode):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.names: dict[str, None] = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            self.names[func.overloadpacket.__name__] = None
            return func(*args, **(kwargs or {}))

    recorder = Calls()
    try:
        with recorder:
            run()
    except Exception:  # noqa: BLE001 - what it called before failing is still the answer
        pass
    return list(recorder.names)


_modes: list[type] = []


def _mode_class() -> type:
    """A TorchDispatchMode that tells a :class:`CallRecorder` each call (made once)."""
    if not _modes:
        from torch.utils._python_dispatch import TorchDispatchMode

        class Watch(TorchDispatchMode):  # type: ignore[misc]
            def __init__(self, recorder: CallRecorder) -> None:
                super().__init__()
                self.recorder = recorder

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
                self.recorder.see(func.name(), args, kwargs or {})
                return func(*args, **(kwargs or {}))

        _modes.append(Watch)
    return _modes[0]
