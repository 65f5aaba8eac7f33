"""Data-parallel training with torch.distributed: the troupe-train image's PyTorch program.

The same model and data as train.py (a small network on scikit-learn's bundled digits, no
download), trained with DistributedDataParallel over the gloo backend (CPU). It joins its
peers the way a PyTorchJob's pods are told to: torch.distributed's env:// (MASTER_ADDR,
MASTER_PORT, WORLD_SIZE, RANK), directly or under torchrun, which sets them for each process
it starts (static, or elastic with a c10d rendezvous). It prints each rank's host, the mean
training loss of every epoch and, on rank 0, the test accuracy and the world size it ended
with; it exits non-zero if the ranks end with different weights.

With --checkpoint-dir, rank 0 saves the model and the epoch there every --checkpoint-every
epochs (a new file renamed over the old one, so a kill mid-write leaves the last whole one) and,
at start, resumes from the checkpoint it finds, saying so; DistributedDataParallel then gives
every rank rank 0's weights. Without it, an elastic run starts over when workers come or go
(torchrun restarts the group with the new world size). --epoch-seconds paces the epochs so that
a scale or a kill can happen mid-run.

In a troupe job, rank 0 reports its progress (steps, loss, the final accuracy) to troupe
(troupe_progress.py). --sleep-at-epoch makes one rank sleep in the middle of the training, as a
rank stuck in a collective would: the others wait in the next all-reduce and the job stops
moving (runPolicy.progressDeadlineSeconds then names it Stalled).

Run with, for example: python3 /opt/troupe/torchrun /opt/troupe/ddp.py --epochs 20 (the PET_*
environment of a PyTorchJob's pods gives torchrun the rest).
"""

import argparse
import datetime
import os
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import troupe_progress


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epoch-seconds", type=float, default=0.0,
                   help="make every epoch last at least this long")
    p.add_argument("--checkpoint-dir", default="",
                   help="rank 0 saves its checkpoint here and resumes from it")
    p.add_argument("--checkpoint-every", type=int, default=1, help="epochs between checkpoints")
    p.add_argument("--sleep-at-epoch", type=int, default=0,
                   help="at the start of this epoch, rank --sleep-rank sleeps --sleep-seconds")
    p.add_argument("--sleep-rank", type=int, default=0)
    p.add_argument("--sleep-seconds", type=float, default=3600.0)
    return p.parse_args()


def load_checkpoint(directory, module):
    """Loads rank 0's checkpoint into module; returns the epoch it was saved after (0: none)."""
    path = os.path.join(directory, "checkpoint.pt")
    if not directory or not os.path.exists(path):
        return 0
    # Tensors and plain types only: a checkpoint someone else planted in the claim cannot run
    # code here (a full unpickle could).
    saved = torch.load(path, weights_only=True)
    module.load_state_dict(saved["model"])
    print(f"resuming from the checkpoint of epoch {saved['epoch']} ({path})", flush=True)
    return int(saved["epoch"])


def save_checkpoint(directory, module, epoch):
    """Saves module and epoch to a new file and renames it over the last checkpoint."""
    path = os.path.join(directory, "checkpoint.pt")
    torch.save({"epoch": epoch, "model": module.state_dict()}, path + ".new")
    os.replace(path + ".new", path)
    print(f"checkpoint of epoch {epoch} saved", flush=True)


def main():
    args = parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=5))
    rank, size = dist.get_rank(), dist.get_world_size()
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    print(f"rank {rank} of {size} on host {socket.gethostname()} (restart {restart})", flush=True)

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.25, random_state=args.seed, stratify=y)
    x_shard = torch.from_numpy(x_train[rank::size])
    y_shard = torch.from_numpy(y_train[rank::size])

    torch.manual_seed(args.seed)
    module = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    # Rank 0 loads the checkpoint before DDP wraps the module: DDP copies rank 0's weights to
    # every rank. Every rank then starts after the checkpoint's epoch (plain SGD keeps no state).
    first = torch.tensor([load_checkpoint(args.checkpoint_dir, module) if rank == 0 else 0])
    dist.broadcast(first, src=0)
    first = int(first.item()) + 1
    model = torch.nn.parallel.DistributedDataParallel(module)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = torch.nn.CrossEntropyLoss()

    # Every rank takes the same number of steps: the smallest shard's.
    steps = torch.tensor([len(x_shard) // args.batch_size])
    dist.all_reduce(steps, op=dist.ReduceOp.MIN)
    steps = int(steps.item())
    reporter = troupe_progress.Reporter(total=args.epochs * steps, unit="steps") if rank == 0 else None
    mean = 0.0
    for epoch in range(first, args.epochs + 1):
        started = time.monotonic()
        if epoch == args.sleep_at_epoch and rank == args.sleep_rank:
            print(f"rank {rank} sleeps {args.sleep_seconds:.0f} s at epoch {epoch}", flush=True)
            time.sleep(args.sleep_seconds)
        order = torch.randperm(len(x_shard), generator=torch.Generator().manual_seed(epoch))
        total = torch.zeros(1)
        for step in range(steps):
            idx = order[step * args.batch_size:(step + 1) * args.batch_size]
            opt.zero_grad()
            loss = loss_fn(model(x_shard[idx]), y_shard[idx])
            loss.backward()  # DDP averages the gradients over the ranks here
            opt.step()
            total += loss.detach()
            if reporter:
                reporter.report((epoch - 1) * steps + step + 1, metrics={"loss": loss.item()},
                                message=f"epoch {epoch}/{args.epochs}")
        dist.all_reduce(total)
        if rank == 0:
            mean = total.item() / max(steps, 1) / size
            print(f"epoch {epoch} loss {mean:.4f} world size {size}", flush=True)
            reporter.report(epoch * steps, metrics={"loss": mean}, message=f"epoch {epoch}/{args.epochs}")
            if args.checkpoint_dir and epoch % args.checkpoint_every == 0:
                save_checkpoint(args.checkpoint_dir, module, epoch)
        time.sleep(max(0.0, args.epoch_seconds - (time.monotonic() - started)))

    with torch.no_grad():
        pred = model(torch.from_numpy(x_test)).argmax(dim=1).numpy()
    accuracy = float((pred == y_test).mean())

    # Every rank must hold exactly rank 0's weights.
    mine = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    reference = mine.clone()
    dist.broadcast(reference, src=0)
    differ = torch.tensor([int(not torch.equal(mine, reference))])
    dist.all_reduce(differ)
    if rank == 0:
        print(f"test accuracy {accuracy:.4f}", flush=True)
        reporter.report(args.epochs * steps, metrics={"loss": mean, "accuracy": accuracy},
                        message="done", final=True)
        print(f"final world size {size}", flush=True)
        if differ.item():
            print(f"error: {differ.item()} of {size} ranks disagree with rank 0 on the final weights",
                  flush=True)
        else:
            print(f"all {size} ranks agree on the final weights", flush=True)
    dist.destroy_process_group()
    return 1 if differ.item() else 0


if __name__ == "__main__":
    sys.exit(main())
