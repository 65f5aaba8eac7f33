/* allreduce: every rank reports where it runs, then the ranks sum (rank+1) with MPI_Allreduce.
 * The data-plane test counts the ranks per host and checks the sum, N*(N+1)/2, on every rank.
 * Output, one line per rank: "rank R of N on HOST uid U sum S". */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int rank, size, len, value, sum = 0;
    char host[MPI_MAX_PROCESSOR_NAME];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(host, &len);
    value = rank + 1;
    MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d of %d on %s uid %d sum %d\n", rank, size, host, (int) getuid(), sum);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
