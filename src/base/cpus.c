#include "config.h"

#include <unistd.h>

#include "base/cpus.h"

int tb_threads_for(int asked)
{
	long n;

	if (asked > 0)
		return asked;
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (int)n : 1;
}
