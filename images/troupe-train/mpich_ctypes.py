"""The few MPI calls train.py makes, on MPICH's library through ctypes.

Debian's python3-mpi4py is built against Open MPI only, so under MPICH's launcher (Hydra) it
would start every rank as a world of its own. This module gives train.py the same names it uses
from mpi4py (COMM_WORLD with Get_rank, Get_size, Bcast, Allreduce, allreduce, bcast; IN_PLACE,
SUM, MIN) on libmpich.so.12. The handle values are MPICH's ABI (its mpi.h), fixed since MPICH 3.
"""

import atexit
import ctypes
import pickle

import numpy as np

_lib = ctypes.CDLL("libmpich.so.12", mode=ctypes.RTLD_GLOBAL)

_COMM_WORLD = ctypes.c_int(0x44000000)
_BYTE = 0x4c00010d
_TYPES = {
    np.dtype(np.int32): 0x4c000405,  # MPI_INT
    np.dtype(np.int64): 0x4c000807,  # MPI_LONG (64-bit on the platforms Debian builds)
    np.dtype(np.float32): 0x4c00040a,  # MPI_FLOAT
    np.dtype(np.float64): 0x4c00080b,  # MPI_DOUBLE
}
MAX, MIN, SUM = 0x58000001, 0x58000002, 0x58000003
IN_PLACE = object()
_IN_PLACE = ctypes.c_void_p(-1)  # MPICH's MPI_IN_PLACE


def _check(rc, call):
    if rc != 0:
        raise RuntimeError(f"{call} failed: MPI error {rc}")


def _buffer(a):
    if not (isinstance(a, np.ndarray) and a.flags["C_CONTIGUOUS"] and a.dtype in _TYPES):
        raise TypeError("a C-contiguous numpy array of int32, int64, float32 or float64 is needed")
    return a.ctypes.data_as(ctypes.c_void_p), ctypes.c_int(a.size), ctypes.c_int(_TYPES[a.dtype])


class _Comm:
    def __init__(self):
        _check(_lib.MPI_Init(None, None), "MPI_Init")
        atexit.register(_lib.MPI_Finalize)
        rank, size = ctypes.c_int(), ctypes.c_int()
        _check(_lib.MPI_Comm_rank(_COMM_WORLD, ctypes.byref(rank)), "MPI_Comm_rank")
        _check(_lib.MPI_Comm_size(_COMM_WORLD, ctypes.byref(size)), "MPI_Comm_size")
        self._rank, self._size = rank.value, size.value

    def Get_rank(self):
        return self._rank

    def Get_size(self):
        return self._size

    def Bcast(self, buf, root=0):
        ptr, count, dtype = _buffer(buf)
        _check(_lib.MPI_Bcast(ptr, count, dtype, ctypes.c_int(root), _COMM_WORLD), "MPI_Bcast")

    def Allreduce(self, sendbuf, recvbuf, op=SUM):
        ptr, count, dtype = _buffer(recvbuf)
        send = _IN_PLACE if sendbuf is IN_PLACE else _buffer(sendbuf)[0]
        _check(_lib.MPI_Allreduce(send, ptr, count, dtype, ctypes.c_int(op), _COMM_WORLD), "MPI_Allreduce")

    def allreduce(self, value, op=SUM):
        a = np.array([value], dtype=np.int64 if isinstance(value, int) else np.float64)
        self.Allreduce(IN_PLACE, a, op=op)
        return type(value)(a[0])

    def bcast(self, obj, root=0):
        data = pickle.dumps(obj) if self._rank == root else b""
        n = np.array([len(data)], dtype=np.int64)
        self.Bcast(n, root=root)
        buf = np.frombuffer(data, dtype=np.uint8).copy() if data else np.zeros(int(n[0]), dtype=np.uint8)
        _check(_lib.MPI_Bcast(buf.ctypes.data_as(ctypes.c_void_p), ctypes.c_int(buf.size), ctypes.c_int(_BYTE),
                              ctypes.c_int(root), _COMM_WORLD), "MPI_Bcast")
        return pickle.loads(buf.tobytes())


COMM_WORLD = _Comm()
