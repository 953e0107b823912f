#include "config.h"

#include <pthread.h>

#include "base/blaspool.h"

/* OpenBLAS's pthread build starts its pool when the program loads, and
 * each idle thread spins on sched_yield for 2^28 cycles (about 0.1 s)
 * before it sleeps: on two cores, one core taken from the compare's or
 * the sketch's threads for their first tenth of a second.  Other BLAS
 * libraries lack the symbol. */
extern int blas_thread_shutdown_(void) __attribute__((weak));

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void stop(void)
{
	if (blas_thread_shutdown_)
		blas_thread_shutdown_();
}

void tb_blas_pool_stop(void)
{
	pthread_once(&once, stop);
}
