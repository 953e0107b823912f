#include "config.h"

#include <math.h>
#include <pthread.h>
#include <string.h>
#include <strings.h>

#include "tensor/dtype.h"
#include "base/simd.h"

struct dtype_info {
	const char *name;
	unsigned size;
	bool is_float;
	const char *aliases[6]; /* other spellings accepted by tb_dtype_parse */
};

/* Indexed by tb_dtype. */
static const struct dtype_info dtypes[TB_DT_COUNT] = {
	[TB_DT_F64] = {"f64", 8, true, {"float64", "double", "torch.float64"}},
	[TB_DT_F32] = {"f32", 4, true, {"float32", "float", "torch.float32"}},
	[TB_DT_F16] = {"f16", 2, true, {"float16", "half", "torch.float16"}},
	[TB_DT_BF16] = {"bf16", 2, true, {"bfloat16", "torch.bfloat16"}},
	[TB_DT_F8_E4M3FN] = {"f8_e4m3fn", 1, true, {"float8_e4m3fn", "f8e4m3", "e4m3", "torch.float8_e4m3fn", "f8_e4m3"}},
	[TB_DT_F8_E5M2] = {"f8_e5m2", 1, true, {"float8_e5m2", "f8e5m2", "e5m2", "torch.float8_e5m2"}},
	[TB_DT_F8_E4M3FNUZ] = {"f8_e4m3fnuz", 1, true, {"float8_e4m3fnuz", "torch.float8_e4m3fnuz"}},
	[TB_DT_F8_E5M2FNUZ] = {"f8_e5m2fnuz", 1, true, {"float8_e5m2fnuz", "torch.float8_e5m2fnuz"}},
	[TB_DT_I64] = {"i64", 8, false, {"int64", "long", "torch.int64"}},
	[TB_DT_I32] = {"i32", 4, false, {"int32", "int", "torch.int32"}},
	[TB_DT_I16] = {"i16", 2, false, {"int16", "short", "torch.int16"}},
	[TB_DT_I8] = {"i8", 1, false, {"int8", "torch.int8"}},
	[TB_DT_U64] = {"u64", 8, false, {"uint64", "torch.uint64"}},
	[TB_DT_U32] = {"u32", 4, false, {"uint32", "torch.uint32"}},
	[TB_DT_U16] = {"u16", 2, false, {"uint16", "torch.uint16"}},
	[TB_DT_U8] = {"u8", 1, false, {"uint8", "torch.uint8"}},
	[TB_DT_BOOL] = {"bool", 1, false, {"torch.bool"}},
};

const char *tb_dtype_name(tb_dtype dt)
{
	return dt < TB_DT_COUNT ? dtypes[dt].name : "?";
}

size_t tb_dtype_size(tb_dtype dt)
{
	return dt < TB_DT_COUNT ? dtypes[dt].size : 0;
}

bool tb_dtype_is_float(tb_dtype dt)
{
	return dt < TB_DT_COUNT && dtypes[dt].is_float;
}

double tb_dtype_rounding(tb_dtype dt)
{
	switch (dt) {
	case TB_DT_BF16: return 0x1p-8;
	case TB_DT_F16: return 0x1p-11;
	case TB_DT_F8_E4M3FN: return 0x1p-4;
	case TB_DT_F8_E5M2: return 0x1p-3;
	case TB_DT_F64: return 0x1p-52;
	default: return 0x1p-23;
	}
}

int tb_dtype_parse(const char *name, tb_dtype *out)
{
	for (int i = 0; i < TB_DT_COUNT; i++) {
		if (!strcasecmp(name, dtypes[i].name)) {
			*out = (tb_dtype)i;
			return 0;
		}
		for (int a = 0; a < 6 && dtypes[i].aliases[a]; a++) {
			if (!strcasecmp(name, dtypes[i].aliases[a])) {
				*out = (tb_dtype)i;
				return 0;
			}
		}
	}
	return -1;
}

static float f32_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

float tb_f16_to_f32(uint16_t h)
{
	uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;

	if (e == 0x1F)
		return f32_bits(s | 0x7F800000u | (m << 13));
	if (e == 0) {
		float v = (float)m * 0x1p-24f;
		return s ? -v : v;
	}
	return f32_bits(s | ((e + 112u) << 23) | (m << 13));
}

float tb_bf16_to_f32(uint16_t h)
{
	return f32_bits((uint32_t)h << 16);
}

float tb_f8e5m2_to_f32(uint8_t b)
{
	return tb_f16_to_f32((uint16_t)(b << 8));
}

float tb_f8e4m3fn_to_f32(uint8_t b)
{
	int e = (b >> 3) & 0xF, m = b & 7;
	float v;

	if (e == 0xF && m == 7)
		v = NAN;
	else if (e == 0)
		v = (float)m * 0x1p-9f;
	else
		v = ldexpf(1.0f + (float)m / 8.0f, e - 7);
	return (b & 0x80) ? -v : v;
}

static float f8e4m3fnuz_to_f32(uint8_t b)
{
	int e = (b >> 3) & 0xF, m = b & 7;
	float v;

	if (b == 0x80)
		return NAN;
	v = e ? ldexpf(1.0f + (float)m / 8.0f, e - 8) : (float)m * 0x1p-10f;
	return (b & 0x80) ? -v : v;
}

static float f8e5m2fnuz_to_f32(uint8_t b)
{
	int e = (b >> 2) & 0x1F, m = b & 3;
	float v;

	if (b == 0x80)
		return NAN;
	v = e ? ldexpf(1.0f + (float)m / 4.0f, e - 16) : (float)m * 0x1p-17f;
	return (b & 0x80) ? -v : v;
}

uint16_t tb_f32_to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	if (isnan(f))
		return 0x7FC0;
	return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

uint16_t tb_f32_to_f16(float f)
{
	uint32_t u, s, e, m;

	memcpy(&u, &f, 4);
	s = (u >> 16) & 0x8000u;
	e = (u >> 23) & 0xFFu;
	m = u & 0x7FFFFFu;
	if (e == 0xFF)
		return (uint16_t)(s | 0x7C00u | (m ? 0x200u : 0));
	if (e > 142) /* >= 2^16: overflow to inf */
		return (uint16_t)(s | 0x7C00u);
	if (e < 113) { /* subnormal or zero in f16: round m * 2^(e-150) to 2^-24 units */
		uint32_t mant = m | 0x800000u, shift;
		if (e < 102)
			return (uint16_t)s;
		shift = 126 - e;
		uint32_t r = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (r & 1)))
			r++;
		return (uint16_t)(s | r);
	}
	uint32_t h = ((e - 112) << 10) | (m >> 13), rem = m & 0x1FFFu;
	if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
		h++; /* may carry into the exponent, up to inf: correct */
	return (uint16_t)(s | h);
}

float tb_f32_round_f8(float x, tb_dtype dt)
{
	bool e5m2 = dt == TB_DT_F8_E5M2;
	int mant = e5m2 ? 2 : 3, emin = e5m2 ? -14 : -6, e;
	float top = e5m2 ? 57344.0f : 448.0f, a = fabsf(x), step, r;

	if (isnan(x) || a == 0)
		return x;
	frexpf(a, &e); /* a in [2^(e-1), 2^e); below 2^emin, the subnormals' step */
	step = ldexpf(1.0f, (e - 1 < emin ? emin : e - 1) - mant);
	r = nearbyintf(a / step) * step;
	return copysignf(r < top ? r : top, x);
}

/* One table per 1-byte float type, indexed by tb_dtype. */
static float f8_table[TB_DT_COUNT][256];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void build_tables(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		f8_table[TB_DT_F8_E4M3FN][i] = tb_f8e4m3fn_to_f32((uint8_t)i);
		f8_table[TB_DT_F8_E5M2][i] = tb_f8e5m2_to_f32((uint8_t)i);
		f8_table[TB_DT_F8_E4M3FNUZ][i] = f8e4m3fnuz_to_f32((uint8_t)i);
		f8_table[TB_DT_F8_E5M2FNUZ][i] = f8e5m2fnuz_to_f32((uint8_t)i);
	}
}

static uint64_t load_uint(const unsigned char *p, unsigned size, bool swap)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < size; i++) {
		unsigned idx = swap ? i : size - 1 - i;
		v = (v << 8) | p[idx];
	}
	return v;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define HOST_BIG_ENDIAN true
#else
#define HOST_BIG_ENDIAN false
#endif

/* Native-order f32/bf16/f16 to float, 8 at a time with the kernels'
 * loaders (simd.h), one copy per instruction set. */
#define DECODE_VARIANT(NAME, ATTR, V)                                            \
	ATTR static void NAME(tb_src k, const void *src, size_t n, float *dst)   \
	{                                                                        \
		size_t i = 0;                                                    \
		for (; i + 8 <= n; i += 8)                                       \
			V(fstore)(dst + i, V(load)(k, src, i));                  \
		for (; i < n; i++)                                               \
			dst[i] = tb_sload(k, src, i);                            \
	}
DECODE_VARIANT(decode_generic_run, TB_SIMD_GENERIC_ATTR, TB_SIMD_GENERIC_SET)
#if TB_SIMD_X86
#define AVX_SET(op) avx_##op
DECODE_VARIANT(decode_avx2_run, __attribute__((target(TB_SIMD_AVX2_TARGET))), AVX_SET)
DECODE_VARIANT(decode_avx512_run, __attribute__((target(TB_SIMD_AVX512_TARGET))), AVX_SET)
#undef AVX_SET
#endif
#undef DECODE_VARIANT

void tb_dtype_to_f32(tb_dtype dt, const void *src, size_t n, bool swap, float *dst)
{
	const unsigned char *p = src;
	unsigned size = dtypes[dt].size;

	pthread_once(&tables_once, build_tables);
	if (size == 1)
		swap = false;
	switch (dt) {
	case TB_DT_F32:
		if (swap == HOST_BIG_ENDIAN) {
			memcpy(dst, p, n * 4);
			return;
		}
		for (size_t i = 0; i < n; i++)
			dst[i] = f32_bits((uint32_t)load_uint(p + 4 * i, 4, swap));
		return;
	case TB_DT_F64:
		for (size_t i = 0; i < n; i++) {
			uint64_t u = load_uint(p + 8 * i, 8, swap);
			double d;
			memcpy(&d, &u, 8);
			dst[i] = (float)d;
		}
		return;
	case TB_DT_BF16:
	case TB_DT_F16:
		if (swap == HOST_BIG_ENDIAN) {
			TB_SIMD_PICK(decode, run)(dt == TB_DT_BF16 ? TB_SRC_BF16 : TB_SRC_F16, p, n, dst);
			return;
		}
		for (size_t i = 0; i < n; i++) {
			uint16_t h = (uint16_t)load_uint(p + 2 * i, 2, swap);
			dst[i] = dt == TB_DT_BF16 ? tb_bits_f32((uint32_t)h << 16) : tb_half_f32(h);
		}
		return;
	case TB_DT_F8_E4M3FN:
	case TB_DT_F8_E5M2:
	case TB_DT_F8_E4M3FNUZ:
	case TB_DT_F8_E5M2FNUZ:
		for (size_t i = 0; i < n; i++)
			dst[i] = f8_table[dt][p[i]];
		return;
	case TB_DT_I64:
	case TB_DT_I32:
	case TB_DT_I16:
	case TB_DT_I8:
		for (size_t i = 0; i < n; i++) {
			uint64_t u = load_uint(p + (size_t)size * i, size, swap);
			unsigned bits = size * 8;
			int64_t v = bits == 64 ? (int64_t)u
					       : (int64_t)(u ^ (1ull << (bits - 1))) - (int64_t)(1ull << (bits - 1));
			dst[i] = (float)v;
		}
		return;
	case TB_DT_U64:
	case TB_DT_U32:
	case TB_DT_U16:
	case TB_DT_U8:
		for (size_t i = 0; i < n; i++)
			dst[i] = (float)load_uint(p + (size_t)size * i, size, swap);
		return;
	case TB_DT_BOOL:
		for (size_t i = 0; i < n; i++)
			dst[i] = p[i] ? 1.0f : 0.0f;
		return;
	case TB_DT_COUNT:
		break;
	}
}
