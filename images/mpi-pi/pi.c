/* pi: estimates pi by the midpoint rule on 4/(1+x^2) over [0,1], split between the MPI ranks,
 * for troupe's images in the layout of kubeflow's (images/mpi-pi). Each rank says where it
 * runs; rank 0 prints the estimate and its error. Written for troupe. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  const long intervals = 100000000L;
  int rank, size, len;
  char host[MPI_MAX_PROCESSOR_NAME];
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Get_processor_name(host, &len);
  printf("rank %d of %d on host %s\n", rank, size, host);
  fflush(stdout);

  const double width = 1.0 / (double)intervals;
  double part = 0.0;
  for (long i = rank; i < intervals; i += size) {
    const double x = ((double)i + 0.5) * width;
    part += 4.0 / (1.0 + x * x);
  }
  part *= width;
  double sum = 0.0;
  MPI_Reduce(&part, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("pi is approximately %.12f, error %.3e, from %d ranks\n", sum, fabs(sum - M_PI), size);
  }
  MPI_Finalize();
  return 0;
}
