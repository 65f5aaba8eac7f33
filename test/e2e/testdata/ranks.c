/* Each rank reports the pod it was started in (TROUPE_TEST_POD, set per pod by a kwok Exec;
 * unset on the launcher) and the allreduce of rank+1 over the world. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  int rank, size, mine, sum = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  mine = rank + 1;
  MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  const char *pod = getenv("TROUPE_TEST_POD");
  printf("rank %d of %d pod %s sum %d\n", rank, size, pod ? pod : "launcher", sum);
  MPI_Finalize();
  return 0;
}
