"""allreduce: every rank reports where it runs, then the ranks sum (rank+1) with MPI_Allreduce.

The data-plane test counts the ranks per host and checks the sum, N*(N+1)/2, on every rank.
Output, one line per rank: "rank R of N on HOST uid U sum S". With --bcast-bytes B, rank 0 then
broadcasts B bytes of a known pattern and every rank checks them (exit 1 if they differ): enough
traffic between hosts for MPICH's finalize to depend on its peers (docs/mpi.md).

It runs in the troupe-mpi image, which has Python and mpi4py (built for Open MPI) but no
compiler: under Open MPI it uses mpi4py, under MPICH's Hydra (PMI_RANK set, no OMPI_* variable)
MPICH's library through ctypes, with the handle values of MPICH's ABI (its mpi.h, fixed since
MPICH 3).
"""

import argparse
import ctypes
import os
import socket
import sys


class MPICH:
    COMM_WORLD, INT, BYTE, SUM = 0x44000000, 0x4c000405, 0x4c00010d, 0x58000003

    def __init__(self):
        self.lib = ctypes.CDLL("libmpich.so.12")
        self.check(self.lib.MPI_Init(None, None), "MPI_Init")
        rank, size = ctypes.c_int(), ctypes.c_int()
        self.lib.MPI_Comm_rank(self.COMM_WORLD, ctypes.byref(rank))
        self.lib.MPI_Comm_size(self.COMM_WORLD, ctypes.byref(size))
        self.rank, self.size = rank.value, size.value

    @staticmethod
    def check(rc, call):
        if rc != 0:
            sys.exit(f"{call} failed: MPI error {rc}")

    def sum(self, value):
        mine, total = ctypes.c_int(value), ctypes.c_int()
        self.check(self.lib.MPI_Allreduce(ctypes.byref(mine), ctypes.byref(total), 1, self.INT, self.SUM,
                                          self.COMM_WORLD), "MPI_Allreduce")
        return total.value

    def bcast(self, buf):
        c = (ctypes.c_char * len(buf)).from_buffer(buf)
        self.check(self.lib.MPI_Bcast(c, len(buf), self.BYTE, 0, self.COMM_WORLD), "MPI_Bcast")

    def finalize(self):
        self.check(self.lib.MPI_Finalize(), "MPI_Finalize")


class OpenMPI:
    def __init__(self):
        from mpi4py import MPI
        self.mpi, self.comm = MPI, MPI.COMM_WORLD
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()

    def sum(self, value):
        return self.comm.allreduce(value, op=self.mpi.SUM)

    def bcast(self, buf):
        self.comm.Bcast([buf, self.mpi.BYTE], root=0)

    def finalize(self):
        pass  # mpi4py finalizes at exit


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bcast-bytes", type=int, default=0)
    args = p.parse_args()
    mpi = MPICH() if "PMI_RANK" in os.environ and "OMPI_COMM_WORLD_SIZE" not in os.environ else OpenMPI()
    total = mpi.sum(mpi.rank + 1)
    print(f"rank {mpi.rank} of {mpi.size} on {socket.gethostname()} uid {os.getuid()} sum {total}", flush=True)
    if args.bcast_bytes:
        pattern = bytes(i % 251 for i in range(args.bcast_bytes))
        buf = bytearray(pattern) if mpi.rank == 0 else bytearray(args.bcast_bytes)
        mpi.bcast(buf)
        if buf != pattern:
            sys.exit(f"rank {mpi.rank}: the {args.bcast_bytes} bytes broadcast by rank 0 differ")
    mpi.finalize()


if __name__ == "__main__":
    main()
