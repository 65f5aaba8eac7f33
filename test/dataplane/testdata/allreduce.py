"""allreduce: every rank reports where it runs, then the ranks sum (rank+1) with MPI_Allreduce.

The data-plane test counts the ranks per host and checks the sum, N*(N+1)/2, on every rank.
Output, one line per rank: "rank R of N on HOST uid U sum S". It runs in the troupe-mpi image,
which has Python and mpi4py (built for Open MPI) but no compiler: under Open MPI it uses mpi4py,
under MPICH's Hydra (PMI_RANK set, no OMPI_* variable) MPICH's library through ctypes, with the
handle values of MPICH's ABI (its mpi.h, fixed since MPICH 3).
"""

import ctypes
import os
import socket
import sys


def mpich_allreduce_sum():
    lib = ctypes.CDLL("libmpich.so.12")
    comm_world, mpi_int, mpi_sum = 0x44000000, 0x4c000405, 0x58000003
    if lib.MPI_Init(None, None) != 0:
        sys.exit("MPI_Init failed")
    rank, size, total = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    lib.MPI_Comm_rank(comm_world, ctypes.byref(rank))
    lib.MPI_Comm_size(comm_world, ctypes.byref(size))
    mine = ctypes.c_int(rank.value + 1)
    if lib.MPI_Allreduce(ctypes.byref(mine), ctypes.byref(total), 1, mpi_int, mpi_sum, comm_world) != 0:
        sys.exit("MPI_Allreduce failed")
    return rank.value, size.value, total.value, lib.MPI_Finalize


def openmpi_allreduce_sum():
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    return rank, comm.Get_size(), comm.allreduce(rank + 1, op=MPI.SUM), lambda: None


def main():
    if "PMI_RANK" in os.environ and "OMPI_COMM_WORLD_SIZE" not in os.environ:
        rank, size, total, finalize = mpich_allreduce_sum()
    else:
        rank, size, total, finalize = openmpi_allreduce_sum()
    print(f"rank {rank} of {size} on {socket.gethostname()} uid {os.getuid()} sum {total}", flush=True)
    finalize()


if __name__ == "__main__":
    main()
