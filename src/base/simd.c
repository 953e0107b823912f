#include "config.h"

#include <stdatomic.h>
#include <string.h>

#include "base/simd.h"

/* -1: not decided yet; 0: generic; 1: AVX2.  Set once from the CPU, or by
 * tb_simd_force. */
static atomic_int isa = -1;

static int detect(void)
{
#if TB_SIMD_X86
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") ? 1 : 0;
#else
	return 0;
#endif
}

bool tb_simd_avx2(void)
{
	int v = atomic_load_explicit(&isa, memory_order_relaxed);

	if (v < 0) {
		v = detect();
		atomic_store(&isa, v);
	}
	return v == 1;
}

int tb_simd_force(const char *name)
{
	if (!name) {
		atomic_store(&isa, detect());
		return 0;
	}
	if (!strcmp(name, "generic")) {
		atomic_store(&isa, 0);
		return 0;
	}
	if (!strcmp(name, "avx2") && detect() == 1) {
		atomic_store(&isa, 1);
		return 0;
	}
	return -1;
}

const char *tb_simd_name(void)
{
	return tb_simd_avx2() ? "avx2" : "generic";
}
