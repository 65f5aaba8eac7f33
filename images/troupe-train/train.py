"""Data-parallel training with MPI: the troupe-train image's example program.

Every rank holds the same model (same seed, then rank 0's initial weights broadcast) and a
shard of scikit-learn's bundled digits data set (8x8 images, no download). After each
mini-batch the ranks average their gradients with one MPI Allreduce, as ChainerMN's
multi-node optimizer does, so every rank takes the same step. The program prints each rank's
host, the mean training loss of every epoch and the final test accuracy, and exits non-zero if
the ranks end with different weights. In a troupe job, rank 0 reports its progress (steps, loss,
the final accuracy) to troupe (troupe_progress.py; with the SSH transport, forward the variables
TROUPE_PROGRESS_* to the ranks with mpirun -x). --sleep-at-epoch makes one rank sleep in the
middle of the training, as a rank stuck in a collective would: the others wait in the next
Allreduce and the job stops moving (runPolicy.progressDeadlineSeconds then names it Stalled).

Run with, for example: mpirun -np 4 python3 /opt/troupe/train.py --epochs 20
"""

import argparse
import os
import socket
import sys
import time

import numpy as np
import torch
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
    p.add_argument("--sleep-at-epoch", type=int, default=0,
                   help="at the start of this epoch, rank --sleep-rank sleeps --sleep-seconds")
    p.add_argument("--sleep-rank", type=int, default=0)
    p.add_argument("--sleep-seconds", type=float, default=3600.0)
    return p.parse_args()


def load_mpi():
    """mpi4py, except under MPICH's launcher (Hydra sets PMI_RANK, Open MPI does not), where
    Debian's mpi4py (built for Open MPI) cannot join the ranks: MPICH through ctypes then."""
    if "PMI_RANK" in os.environ and "OMPI_COMM_WORLD_SIZE" not in os.environ:
        import mpich_ctypes
        return mpich_ctypes
    from mpi4py import MPI
    return MPI


def flat_params(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy()


def main():
    args = parse_args()
    MPI = load_mpi()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    # One thread per rank: the ranks of a host share its cores.
    torch.set_num_threads(1)
    print(f"rank {rank} of {size} on host {socket.gethostname()}", flush=True)

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.25, random_state=args.seed, stratify=y)
    # This rank's shard of the training set.
    x_shard = torch.from_numpy(x_train[rank::size])
    y_shard = torch.from_numpy(y_train[rank::size])

    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    # Start from rank 0's weights, whatever each rank's torch drew.
    with torch.no_grad():
        for p in model.parameters():
            buf = p.numpy()
            comm.Bcast(buf, root=0)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = torch.nn.CrossEntropyLoss()

    # Every rank must take the same number of steps (one Allreduce each): the smallest shard's.
    steps = comm.allreduce(len(x_shard) // args.batch_size, op=MPI.MIN)
    grads = np.zeros(sum(p.numel() for p in model.parameters()), dtype=np.float32)
    reporter = troupe_progress.Reporter(total=args.epochs * steps, unit="steps") if rank == 0 else None
    for epoch in range(1, args.epochs + 1):
        started = time.monotonic()
        if epoch == args.sleep_at_epoch and rank == args.sleep_rank:
            print(f"rank {rank} sleeps {args.sleep_seconds:.0f} s at epoch {epoch}", flush=True)
            time.sleep(args.sleep_seconds)
        order = torch.randperm(len(x_shard), generator=torch.Generator().manual_seed(epoch))
        total = 0.0
        for step in range(steps):
            idx = order[step * args.batch_size:(step + 1) * args.batch_size]
            opt.zero_grad()
            loss = loss_fn(model(x_shard[idx]), y_shard[idx])
            loss.backward()
            # Average the gradients of all ranks in place, then step.
            offset = 0
            for p in model.parameters():
                n = p.numel()
                grads[offset:offset + n] = p.grad.reshape(-1).numpy()
                offset += n
            comm.Allreduce(MPI.IN_PLACE, grads, op=MPI.SUM)
            grads /= size
            offset = 0
            for p in model.parameters():
                n = p.numel()
                p.grad.copy_(torch.from_numpy(grads[offset:offset + n]).reshape(p.shape))
                offset += n
            opt.step()
            total += loss.item()
            if reporter:
                reporter.report((epoch - 1) * steps + step + 1, metrics={"loss": loss.item()},
                                message=f"epoch {epoch}/{args.epochs}")
        mean = comm.allreduce(total / max(steps, 1), op=MPI.SUM) / size
        if rank == 0:
            print(f"epoch {epoch} loss {mean:.4f}", flush=True)
            reporter.report(epoch * steps, metrics={"loss": mean}, message=f"epoch {epoch}/{args.epochs}")
        time.sleep(max(0.0, args.epoch_seconds - (time.monotonic() - started)))

    with torch.no_grad():
        pred = model(torch.from_numpy(x_test)).argmax(dim=1).numpy()
    accuracy = float((pred == y_test).mean())

    # Every rank must hold exactly rank 0's weights.
    mine = flat_params(model)
    reference = comm.bcast(mine if rank == 0 else None, root=0)
    differ = comm.allreduce(int(not np.array_equal(mine, reference)), op=MPI.SUM)
    if rank == 0:
        print(f"test accuracy {accuracy:.4f}", flush=True)
        reporter.report(args.epochs * steps, metrics={"loss": mean, "accuracy": accuracy},
                        message="done", final=True)
        if differ:
            print(f"error: {differ} of {size} ranks disagree with rank 0 on the final weights",
                  flush=True)
        else:
            print(f"all {size} ranks agree on the final weights", flush=True)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
