"""The optimizers layer's work (verify/test_optimizers.py): PyTorch's optimizer database
(``torch.testing._internal.common_optimizers.optim_db``, shipped in the wheel), which
implementations each entry declares, and a few steps of one configuration on one device.

The steps follow PyTorch's ``_compare_between`` (test/test_optim.py, the model of its
``test_foreach_matches_forloop`` and ``test_fused_matches_forloop``): a small network of two
``Linear`` layers and ``Sigmoid``, plus a 0-dim parameter last (foreach and fused paths once
broke on one: pytorch/pytorch#100701), 7 steps (RAdam's rectified path starts after step 6),
one of them without gradients (a step must then change nothing) and two with the second layer
frozen. Here the parameters are two parameter groups (the first layer; the second and the 0-dim
one), where the optimizer takes groups, so that a step that forgets a group shows. What a run
gives is named: every parameter after the steps and every value of its optimizer state.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import oota_pytorchtests
from oota_modulerun import named_leaves

FORLOOP, FOREACH, FUSED = "forloop", "foreach", "fused"
IMPLEMENTATIONS = (FORLOOP, FOREACH, FUSED)
# The test of PyTorch's TestOptimRenewed whose skips apply to each implementation.
TESTS = {FORLOOP: "test_forloop_goes_right_direction", FOREACH: "test_foreach_matches_forloop",
         FUSED: "test_fused_matches_forloop"}
STATE_DICT_TEST = "test_state_dict_with_cuda_params"
TEST_CLASS = "TestOptimRenewed"
STEPS = 7
MORE_STEPS = 2  # after a state dict moved between the device and the CPU
NO_GRADIENT_STEP = 2
FROZEN_STEPS = (3, 4)
SEED = 20261128
# On the CPU vendor the device is the CPU: its for-loop steps only run, and its foreach and
# fused steps are compared with them; this many configurations of each test show both (as the
# ops layer runs 8 samples of each operator there).
CPU_ONLY_CONFIGS = 3
# As PyTorch's own tests: Muon only takes 2-D parameters (the two layers' weights here).
TWO_DIM_ONLY = frozenset({"Muon"})


def import_optim_db() -> list[Any]:
    oota_pytorchtests.stand_in_expecttest()
    from torch.testing._internal.common_optimizers import optim_db

    return list(optim_db)


def by_name() -> dict[str, Any]:
    """optim_db by the optimizer's class name ('Adam')."""
    return {info.name: info for info in import_optim_db()}


def unsupported(info: Any, implementation: str, device_type: str) -> str:
    """Why the OptimizerInfo declares no such implementation on the device type ('' where it
    does): foreach and fused come from its ``supported_impls``, fused only on the device types
    of its ``supports_fused_on``."""
    if implementation == FORLOOP:
        return ""
    if implementation not in info.supported_impls:
        return f"PyTorch's OptimizerInfo of {info.name} declares no {implementation} implementation"
    if implementation == FUSED and device_type not in info.supports_fused_on:
        return (f"PyTorch's OptimizerInfo of {info.name} declares its fused implementation on "
                f"{', '.join(info.supports_fused_on)}, not on {device_type}")
    return ""


def pytorch_skip(info: Any, test: str, device_type: str, dtype: Any) -> str:
    decorators = info.get_decorators(TEST_CLASS, test, device_type, dtype, {})
    return oota_pytorchtests.decision(decorators, test)


def flags(info: Any, implementation: str) -> dict[str, bool]:
    """The constructor's flags that choose ``implementation`` (the for-loop one says
    foreach=False where the optimizer takes that flag, since a device may default to
    foreach)."""
    if implementation == FUSED:
        return {"fused": True}
    if implementation == FOREACH:
        return {"foreach": True}
    return {"foreach": False} if FOREACH in info.supported_impls else {}


def configs(info: Any, device_type: str, dtype: Any) -> list[tuple[str, dict[str, Any]]]:
    """(description, constructor arguments) of every OptimizerInput the entry gives the
    device type ('capturable' ones only for CUDA's and XPU's); the first CPU_ONLY_CONFIGS on
    the CPU vendor."""
    made = info.optim_inputs_func(device=device_type, dtype=dtype)
    given = [(g.desc or "default", dict(g.kwargs)) for g in made]
    return given[:CPU_ONLY_CONFIGS] if device_type == "cpu" else given


def on_cpu(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments for a run on the CPU: 'capturable' is for CUDA graphs, not the CPU's
    (PyTorch's own tests leave those configurations out on the CPU)."""
    return {k: v for k, v in kwargs.items() if k != "capturable"}


class _Net:
    """The network and the input its steps train it on (made in torch at call time)."""

    @staticmethod
    def build(sparse: bool, dtype: Any) -> Any:
        import torch

        class Net(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                if sparse:  # SparseAdam takes sparse gradients only
                    self.first: Any = torch.nn.Embedding(6, 3, sparse=True)
                    self.second: Any = torch.nn.Embedding(6, 3, sparse=True)
                else:
                    self.first = torch.nn.Linear(2, 3)
                    self.second = torch.nn.Linear(3, 1)
                    self.scale = torch.nn.Parameter(torch.tensor(0.5))

            def forward(self, x: Any) -> Any:
                if sparse:
                    return (self.first(x).sigmoid() * self.second(x)).sum()
                out = torch.sigmoid(self.second(torch.sigmoid(self.first(x))))
                return out.sum() + self.scale * self.scale

        return Net().to(dtype)

    @staticmethod
    def input(sparse: bool, dtype: Any, device: Any) -> Any:
        import torch

        if sparse:
            return torch.tensor([0, 2, 2, 5], device=device)
        values = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
        return torch.tensor(values, dtype=dtype).reshape(3, 2).to(device)


def _groups(info: Any, net: Any) -> list[list[Any]]:
    """The parameter groups: the first layer's, then the rest (one group where the optimizer
    takes no groups; 2-D parameters only for Muon)."""
    named = list(net.named_parameters())
    if info.name in TWO_DIM_ONLY:
        named = [(n, p) for n, p in named if p.dim() == 2]
    first = [p for n, p in named if n.startswith("first.")]
    rest = [p for n, p in named if not n.startswith("first.")]
    return [first + rest] if not info.supports_param_groups else [first, rest]


@dataclass
class Trained:
    """A network and its optimizer on one device, after ``done`` steps."""

    info: Any
    net: Any
    optimizer: Any
    input: Any
    labels: dict[int, str]  # id(parameter) -> its name in the network
    initial: list[Any]  # every parameter before the first step, on the CPU
    first: list[Any] = field(default_factory=list)  # ... and after it (not where resumed)
    done: int = 0

    def parameters(self) -> Iterator[tuple[str, Any]]:
        """(name, parameter) in the optimizer's order: 'param_groups[1].params[2] (scale)'."""
        for g, group in enumerate(self.optimizer.param_groups):
            for k, param in enumerate(group["params"]):
                yield f"param_groups[{g}].params[{k}] ({self.labels[id(param)]})", param


def start(info: Any, kwargs: dict[str, Any], dtype: Any, device: Any,
          wide: bool = False) -> Trained:
    """The network built on the CPU in ``dtype`` from the layer's seed (so every run starts
    from the same weights; ``wide``: then widened to float64 exactly), moved to ``device``,
    with the optimizer over its groups."""
    import torch

    torch.manual_seed(SEED)
    sparse = bool(info.only_supports_sparse_grads)
    net = _Net.build(sparse, dtype)
    if wide:
        net = net.to(torch.float64)
    net = net.to(device)
    groups = _groups(info, net)
    optimizer = info.optim_cls([{"params": g} for g in groups], **copy.deepcopy(kwargs))
    labels = {id(p): n for n, p in net.named_parameters()}
    initial = [p.detach().cpu().clone() for g in groups for p in g]
    x = _Net.input(sparse, torch.float64 if wide else dtype, device)
    return Trained(info=info, net=net, optimizer=optimizer, input=x, labels=labels,
                   initial=initial)


def step(trained: Trained) -> None:
    """One step of the schedule: a step without gradients, and steps with the second layer
    frozen, where the optimizer takes steps without a closure (PyTorch's _compare_between)."""
    closure_only = bool(trained.info.step_requires_closure)
    index = trained.done
    trained.net.second.requires_grad_(closure_only or index not in FROZEN_STEPS)

    def closure() -> Any:
        trained.optimizer.zero_grad()
        loss = trained.net(trained.input)
        if closure_only or index != NO_GRADIENT_STEP:
            loss.backward()
        return loss

    if closure_only:
        trained.optimizer.step(closure)
    else:
        closure()
        trained.optimizer.step()
    trained.done += 1
    if trained.done == 1:
        trained.first = [p.detach().cpu().clone() for _, p in trained.parameters()]


def train(trained: Trained, steps: int) -> Trained:
    for _ in range(steps):
        step(trained)
    _synchronize(trained)
    return trained


def _synchronize(trained: Trained) -> None:
    import torch

    device = trained.input.device
    wait = getattr(getattr(torch, device.type, None), "synchronize", None)
    if callable(wait) and device.type != "cpu":
        wait()


def results(trained: Trained) -> list[tuple[str, Any]]:
    """Every parameter and every value of its optimizer state, named, on the CPU."""
    import torch

    found: list[tuple[str, Any]] = []
    for name, param in trained.parameters():
        found.append((name, param.detach().cpu()))
        state = trained.optimizer.state.get(param, {})
        for key in sorted(state):
            for leaf, value in named_leaves(f"state of {name}[{key!r}]", state[key]):
                found.append((leaf, value.detach().cpu() if isinstance(value, torch.Tensor)
                              else value))
    return found


def unchanged(got: Trained, want: Trained) -> str:
    """The parameters the device's steps left at their initial values while the CPU's steps
    moved them ('' where none): a whole group said as one, a parameter that is the last of
    its group said so."""
    import torch

    stayed: dict[int, list[int]] = {}
    mine, theirs = list(got.parameters()), list(want.parameters())
    for index, ((_, param), (_, moved), before) in enumerate(zip(mine, theirs, got.initial,
                                                                strict=True)):
        if torch.equal(param.detach().cpu(), before) and \
                not torch.equal(moved.detach().cpu(), before):
            group, position = _position(got, index)
            stayed.setdefault(group, []).append(position)
    return "; ".join(_said(got, group, positions) for group, positions in stayed.items())


def _position(trained: Trained, index: int) -> tuple[int, int]:
    """(group, position in it) of the optimizer's ``index``-th parameter."""
    for group, entry in enumerate(trained.optimizer.param_groups):
        if index < len(entry["params"]):
            return group, index
        index -= len(entry["params"])
    raise IndexError(index)


def _said(trained: Trained, group: int, positions: list[int]) -> str:
    params = trained.optimizer.param_groups[group]["params"]
    names = [trained.labels[id(params[k])] for k in positions]
    if len(positions) == len(params) > 1:
        return f"all {len(params)} parameters of param_groups[{group}] ({', '.join(names)})"
    return "; ".join(f"param_groups[{group}].params[{k}] ({name}"
                     f"{', the last of its group' if k == len(params) - 1 else ''})"
                     for k, name in zip(positions, names, strict=True))


def after_first(trained: Trained) -> list[tuple[str, Any]]:
    """Every parameter after the first step, named ([] where the run was resumed): a wrong
    update shows there before later steps spread it to every parameter."""
    names = [f"{name} after the first step" for name, _ in trained.parameters()]
    return list(zip(names, trained.first, strict=True)) if trained.first else []


def state_dict_bytes(trained: Trained) -> bytes:
    """The optimizer's state dict as ``torch.save`` writes it."""
    import io

    import torch

    buffer = io.BytesIO()
    torch.save(trained.optimizer.state_dict(), buffer)
    return buffer.getvalue()


def resumed(info: Any, kwargs: dict[str, Any], dtype: Any, device: Any, source: Trained,
            saved: bytes) -> Trained:
    """A fresh network on ``device`` holding ``source``'s parameters, and a fresh optimizer
    that loads the state dict ``saved`` as a user does: read onto the CPU
    (``torch.load(map_location='cpu')``), and ``load_state_dict`` moves its state to the
    parameters' device; it goes on from ``source``'s step."""
    import io

    import torch

    trained = start(info, kwargs, dtype, device)
    with torch.no_grad():
        for (_, mine), (_, theirs) in zip(trained.parameters(), source.parameters(),
                                          strict=True):
            mine.copy_(theirs.detach().to(device))
    state = torch.load(io.BytesIO(saved), map_location="cpu", weights_only=True)
    trained.optimizer.load_state_dict(state)
    trained.done, trained.initial = source.done, source.initial
    return trained
