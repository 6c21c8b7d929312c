"""Host tests of the refdev backend (run against the installed oota-refdev)."""

import copy
import gc
import importlib.metadata
import io
import json
import os
import subprocess
import sys
import tempfile

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch_refdev
from torch.testing import assert_close

DEV = "refdev"


def run_python(code, **env_overrides):
    """Run `code` in a fresh interpreter (outside the source tree); stdout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REFDEV_")}
    env.update(env_overrides)
    with tempfile.TemporaryDirectory() as cwd:
        out = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            check=True,
        )
    return out.stdout


def fresh_bytes(device=0):
    gc.collect()
    return torch.refdev.memory_allocated(device)


# --------------------------------------------------------------------------
# Registration / device module
# --------------------------------------------------------------------------


def test_device_module_registered():
    assert torch.refdev is torch_refdev
    assert torch.refdev.is_available()
    assert torch.refdev.device_count() == int(os.environ.get("REFDEV_DEVICE_COUNT", "2"))
    assert torch._C._get_privateuse1_backend_name() == "refdev"
    assert torch.refdev._is_in_bad_fork() is False
    assert torch.device("refdev:1").type == "refdev"


def test_current_device_and_context():
    assert torch.refdev.current_device() == 0
    torch.refdev.set_device(1)
    try:
        assert torch.refdev.current_device() == 1
        assert torch.empty(2, device=DEV).device == torch.device("refdev:1")
    finally:
        torch.refdev.set_device(0)
    with torch.refdev.device(1):
        assert torch.refdev.current_device() == 1
    assert torch.refdev.current_device() == 0
    with pytest.raises(IndexError):
        torch.refdev.set_device(torch.refdev.device_count())
    with pytest.raises(IndexError):
        torch.empty(1, device=f"refdev:{torch.refdev.device_count()}")


def test_synchronize_takes_every_form_of_device_and_the_work_is_done():
    x = torch.full((4,), 7.5, device="refdev:1")
    for device in (None, 1, "refdev:0", torch.device("refdev", 1)):
        assert (torch.refdev.synchronize() if device is None
                else torch.refdev.synchronize(device)) is None
    assert x.cpu().tolist() == [7.5] * 4


def test_device_count_env_override():
    code = "import torch, torch_refdev; print(torch.refdev.device_count())"
    stdout = run_python(code, REFDEV_DEVICE_COUNT="3")
    assert stdout.strip() == "3"


def test_versions():
    assert torch_refdev.__version__ == "0.1.0"
    assert importlib.metadata.version("oota-refdev") == torch_refdev.__version__
    assert torch_refdev.TORCH_BUILT_WITH == torch.__version__
    assert torch_refdev._C.torch_built_with() == torch.__version__
    torch_refdev.check_torch_abi()  # the installed build matches


def test_abi_mismatch_clear_error(monkeypatch):
    monkeypatch.setattr(torch_refdev, "TORCH_BUILT_WITH", "1.0.0+fake")
    with pytest.raises(RuntimeError) as info:
        torch_refdev.check_torch_abi()
    message = str(info.value)
    assert (f"torch_refdev was built against torch 1.0.0+fake but torch {torch.__version__} "
            "is loaded") in message
    with pytest.raises(RuntimeError, match="built against torch 2.0.0 but torch 2.1.0 is loaded"):
        torch_refdev.check_torch_abi(built_with="2.0.0", loaded="2.1.0")


def test_abi_mismatch_checked_before_loading_extension():
    code = (
        "import sys, torch\n"
        "torch.__version__ = '0.0.1+fake'\n"
        "try:\n"
        "    import torch_refdev\n"
        "except RuntimeError as exc:\n"
        "    print('ERR', exc)\n"
        "    print('LOADED', 'torch_refdev._C' in sys.modules)\n"
    )
    stdout = run_python(code)
    assert (
        f"ERR torch_refdev was built against torch {torch_refdev.TORCH_BUILT_WITH} "
        "but torch 0.0.1+fake is loaded" in stdout
    )
    assert "LOADED False" in stdout


# --------------------------------------------------------------------------
# Allocation, copies, native kernels
# --------------------------------------------------------------------------


def test_empty_and_empty_strided():
    x = torch.empty(3, 4, device=DEV)
    assert x.device == torch.device("refdev:0")
    assert x.shape == (3, 4) and x.is_contiguous()
    y = torch.empty_strided((2, 3), (1, 2), device=DEV, dtype=torch.float64)
    assert y.stride() == (1, 2) and y.dtype == torch.float64
    z = torch.empty(2, 3, 4, 5, device="refdev:1", memory_format=torch.channels_last)
    assert z.device == torch.device("refdev:1")
    assert z.is_contiguous(memory_format=torch.channels_last)
    assert torch.empty(0, device=DEV).numel() == 0


def test_factories():
    assert_close(torch.zeros(2, 3, device=DEV).cpu(), torch.zeros(2, 3))
    assert_close(torch.ones(2, 3, device=DEV).cpu(), torch.ones(2, 3))
    assert_close(torch.full((2,), 7.5, device=DEV).cpu(), torch.full((2,), 7.5))
    assert_close(torch.arange(6, device=DEV).cpu(), torch.arange(6))
    assert_close(torch.eye(3, device=DEV).cpu(), torch.eye(3))
    torch.manual_seed(123)
    expected = torch.randn(4, 4)
    torch.manual_seed(123)
    r = torch.randn(4, 4, device=DEV)
    assert r.device.type == "refdev"
    assert_close(r.cpu(), expected)  # refdev draws from the CPU generator
    r1 = torch.rand(3, device="refdev:1")
    assert r1.device == torch.device("refdev:1")


def test_copy_both_ways_and_dtype_conversion():
    x = torch.randn(5, 7)
    d = x.to(DEV)
    assert d.device.type == "refdev"
    assert_close(d.cpu(), x)
    assert_close(x.refdev().to("cpu", torch.float64), x.double())
    assert_close(d.to(torch.int32).cpu(), x.to(torch.int32))
    dst = torch.empty(5, 7, device=DEV)
    dst.copy_(x)
    assert_close(dst.cpu(), x)
    back = torch.empty(5, 7)
    back.copy_(dst)
    assert_close(back, x)
    # broadcasting copy
    dst.copy_(torch.arange(7.0))
    assert_close(dst.cpu(), torch.arange(7.0).expand(5, 7))


def test_copy_device_to_device():
    x = torch.randn(4, 6)
    d0 = x.to("refdev:0")
    d1 = d0.to("refdev:1")
    assert d1.device == torch.device("refdev:1")
    assert_close(d1.cpu(), x)
    assert d1.untyped_storage().data_ptr() != d0.untyped_storage().data_ptr()
    d0.zero_()
    assert_close(d1.cpu(), x)  # a real copy
    back = torch.empty(6, 4, device="refdev:0")
    back.copy_(d1.t())
    assert_close(back.cpu(), x.t())
    same = d1.clone()
    assert same.device == d1.device
    assert_close(same.cpu(), x)


def test_non_contiguous_copies():
    x = torch.randn(6, 8)
    d = x.refdev()
    assert_close(d.t().cpu(), x.t())
    assert_close(d[:, ::3].cpu(), x[:, ::3])
    assert_close(d[1:5, 2:7].t().contiguous().cpu(), x[1:5, 2:7].t().contiguous())
    assert_close(d.t().to("refdev:1").cpu(), x.t())
    # non-contiguous CPU source into a refdev view
    target = torch.zeros(8, 6, device=DEV)
    target[::2].copy_(x.t()[::2])
    expected = torch.zeros(8, 6)
    expected[::2] = x.t()[::2]
    assert_close(target.cpu(), expected)
    # expanded source
    assert_close(torch.ones(3, 1).refdev().expand(3, 4).cpu(), torch.ones(3, 4))


def test_views_share_storage():
    base = torch.arange(12.0, device=DEV)
    v = base.view(3, 4)
    assert v.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    t = v.t()
    assert not t.is_contiguous()
    s = v[1]
    s.fill_(-1)
    assert_close(base.cpu()[4:8], torch.full((4,), -1.0))
    v[:, 2].zero_()
    assert_close(base.view(3, 4)[:, 2].cpu(), torch.zeros(3))
    assert_close(t.cpu(), base.cpu().view(3, 4).t())
    a = base.as_strided((2, 2), (1, 4), 1)
    assert_close(a.cpu(), base.cpu().as_strided((2, 2), (1, 4), 1))
    assert_close(base.unfold(0, 4, 4).cpu(), base.cpu().unfold(0, 4, 4))
    assert_close(v.reshape(2, 6).cpu(), base.cpu().reshape(2, 6))
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        t.view(12)
    assert_close(t.reshape(12).cpu(), base.cpu().view(3, 4).t().reshape(12))
    with pytest.raises(RuntimeError):
        base.as_strided((20,), (1,))  # out of bounds of the storage


def test_resize():
    x = torch.arange(4.0, device=DEV)
    x.resize_(2, 2)
    assert x.shape == (2, 2)
    x.resize_(10)
    assert x.shape == (10,)
    assert_close(x[:4].cpu(), torch.arange(4.0))  # prefix preserved on growth
    x.resize_(0)
    assert x.numel() == 0
    y = torch.empty(0, device=DEV)
    torch.add(torch.ones(3, device=DEV), 1, out=y)  # out= resizes
    assert_close(y.cpu(), torch.full((3,), 2.0))


def test_fill_and_zero():
    x = torch.empty(3, 3, device=DEV)
    x.fill_(2.5)
    assert_close(x.cpu(), torch.full((3, 3), 2.5))
    x.fill_(torch.tensor(4.0, device=DEV))
    assert_close(x.cpu(), torch.full((3, 3), 4.0))
    x.fill_(torch.tensor(1.0))  # 0-dim CPU value is fine
    assert_close(x.cpu(), torch.ones(3, 3))
    x.zero_()
    assert_close(x.cpu(), torch.zeros(3, 3))
    i = torch.empty(4, dtype=torch.int64, device=DEV).fill_(7)
    assert i.cpu().tolist() == [7, 7, 7, 7]


def test_item_and_print():
    x = torch.tensor([[1.5, -2.0], [3.0, 4.0]]).refdev()
    assert x[0, 1].item() == -2.0
    assert x.sum().item() == 6.5
    assert bool((x > 0).any())
    text = repr(x)
    assert "device='refdev:0'" in text and "1.5000" in text
    assert "refdev:0" in str(torch.ones(2, dtype=torch.int32).refdev())


def test_set_storage():
    x = torch.arange(6.0, device=DEV)
    y = torch.empty(0, device=DEV)
    y.set_(x.untyped_storage(), 2, (2, 2), (2, 1))
    assert_close(y.cpu(), torch.tensor([[2.0, 3.0], [4.0, 5.0]]))
    y.fill_(0)
    assert_close(x.cpu(), torch.tensor([0.0, 1.0, 0.0, 0.0, 0.0, 0.0]))
    z = torch.empty(0, device=DEV).set_(x)
    assert z.is_set_to(x)
    with pytest.raises(RuntimeError):
        torch.empty(0, device=DEV).set_(torch.ones(3).untyped_storage())


# --------------------------------------------------------------------------
# Fallback ops
# --------------------------------------------------------------------------


def test_fallback_matmul_reduction_softmax():
    torch.manual_seed(0)
    a, b = torch.randn(5, 7), torch.randn(7, 3)
    da, db = a.refdev(), b.refdev()
    assert_close((da @ db).cpu(), a @ b)
    assert_close(torch.bmm(da.expand(2, 5, 7), db.expand(2, 7, 3)).cpu(),
                 torch.bmm(a.expand(2, 5, 7), b.expand(2, 7, 3)))
    assert_close(da.sum().cpu(), a.sum())
    assert_close(da.sum(dim=1).cpu(), a.sum(dim=1))
    assert_close(da.mean(dim=0, keepdim=True).cpu(), a.mean(dim=0, keepdim=True))
    assert_close(da.max(dim=1).values.cpu(), a.max(dim=1).values)
    assert_close(da.argmax(dim=1).cpu(), a.argmax(dim=1))
    assert_close(da.softmax(dim=-1).cpu(), a.softmax(dim=-1))
    assert_close(F.log_softmax(da, dim=0).cpu(), F.log_softmax(a, dim=0))
    assert_close(torch.cat([da, da], dim=1).cpu(), torch.cat([a, a], dim=1))
    assert_close(torch.stack([da, da]).cpu(), torch.stack([a, a]))
    assert_close(torch.where(da > 0, da, torch.zeros_like(da)).cpu(),
                 torch.where(a > 0, a, torch.zeros_like(a)))
    assert_close(torch.nonzero(da > 0).cpu(), torch.nonzero(a > 0))
    assert_close(da[da > 0].cpu(), a[a > 0])
    counts = torch_refdev.fallback_op_counts()
    assert any(name.startswith("aten::mm") for name in counts)


def test_fallback_in_place_and_out():
    x = torch.randn(4, 4)
    d = x.refdev()
    d.add_(1).mul_(2)
    assert_close(d.cpu(), (x + 1) * 2)
    view = d[:, 1]
    view.add_(100)  # in-place on a non-contiguous view writes through
    expected = (x + 1) * 2
    expected[:, 1] += 100
    assert_close(d.cpu(), expected)
    out = torch.empty(4, 4, device=DEV)
    r = torch.mul(d, 3, out=out)
    assert r is out
    assert_close(out.cpu(), expected * 3)
    idx = torch.tensor([0, 2])
    d[idx] = 0.0  # index_put_ with CPU indices (allowed, like CUDA)
    expected[idx] = 0.0
    assert_close(d.cpu(), expected)
    d.index_add_(0, idx.refdev(), torch.ones(2, 4, device=DEV))
    expected.index_add_(0, idx, torch.ones(2, 4))
    assert_close(d.cpu(), expected)


def test_fallback_keeps_the_layout_a_cpu_kernel_gives_its_out_argument():
    # replication_pad2d's CPU kernel lays its output out as its input (channels_last); the
    # fallback's write-back must carry that layout to the refdev output, as the CPU's has it.
    x = torch.randn(1, 3, 4, 4).contiguous(memory_format=torch.channels_last)
    pad = nn.ReplicationPad2d(1)
    got = pad(x.refdev())
    assert got.stride() == pad(x).stride()
    assert got.is_contiguous(memory_format=torch.channels_last)
    assert_close(got.cpu(), pad(x))
    out = torch.empty(0, device=DEV)  # resized by the kernel, laid out as it chose
    torch.mul(x.refdev(), 2, out=out)
    assert out.stride() == torch.mul(x, 2).stride()
    view = torch.zeros(4, 8, device=DEV)[:, ::2]  # a strided view keeps its strides
    torch.add(torch.ones(4, 4, device=DEV), 1, out=view)
    assert view.stride() == (8, 2)
    assert_close(view.cpu(), torch.full((4, 4), 2.0))


def test_fallback_tensor_lists():
    xs = [torch.randn(3) for _ in range(3)]
    ds = [x.refdev() for x in xs]
    torch._foreach_add_(ds, 1.0)
    for x, d in zip(xs, ds, strict=True):
        assert_close(d.cpu(), x + 1)
    outs = torch._foreach_mul(ds, 2.0)
    for x, o in zip(xs, outs, strict=True):
        assert o.device.type == "refdev"
        assert_close(o.cpu(), (x + 1) * 2)
    chunks = torch.arange(6.0, device=DEV).split(2)
    assert [c.device.type for c in chunks] == ["refdev"] * 3


def test_cpu_tensor_mixed_with_refdev_raises():
    d = torch.ones(3, device=DEV)
    c = torch.ones(3)
    with pytest.raises(RuntimeError, match="same device"):
        d + c
    with pytest.raises(RuntimeError, match="same device"):
        c * d
    with pytest.raises(RuntimeError, match="same device"):
        torch.mm(d.view(3, 1), c.view(1, 3))
    with pytest.raises(RuntimeError, match="same device"):
        torch.add(c, c, out=torch.empty(3, device=DEV))
    with pytest.raises(RuntimeError, match="same device"):
        d + torch.ones(3, device="refdev:1")
    with pytest.raises(RuntimeError, match="same device"):
        nn.Linear(3, 2)(d)  # CPU weights, refdev input
    # 0-dim CPU tensors are scalars, as on CUDA
    assert_close((d * torch.tensor(2.0)).cpu(), torch.full((3,), 2.0))
    assert (torch.tensor(2.0) * d).device.type == "refdev"


def test_memory_stats():
    torch.refdev.synchronize()
    start = fresh_bytes()
    x = torch.empty(1024, device=DEV)  # 4 KiB
    assert torch.refdev.memory_allocated() == start + 4096
    torch.refdev.reset_peak_memory_stats()
    assert torch.refdev.max_memory_allocated() == start + 4096
    y = torch.empty(2048, device=DEV)
    assert torch.refdev.memory_allocated() == start + 4096 + 8192
    assert torch.refdev.max_memory_allocated() == start + 4096 + 8192
    stats = torch.refdev.memory_stats()
    assert stats["num_allocs"] >= 2 and stats["active_allocs"] >= 2
    del x, y
    assert fresh_bytes() == start
    assert torch.refdev.max_memory_allocated() == start + 4096 + 8192
    torch.refdev.reset_peak_memory_stats()
    assert torch.refdev.max_memory_allocated() == start
    # per-device accounting
    before1 = fresh_bytes(1)
    z = torch.empty(256, device="refdev:1")
    assert torch.refdev.memory_allocated(1) == before1 + 1024
    assert torch.refdev.memory_allocated("refdev:1") == before1 + 1024
    assert fresh_bytes(0) == start
    del z
    assert fresh_bytes(1) == before1


def test_memory_limit_raises_oom():
    code = (
        "import json, torch, torch_refdev\n"
        "try:\n"
        "    torch.empty(1 << 20, device='refdev')\n"
        "except torch.OutOfMemoryError as exc:\n"
        "    print('OOM', 'refdev out of memory' in str(exc))\n"
        "print(torch.empty(16, device='refdev').numel())\n"
    )
    stdout = run_python(code, REFDEV_MEMORY_LIMIT="65536")
    assert stdout.split() == ["OOM", "True", "16"]


def test_poisoned_allocations():
    code = "import torch, torch_refdev; print(torch.empty(3, device='refdev').isnan().all().item())"
    stdout = run_python(code, REFDEV_POISON_ALLOC="1")
    assert stdout.strip() == "True"


# --------------------------------------------------------------------------
# Dtypes, methods, models
# --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_dtypes(dtype):
    torch.manual_seed(0)
    x = torch.randn(8, 8).to(dtype)
    d = x.refdev()
    assert d.dtype == dtype
    assert_close(d.cpu(), x)
    assert_close((d @ d).cpu(), x @ x)
    assert_close((d + d * 2).cpu(), x + x * 2)
    assert_close(d.softmax(-1).cpu(), x.softmax(-1))
    assert_close(d.float().sum().cpu(), x.float().sum())
    lin = nn.Linear(8, 4).to(dtype)
    lin_d = copy.deepcopy(lin).refdev()
    assert_close(lin_d(d).cpu(), lin(x))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_norms_use_host_kernels_bit_exact(dtype):
    # layer_norm/group_norm run the CPU kernels (not the composite
    # decompositions), so refdev matches CPU exactly.
    torch.manual_seed(0)
    x = torch.randn(4, 6, 5).to(dtype)
    w, b = torch.randn(5).to(dtype), torch.randn(5).to(dtype)
    expected = F.layer_norm(x, (5,), w, b)
    got = F.layer_norm(x.refdev(), (5,), w.refdev(), b.refdev()).cpu()
    assert_close(got, expected, rtol=0, atol=0)
    gw, gb = torch.randn(6).to(dtype), torch.randn(6).to(dtype)
    expected = F.group_norm(x, 3, gw, gb)
    got = F.group_norm(x.refdev(), 3, gw.refdev(), gb.refdev()).cpu()
    assert_close(got, expected, rtol=0, atol=0)


def test_tensor_and_module_methods():
    x = torch.randn(2, 2)
    assert x.refdev().device == torch.device("refdev:0")
    assert x.refdev(1).device == torch.device("refdev:1")
    assert x.to("refdev").is_refdev
    assert not x.is_refdev
    m = nn.Linear(2, 2)
    m.refdev()
    assert m.weight.device.type == "refdev"
    m.to("refdev:1")
    assert m.weight.device == torch.device("refdev:1")
    assert m.weight.is_leaf and m.weight.requires_grad
    s = torch.ones(4).untyped_storage().refdev()
    assert s.device.type == "refdev"


def test_shallow_copy_compatible_with_dense_cpu():
    # nn.Module._apply moves parameters in place (`param.data = moved`) only
    # when this holds, as it does between CPU and CUDA.
    cpu, ref = torch.zeros(2), torch.zeros(2, device=DEV)
    assert torch._has_compatible_shallow_copy_type(cpu, ref)
    assert torch._has_compatible_shallow_copy_type(ref, cpu)
    assert torch._has_compatible_shallow_copy_type(ref, torch.zeros(3, device="refdev:1"))
    sparse = torch.zeros(2).to_sparse()
    assert not torch._has_compatible_shallow_copy_type(sparse, ref)
    assert not torch._has_compatible_shallow_copy_type(ref, sparse)
    p = nn.Parameter(torch.ones(2))
    p.data = torch.zeros(2, device="refdev:1")
    assert isinstance(p, nn.Parameter) and p.requires_grad and p.device == torch.device("refdev:1")
    assert_close(p.detach().cpu(), torch.zeros(2))


class TiedLM(nn.Module):
    """lm_head tied to a padded embedding scaled by a 0-dim buffer (Gemma's layout)."""

    def __init__(self, vocab=13, dim=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, padding_idx=0)
        self.register_buffer("scale", torch.tensor(dim**0.5), persistent=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        return self.head(self.norm(self.embed(ids) * self.scale))


@pytest.mark.parametrize("move", ["to", "refdev", "to:1"])
def test_module_move_keeps_tied_weights_and_their_gradient(move):
    torch.manual_seed(0)
    cpu_model = TiedLM()
    ref_model = TiedLM()
    ref_model.load_state_dict(cpu_model.state_dict())
    tied = ref_model.embed.weight
    device = "refdev:1" if move == "to:1" else "refdev:0"
    if move == "refdev":
        ref_model.refdev()
    else:
        ref_model.to(device)
    # Moved in place like on CUDA: one Parameter, still shared by both modules.
    assert ref_model.head.weight is ref_model.embed.weight is tied
    assert tied.device == torch.device(device)
    assert len(list(ref_model.parameters())) == len(list(cpu_model.parameters()))
    ids = torch.tensor([[0, 3, 3, 7, 12], [5, 0, 3, 1, 1]])
    cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.5)
    ref_opt = torch.optim.SGD(ref_model.parameters(), lr=0.5)
    cpu_loss = F.cross_entropy(cpu_model(ids).flatten(0, 1), ids.flatten())
    ref_loss = F.cross_entropy(ref_model(ids.to(device)).flatten(0, 1), ids.to(device).flatten())
    assert_close(ref_loss.cpu(), cpu_loss)
    cpu_loss.backward()
    ref_loss.backward()
    # The embedding's gradient holds the head's contribution too.
    assert_close(tied.grad.cpu(), cpu_model.embed.weight.grad, rtol=1e-5, atol=1e-6)
    cpu_opt.step()
    ref_opt.step()
    for (name, p), rp in zip(cpu_model.named_parameters(), ref_model.parameters(), strict=True):
        assert_close(rp.detach().cpu(), p.detach(), rtol=1e-5, atol=1e-6, msg=name)
    # Back to the host, still tied, gradient carried along.
    ref_model.cpu()
    assert ref_model.head.weight is ref_model.embed.weight is tied
    assert tied.device.type == "cpu" and tied.grad.device.type == "cpu"


def test_save_and_load_roundtrip():
    buf = io.BytesIO()
    torch.save(torch.arange(5.0, device="refdev:1"), buf)
    buf.seek(0)
    loaded = torch.load(buf)
    assert loaded.device == torch.device("refdev:1")
    assert_close(loaded.cpu(), torch.arange(5.0))


def _mlp():
    return nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 4))


# F.mse_loss on a backend without its own kernel runs the structured
# mse_loss.out kernel, which warns about resizing its 0-dim output; plain CPU
# mse_loss(..., out=torch.empty(())) emits the same upstream warning.
@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
@pytest.mark.parametrize("optimizer", ["adamw", "sgd"])
def test_mlp_forward_backward_optimizer_matches_cpu(optimizer):
    torch.manual_seed(0)
    cpu_model = _mlp()
    ref_model = copy.deepcopy(cpu_model).refdev()
    if optimizer == "adamw":
        cpu_opt = torch.optim.AdamW(cpu_model.parameters(), lr=1e-2)
        ref_opt = torch.optim.AdamW(ref_model.parameters(), lr=1e-2)
    else:
        cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.1, momentum=0.9)
        ref_opt = torch.optim.SGD(ref_model.parameters(), lr=0.1, momentum=0.9)
    x, target = torch.randn(6, 8), torch.randn(6, 4)
    for _ in range(3):
        cpu_opt.zero_grad()
        ref_opt.zero_grad()
        cpu_loss = F.mse_loss(cpu_model(x), target)
        ref_loss = F.mse_loss(ref_model(x.refdev()), target.refdev())
        assert ref_loss.device.type == "refdev"
        assert_close(ref_loss.cpu(), cpu_loss)
        cpu_loss.backward()
        ref_loss.backward()
        for p, rp in zip(cpu_model.parameters(), ref_model.parameters(), strict=True):
            assert rp.grad.device.type == "refdev"
            assert_close(rp.grad.cpu(), p.grad)
        cpu_opt.step()
        ref_opt.step()
    for p, rp in zip(cpu_model.parameters(), ref_model.parameters(), strict=True):
        assert rp.device.type == "refdev"
        assert_close(rp.detach().cpu(), p.detach())
    for state in ref_opt.state.values():
        for value in state.values():
            if torch.is_tensor(value) and value.dim() > 0:
                assert value.device.type == "refdev"


class TinyTransformer(nn.Module):
    def __init__(self, vocab=11, dim=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.block = nn.TransformerEncoderLayer(dim, 2, 32, dropout=0.0, batch_first=True)
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids):
        return self.head(self.block(self.embed(ids)))


@pytest.mark.parametrize("device", ["refdev:0", "refdev:1"])
def test_transformer_backward_matches_cpu(device):
    torch.manual_seed(0)
    cpu_model = TinyTransformer()
    ref_model = copy.deepcopy(cpu_model).to(device)
    ids = torch.randint(0, 11, (2, 5))
    labels = torch.randint(0, 11, (2, 5))
    cpu_loss = F.cross_entropy(cpu_model(ids).reshape(-1, 11), labels.reshape(-1))
    ref_logits = ref_model(ids.to(device))
    assert ref_logits.device == torch.device(device)
    ref_loss = F.cross_entropy(ref_logits.reshape(-1, 11), labels.to(device).reshape(-1))
    assert_close(ref_loss.cpu(), cpu_loss)
    cpu_loss.backward()
    ref_loss.backward()
    for (name, p), rp in zip(cpu_model.named_parameters(), ref_model.parameters(), strict=True):
        assert rp.grad.device == torch.device(device), name
        assert_close(rp.grad.cpu(), p.grad, rtol=1e-4, atol=1e-5, msg=name)
    # an SGD step on top keeps both in sync
    for opt in (torch.optim.SGD(cpu_model.parameters(), lr=0.1),
                torch.optim.SGD(ref_model.parameters(), lr=0.1)):
        opt.step()
    for p, rp in zip(cpu_model.parameters(), ref_model.parameters(), strict=True):
        assert_close(rp.detach().cpu(), p.detach(), rtol=1e-4, atol=1e-5)


def test_conv_batchnorm_matches_cpu():
    torch.manual_seed(0)
    cpu_model = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 2, 3, stride=2)
    )
    ref_model = copy.deepcopy(cpu_model).refdev()
    x = torch.randn(2, 3, 8, 8)
    y = cpu_model(x)
    ry = ref_model(x.refdev())
    assert_close(ry.cpu(), y, rtol=1e-4, atol=1e-5)
    y.square().mean().backward()
    ry.square().mean().backward()
    for p, rp in zip(cpu_model.parameters(), ref_model.parameters(), strict=True):
        assert_close(rp.grad.cpu(), p.grad, rtol=1e-4, atol=1e-5)
    bn, rbn = cpu_model[1], ref_model[1]
    assert_close(rbn.running_mean.cpu(), bn.running_mean)
    assert_close(rbn.running_var.cpu(), bn.running_var)
    assert rbn.num_batches_tracked.item() == 1
    ref_model.eval()
    cpu_model.eval()
    assert_close(ref_model(x.refdev()).cpu(), cpu_model(x), rtol=1e-4, atol=1e-5)


def test_autocast():
    a = torch.randn(4, 4, device=DEV)
    with torch.autocast("refdev", dtype=torch.bfloat16):
        out = a @ a
        assert out.dtype == torch.bfloat16
        assert out.softmax(-1).dtype == torch.float32
    assert_close(out.float().cpu(), (a.cpu() @ a.cpu()), rtol=2e-2, atol=5e-2)


def test_complex_and_conj():
    c = torch.randn(4, dtype=torch.complex64)
    d = c.refdev()
    assert_close((d.conj() * d).cpu(), c.conj() * c)
    assert_close(d.conj().cpu(), c.conj())
    assert_close(torch.view_as_real(d).cpu(), torch.view_as_real(c))
    assert_close(torch.view_as_complex(torch.view_as_real(d)).cpu(), c)


def test_pinned_memory_and_accelerator():
    assert torch.ones(3).pin_memory().is_pinned()
    assert torch.accelerator.current_accelerator().type == "refdev"
    assert torch.accelerator.device_count() == torch.refdev.device_count()


def test_sparse_layouts_are_not_implemented():
    # NotImplementedError (a feature refdev lacks), not a RuntimeError (a bug)
    with pytest.raises(NotImplementedError, match="only supports strided"):
        torch.zeros(2, 2, device=DEV).to_sparse()


def test_wrong_op_on_purpose_only_changes_that_operator():
    code = (
        "import json, torch, torch_refdev\n"
        "x = torch.linspace(-1, 1, 5)\n"
        "d = x.to('refdev')\n"
        "print(json.dumps((torch.tanh(d).cpu() - torch.tanh(x)).tolist()))\n"
        "print((torch.sin(d).cpu() - torch.sin(x)).abs().max().item())\n"
    )
    tanh_diff, sin_diff = run_python(code, REFDEV_WRONG_OP="tanh").split("\n")[:2]
    assert json.loads(tanh_diff) == pytest.approx([1.0] * 5)
    assert float(sin_diff) == 0.0
    assert run_python(code).split("\n")[0] == str([0.0] * 5)


def test_slow_op_on_purpose_keeps_results_and_takes_its_time():
    code = (
        "import time, torch, torch_refdev\n"
        "a = torch.randn(8, 8); b = torch.randn(8, 8)\n"
        "da, db = a.to('refdev'), b.to('refdev')\n"
        "t0 = time.perf_counter()\n"
        "for _ in range(5):\n"
        "    out = torch.mm(da, db)\n"
        "print(time.perf_counter() - t0)\n"
        "print((out.cpu() - a @ b).abs().max().item())\n"
        "print(out.device)\n"
    )
    seconds, diff, device = run_python(code, REFDEV_SLOW_OP="mm:40").split("\n")[:3]
    assert float(seconds) >= 5 * 0.040
    assert float(diff) == 0.0
    assert device == "refdev:0"


def test_scaled_op_on_purpose_biases_that_operator_by_its_factor():
    code = (
        "import torch, torch_refdev\n"
        "a = torch.randn(8, 8); b = torch.randn(8, 8)\n"
        "out = torch.mm(a.to('refdev'), b.to('refdev')).cpu()\n"
        "print(((out / (a @ b)) - 1).abs().max().item())\n"
        "print((torch.sin(a.to('refdev')).cpu() - torch.sin(a)).abs().max().item())\n"
    )
    bias, sin_diff = run_python(code, REFDEV_SCALE_OP="mm:1.001").split("\n")[:2]
    assert float(bias) == pytest.approx(0.001, rel=1e-3)
    assert float(sin_diff) == 0.0


def test_a_foreach_path_that_drops_the_last_tensor_on_purpose():
    code = (
        "import json, torch, torch_refdev\n"
        "xs = [torch.zeros(2, device='refdev') for _ in range(3)]\n"
        "torch._foreach_addcdiv_(xs, [torch.ones(2, device='refdev')] * 3,\n"
        "                        [torch.ones(2, device='refdev')] * 3, [1.0, 2.0, 3.0])\n"
        "torch._foreach_add_(xs, 1.0)\n"
        "print(json.dumps([x.cpu().tolist() for x in xs]))\n"
    )
    dropped = run_python(code, REFDEV_FOREACH_DROP_LAST="_foreach_addcdiv_")
    assert json.loads(dropped) == [[2.0, 2.0], [3.0, 3.0], [1.0, 1.0]]
    assert json.loads(run_python(code)) == [[2.0, 2.0], [3.0, 3.0], [4.0, 4.0]]


def test_an_optimizer_step_that_skips_a_parameter_group_on_purpose():
    code = (
        "import json, torch, torch_refdev\n"
        "def run(groups):\n"
        "    ps = [torch.nn.Parameter(torch.ones(2, device='refdev')) for _ in range(2)]\n"
        "    split = [{'params': [p]} for p in ps] if groups == 2 else [{'params': ps}]\n"
        "    opt = torch.optim.SGD(split, lr=0.5)\n"
        "    sum(p.sum() for p in ps).backward()\n"
        "    opt.step()\n"
        "    return [p.detach().cpu().tolist() for p in ps]\n"
        "print(json.dumps([run(2), run(1)]))\n"
    )
    two, one = json.loads(run_python(code, REFDEV_SKIP_PARAM_GROUP="1"))
    assert two == [[0.5, 0.5], [1.0, 1.0]]  # the second group kept its values
    assert one == [[0.5, 0.5], [0.5, 0.5]]  # an optimizer of one group is untouched
    assert json.loads(run_python(code))[0] == [[0.5, 0.5], [0.5, 0.5]]


@pytest.mark.parametrize(("variable", "value", "shape"), [
    ("REFDEV_SLOW_OP", "mm", "NAME:MILLISECONDS"),
    ("REFDEV_SCALE_OP", "mm:big", "NAME:FACTOR"),
    ("REFDEV_SKIP_PARAM_GROUP", "second", "a parameter group's index"),
    ("REFDEV_FOREACH_DROP_LAST", "_foreach_add", "in-place foreach operators"),
])
def test_a_malformed_fault_switch_is_refused_with_the_expected_shape(variable, value, shape):
    with tempfile.TemporaryDirectory() as cwd:  # outside the source tree, as run_python
        failed = subprocess.run([sys.executable, "-c", "import torch_refdev"], cwd=cwd,
                                capture_output=True, text=True, env={**os.environ, variable: value})
    assert failed.returncode != 0
    assert f"{variable}={value!r}: expected {shape}" in failed.stderr
