"""The DDP hooks train a small model to the loss of DDP's own all-reduce within 1%."""
import pytest
import torch

import cclz
from conftest import generator, randn


def train(comm, hook, state, steps=300, seed=0):
    """A linear model fitting a noisy linear teacher (the best loss is the noise's, 0.01), each
    rank its own batches: quantization noise that error feedback does not cancel keeps the loss
    above that (int2 without feedback ends 5% above on 2 ranks, int4 with feedback within 0.1%)."""
    torch.manual_seed(seed)
    model = torch.nn.Linear(256, 1)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    if hook is not None:
        ddp.register_comm_hook(state, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.02)
    g = generator(100 + comm.rank)
    w_true = randn(256, 1, generator=generator(7))
    losses = []
    for _ in range(steps):
        x = randn(64, 256, generator=g)
        y = x @ w_true + 0.1 * randn(64, 1, generator=g)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    # The last 50 steps' mean, averaged over the ranks: the training loss reached.
    final = torch.tensor([sum(losses[-50:]) / 50])
    comm.all_reduce(final, op="avg")
    return final.item(), [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("which", ["qgrad4-feedback", "lossless"])
def test_hook_reaches_the_uncompressed_loss(comm, world_group, which):
    baseline, _ = train(comm, None, None)
    if which == "lossless":
        loss, params = train(comm, cclz.ddp.lossless_hook, cclz.ddp.State(comm, cclz.Lossless()))
    else:
        loss, params = train(comm, cclz.ddp.qgrad_hook, cclz.ddp.State(comm))
    everyone = torch.cat([p.flatten() for p in params])
    gathered = torch.empty(everyone.numel() * comm.size)
    comm.all_gather_into_tensor(gathered, everyone)
    assert abs(loss - baseline) <= 0.01 * baseline, (loss, baseline)
    # DDP keeps the replicas identical: every rank applied the same averaged gradient.
    assert all(torch.equal(gathered[r * everyone.numel():(r + 1) * everyone.numel()], everyone)
               for r in range(comm.size))


def test_the_task_tells_compression_noise_apart(comm, world_group):
    """The control: int2 without error feedback misses the 1% (3.7-5% above on 2-4 ranks), so
    the test above can fail."""
    baseline, _ = train(comm, None, None)
    loss, _ = train(comm, cclz.ddp.qgrad_hook, cclz.ddp.State(comm, cclz.Qgrad(2)))
    assert loss > 1.02 * baseline, (loss, baseline)
