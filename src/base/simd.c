#include "config.h"

#include <stdatomic.h>
#include <string.h>

#include "base/simd.h"

static const char *const names[] = {"generic", "avx2", "avx512"};

/* -1: not decided yet, else a tb_simd_level.  Set once from the CPU, or
 * by tb_simd_force. */
static atomic_int isa = -1;

static int detect(void)
{
#if TB_SIMD_X86
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
		return TB_SIMD_GENERIC;
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
			       __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw")
		       ? TB_SIMD_AVX512
		       : TB_SIMD_AVX2;
#else
	return TB_SIMD_GENERIC;
#endif
}

int tb_simd_level(void)
{
	int v = atomic_load_explicit(&isa, memory_order_relaxed);

	if (v < 0) {
		v = detect();
		atomic_store(&isa, v);
	}
	return v;
}

int tb_simd_force(const char *name)
{
	if (!name) {
		atomic_store(&isa, detect());
		return 0;
	}
	for (int v = TB_SIMD_GENERIC; v <= TB_SIMD_AVX512; v++)
		if (!strcmp(name, names[v]) && v <= detect()) {
			atomic_store(&isa, v);
			return 0;
		}
	return -1;
}

const char *tb_simd_name(void)
{
	return names[tb_simd_level()];
}
