/*
 * simd_stamp: compiles a kernel template once per op set of simd.h.  The
 * includer defines TB_KERNEL_FILE (the template, a "*.inc") and
 * TB_KERNEL_PREFIX; the template's functions KNAME(x) become
 * PREFIX_generic_x and, on x86, PREFIX_avx2_x and PREFIX_avx512_x,
 * called through TB_SIMD_PICK(PREFIX, x).  No include guard: included once per kernel.
 */
#include "base/simd.h"

#define TB_KPASTE_(a, b, c) a##b##c
#define TB_KPASTE(a, b, c) TB_KPASTE_(a, b, c)

#define V(op) TB_SIMD_GENERIC_SET(op)
#define KNAME(name) TB_KPASTE(TB_KERNEL_PREFIX, _generic_, name)
#define KATTR TB_SIMD_GENERIC_ATTR
#include TB_KERNEL_FILE
#undef V
#undef KNAME
#undef KATTR

#if TB_SIMD_X86
#define V(op) avx_##op
#define KNAME(name) TB_KPASTE(TB_KERNEL_PREFIX, _avx2_, name)
#define KATTR __attribute__((target(TB_SIMD_AVX2_TARGET)))
#include TB_KERNEL_FILE
#undef KNAME
#undef KATTR
#define KNAME(name) TB_KPASTE(TB_KERNEL_PREFIX, _avx512_, name)
#define KATTR __attribute__((target(TB_SIMD_AVX512_TARGET)))
#include TB_KERNEL_FILE
#undef V
#undef KNAME
#undef KATTR
#endif

#undef TB_KPASTE
#undef TB_KPASTE_
#undef TB_KERNEL_FILE
#undef TB_KERNEL_PREFIX
