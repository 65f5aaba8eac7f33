/* podranks: every rank reports the pod it runs "in", then the ranks sum (rank+1) with
 * MPI_Allreduce. On the simulated cluster every process runs on this machine; the KubeExec
 * e2e test gives each worker pod's exec an environment variable, TROUPE_TEST_POD, naming the
 * pod, which the pod's Open MPI daemon and so its ranks inherit. The launcher's own ranks have
 * none ("-"). Output, one line per rank: "rank R of N pod P sum S".
 * (Adapted from test/dataplane/testdata/allreduce.c.) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size, value, sum = 0;
    const char *pod = getenv("TROUPE_TEST_POD");

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    value = rank + 1;
    MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d pod %s sum %d\n", rank, size, pod && *pod ? pod : "-", sum);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
