"""What a tensor-parallel codec does to one step's loss and gradients: the same weights and batch
through cclz.train's TP layers, uncompressed and with each codec, the gradients compared.

    mpirun -n 2 python3 bench/python/tp_grad_error.py --layers 12 --hidden 256 --warm-steps 100
    torchrun --nproc-per-node 2 bench/python/tp_grad_error.py ...   (GPUs)

The runs are fp32 by default, with one uncompressed bf16-autocast run beside them as the yardstick
(the error that training in bf16 already accepts). The model first trains --warm-steps uncompressed (gradients of a model that has learned something
differ from those at initialization), then every codec computes the next step's gradients from
that state, each with the codec forced on (adaptive off). Per codec: the loss's relative change,
and the gradients' NMSE (sum of squared differences over sum of squares, per parameter): the median
over parameters, the worst, and that of the token embedding, the end of the longest backward path
(every block's gradient codecs lie on it).
"""
import argparse
import dataclasses
import json
import statistics
import sys

import torch

from cclz.train import ModelConfig, TrainConfig, Trainer, launch


def nmse(got, want):
    return ((got.double() - want.double()).square().sum() /
            want.double().square().sum().clamp_min(1e-300)).item()


def run(cfg, device, state, step):
    """Loss and {name: gradient} of one step from `state` (None: train cfg.steps steps first and
    return the state reached)."""
    trainer = Trainer(cfg, device)
    try:
        if state is None:
            for s in range(cfg.steps):
                trainer.train_step(s)
            state = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
        else:
            with torch.no_grad():
                for n, p in trainer.model.named_parameters():
                    p.copy_(state[n])
        trainer.optimizer.zero_grad(set_to_none=False)
        share = trainer.forward_backward(step)
        loss = trainer.groups.world_sum([share.item()])[0]
        grads = {n: p.grad.detach().clone() for n, p in trainer.model.named_parameters()}
    finally:
        trainer.close()
    return loss, grads, state


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--tp", type=int, default=0, help="default: every rank")
    ap.add_argument("--warm-steps", type=int, default=100)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--codecs", default="bf16,fp8,fp8-int8,fp8-e5m2",
                    help="tp codec names (cclz.train's), GATHERS/REDUCTIONS for one codec on "
                         "the all-gathers and another on the reductions (fp8-int8/none), and "
                         "bf16: no codec, bf16 autocast against the fp32 run (the precision the "
                         "codecs are to be judged by)")
    ap.add_argument("--precision", default="fp32", choices=("fp32", "bf16"),
                    help="the runs' precision (bf16: autocast, as on GPUs; then no bf16 row)")
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--json")
    args = ap.parse_args()

    launcher, rank, world, local_rank, local_size = launch.launcher_env()
    device, problem = launch.pick_device(args.device, launcher, local_rank, local_size)
    if problem:
        sys.exit(f"tp_grad_error.py: {problem}")
    launch.cpu_threads(local_size)
    launch.init_distributed(launcher, rank, world, device)
    tp = args.tp or world
    model = ModelConfig(layers=args.layers, heads=args.heads, hidden=args.hidden,
                        seq_len=args.seq_len)
    base = TrainConfig(model=model, tp=tp, batch=args.batch, steps=args.warm_steps, lr=args.lr,
                       warmup=min(20, args.warm_steps), out=None, quiet=True, adaptive="off",
                       precision=args.precision)
    loss0, grads0, state = run(base, device, None, args.warm_steps)
    rows = []
    for name in args.codecs.split(","):
        if name == "bf16":  # the yardstick: bf16 autocast, uncompressed, against fp32
            cfg = dataclasses.replace(base, precision="bf16")
        else:
            gathers, _, reductions = name.partition("/")
            cfg = dataclasses.replace(base, codecs=(("tp", gathers), ("dp", "none"),
                                                    ("pp", "none"),
                                                    ("tp_reduce", reductions or gathers)))
        loss, grads, _ = run(cfg, device, state, args.warm_steps)
        errors = {n: nmse(grads[n], grads0[n]) for n in grads0}
        # Every rank's worst and median over its own parameters, the worst rank's reported.
        emb = [v for n, v in errors.items() if "embed" in n or "wte" in n]
        local = [max(errors.values()), statistics.median(errors.values()),
                 max(emb) if emb else float("nan")]
        # On the device: an NCCL group reduces device tensors only.
        worst = torch.tensor(local, dtype=torch.float64, device=device)
        torch.distributed.all_reduce(worst, op=torch.distributed.ReduceOp.MAX)
        rows.append({"codec": name, "loss": loss, "loss_rel_change": (loss - loss0) / loss0,
                     "grad_nmse_max": worst[0].item(), "grad_nmse_median": worst[1].item(),
                     "grad_nmse_embedding": worst[2].item()})
    torch.distributed.destroy_process_group()
    if rank != 0:
        return
    header = dict(vars(args), tp=tp, device=device.type, uncompressed_loss=loss0)
    print(f"# {json.dumps(header)}")
    print("| tp codec | loss change | gradient NMSE: median | worst | token embedding |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['codec']} | {r['loss_rel_change']:+.2e} | {r['grad_nmse_median']:.2e} | "
              f"{r['grad_nmse_max']:.2e} | {r['grad_nmse_embedding']:.2e} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": " ".join(sys.argv), **header, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
