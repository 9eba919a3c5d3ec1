"""FSDP2 with cclz's all-gather and reduce-scatter trains like FSDP2's own collectives: lossless
gradients to fp32 summation order, Qgrad int4 with error feedback to the same loss within 1%."""
import pytest
import torch

import cclz
from conftest import DEVICE, generator, randn

fsdp = pytest.importorskip("torch.distributed.fsdp")
if not hasattr(fsdp, "FSDPModule") or not hasattr(fsdp.FSDPModule, "set_custom_all_gather"):
    pytest.skip("FSDP2's custom collectives need torch >= 2.9", allow_module_level=True)


def train(comm, group, gradients=None, steps=60):
    """A 3-layer MLP fitting a fixed random teacher on each rank's own batches; every layer and
    the whole model fully_shard'ed. Returns the last 20 steps' mean loss (averaged over ranks)
    and the hooks that ran."""
    from torch.distributed.device_mesh import DeviceMesh

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(),
                                torch.nn.Linear(128, 128), torch.nn.GELU(),
                                torch.nn.Linear(128, 8))
    mesh = DeviceMesh(DEVICE.type, list(range(comm.size)))
    for layer in (model[0], model[2], model[4]):
        fsdp.fully_shard(layer, mesh=mesh)
    fsdp.fully_shard(model, mesh=mesh)
    hooks = []
    if gradients is not None:
        hooks = cclz.fsdp.compress(model, comm, gradients=gradients)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    teacher = randn(64, 8, generator=generator(5))
    g = generator(200 + comm.rank)
    losses = []
    for _ in range(steps):
        x = randn(32, 64, generator=g)
        loss = torch.nn.functional.mse_loss(model(x), torch.tanh(x @ teacher))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    final = torch.tensor([sum(losses[-20:]) / 20])
    comm.all_reduce(final, op="avg")
    return final.item(), [(ag.calls, rs.calls) for ag, rs in hooks]


@pytest.mark.parametrize("gradients", [cclz.Lossless(), cclz.Qgrad(4, feedback=True)],
                         ids=["lossless", "qgrad4-feedback"])
def test_fsdp2_reaches_its_own_loss(comm, world_group, gradients):
    baseline, _ = train(comm, world_group)
    loss, calls = train(comm, world_group, gradients)
    # The three layers hold every parameter: their hooks ran (the outer module's has none).
    assert sum(ag > 0 and rs > 0 for ag, rs in calls) == 3, calls
    bound = 1e-4 if isinstance(gradients, cclz.Lossless) else 1e-2
    assert abs(loss - baseline) <= bound * baseline, (loss, baseline)


def test_fsdp2_refuses_what_it_cannot_do(comm, world_group):
    with pytest.raises(ValueError, match="exact"):
        cclz.fsdp.AllGather(comm, cclz.Fp8())
    with pytest.raises(ValueError, match="fully_shard"):
        cclz.fsdp.compress(torch.nn.Linear(4, 4), comm)
    with pytest.raises(ValueError, match="activations"):
        cclz.fsdp.compress(torch.nn.Linear(4, 4), comm, gradients=cclz.Fp8())
