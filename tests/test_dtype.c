#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tensor/dtype.h"

static void test_f16_edges(void **state)
{
	(void)state;
	assert_true(tb_f16_to_f32(0x0000) == 0.0f && !signbit(tb_f16_to_f32(0x0000)));
	assert_true(tb_f16_to_f32(0x8000) == 0.0f && signbit(tb_f16_to_f32(0x8000)));
	assert_true(tb_f16_to_f32(0x3C00) == 1.0f);
	assert_true(tb_f16_to_f32(0xC000) == -2.0f);
	assert_true(tb_f16_to_f32(0x7BFF) == 65504.0f);
	assert_true(tb_f16_to_f32(0x0001) == 0x1p-24f);    /* smallest subnormal */
	assert_true(tb_f16_to_f32(0x03FF) == 1023 * 0x1p-24f); /* largest subnormal */
	assert_true(tb_f16_to_f32(0x0400) == 0x1p-14f);    /* smallest normal */
	assert_true(isinf(tb_f16_to_f32(0x7C00)) && tb_f16_to_f32(0x7C00) > 0);
	assert_true(isinf(tb_f16_to_f32(0xFC00)) && tb_f16_to_f32(0xFC00) < 0);
	assert_true(isnan(tb_f16_to_f32(0x7E00)));
	assert_true(isnan(tb_f16_to_f32(0x7C01)));
}

static void test_f16_roundtrip(void **state)
{
	(void)state;
	for (uint32_t h = 0; h < 65536; h++) {
		float f = tb_f16_to_f32((uint16_t)h);
		if (isnan(f))
			continue;
		assert_int_equal(tb_f32_to_f16(f), h);
	}
	/* ties to even */
	assert_int_equal(tb_f32_to_f16(1.0f + 0x1p-11f), 0x3C00);
	assert_int_equal(tb_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3C02);
	assert_int_equal(tb_f32_to_f16(1e6f), 0x7C00);
}

static void test_bf16(void **state)
{
	(void)state;
	assert_true(tb_bf16_to_f32(0x3F80) == 1.0f);
	assert_true(tb_bf16_to_f32(0xC0A0) == -5.0f);
	assert_true(tb_bf16_to_f32(0x7F7F) == 0x1.FEp127f);
	assert_true(tb_bf16_to_f32(0x0001) == 0x1p-133f);
	assert_true(isinf(tb_bf16_to_f32(0x7F80)));
	assert_true(isnan(tb_bf16_to_f32(0x7FC0)));
	assert_int_equal(tb_f32_to_bf16(1.0f), 0x3F80);
	assert_int_equal(tb_f32_to_bf16(1.0f + 0x1p-8f), 0x3F80); /* tie to even */
	assert_int_equal(tb_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3F82);
	assert_int_equal(tb_f32_to_bf16(NAN), 0x7FC0);
}

static void test_f8(void **state)
{
	(void)state;
	assert_true(tb_f8e4m3fn_to_f32(0x7E) == 448.0f);
	assert_true(tb_f8e4m3fn_to_f32(0xFE) == -448.0f);
	assert_true(isnan(tb_f8e4m3fn_to_f32(0x7F)));
	assert_true(isnan(tb_f8e4m3fn_to_f32(0xFF)));
	assert_true(tb_f8e4m3fn_to_f32(0x78) == 256.0f); /* E=15 is still a normal exponent */
	assert_true(tb_f8e4m3fn_to_f32(0x01) == 0x1p-9f);
	assert_true(tb_f8e4m3fn_to_f32(0x08) == 0x1p-6f);
	assert_true(tb_f8e4m3fn_to_f32(0x38) == 1.0f);
	assert_true(tb_f8e5m2_to_f32(0x3C) == 1.0f);
	assert_true(tb_f8e5m2_to_f32(0x7B) == 57344.0f);
	assert_true(isinf(tb_f8e5m2_to_f32(0x7C)));
	assert_true(isnan(tb_f8e5m2_to_f32(0x7D)));
	assert_true(tb_f8e5m2_to_f32(0x01) == 0x1p-16f);
}

/* Rounding into fp8, checked against the decoders over every positive
 * code: each value rounds to itself, a point just inside either side of
 * the midpoint to its nearer neighbour, the midpoint to the even code
 * (the one with the low bit clear), and past the largest finite value to it. */
static void check_round_f8(tb_dtype dt, float (*decode)(uint8_t))
{
	float top = 0;

	for (int b = 0; b < 0x7F; b++) {
		float v = decode((uint8_t)b), w = decode((uint8_t)(b + 1)), mid = (v + w) / 2;
		if (!isfinite(w))
			break;
		top = w;
		assert_true(tb_f32_round_f8(v, dt) == v);
		assert_true(tb_f32_round_f8(-v, dt) == -v);
		assert_true(tb_f32_round_f8(nextafterf(mid, 0), dt) == v);
		assert_true(tb_f32_round_f8(nextafterf(mid, INFINITY), dt) == w);
		assert_true(tb_f32_round_f8(mid, dt) == (b & 1 ? w : v));
	}
	assert_true(tb_f32_round_f8(top, dt) == top);
	assert_true(tb_f32_round_f8(top * 1.5f, dt) == top);
	assert_true(tb_f32_round_f8(-INFINITY, dt) == -top);
	assert_true(isnan(tb_f32_round_f8(NAN, dt)));
}

static void test_round_f8(void **state)
{
	(void)state;
	check_round_f8(TB_DT_F8_E4M3FN, tb_f8e4m3fn_to_f32);
	check_round_f8(TB_DT_F8_E5M2, tb_f8e5m2_to_f32);
	assert_true(tb_f32_round_f8(0.3f, TB_DT_F8_E4M3FN) == 0.3125f);
	assert_true(tb_f32_round_f8(0.3f, TB_DT_F8_E5M2) == 0.3125f);
	assert_true(tb_f32_round_f8(470.0f, TB_DT_F8_E4M3FN) == 448.0f);
}

static void test_block_conversion(void **state)
{
	float out[4];
	(void)state;

	const unsigned char be_f32[8] = {0x3F, 0x80, 0, 0, 0xC0, 0x00, 0, 0};
	tb_dtype_to_f32(TB_DT_F32, be_f32, 2, true, out);
	assert_true(out[0] == 1.0f && out[1] == -2.0f);

	const unsigned char le_f64[8] = {0, 0, 0, 0, 0, 0, 0xF0, 0x3F};
	tb_dtype_to_f32(TB_DT_F64, le_f64, 1, false, out);
	assert_true(out[0] == 1.0f);

	const unsigned char i16[6] = {0xFF, 0xFF, 0x00, 0x80, 0xFF, 0x7F};
	tb_dtype_to_f32(TB_DT_I16, i16, 3, false, out);
	assert_true(out[0] == -1.0f && out[1] == -32768.0f && out[2] == 32767.0f);

	const unsigned char i64be[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE};
	tb_dtype_to_f32(TB_DT_I64, i64be, 1, true, out);
	assert_true(out[0] == -2.0f);

	const unsigned char u8[3] = {0, 7, 255};
	tb_dtype_to_f32(TB_DT_U8, u8, 3, false, out);
	assert_true(out[0] == 0 && out[1] == 7 && out[2] == 255);

	const unsigned char b[2] = {0, 1};
	tb_dtype_to_f32(TB_DT_BOOL, b, 2, false, out);
	assert_true(out[0] == 0 && out[1] == 1);

	const unsigned char bf16be[2] = {0x3F, 0x80};
	tb_dtype_to_f32(TB_DT_BF16, bf16be, 1, true, out);
	assert_true(out[0] == 1.0f);

	const unsigned char u32[4] = {0xFF, 0xFF, 0xFF, 0xFF};
	tb_dtype_to_f32(TB_DT_U32, u32, 1, false, out);
	assert_true(out[0] == 4294967296.0f);
}

static void test_names(void **state)
{
	tb_dtype dt;
	(void)state;
	assert_int_equal(tb_dtype_parse("bfloat16", &dt), 0);
	assert_int_equal(dt, TB_DT_BF16);
	assert_int_equal(tb_dtype_parse("BF16", &dt), 0);
	assert_int_equal(tb_dtype_parse("float8_e4m3fn", &dt), 0);
	assert_int_equal(dt, TB_DT_F8_E4M3FN);
	assert_int_equal(tb_dtype_parse("torch.float16", &dt), 0);
	assert_int_equal(dt, TB_DT_F16);
	assert_int_equal(tb_dtype_parse("complex64", &dt), -1);
	for (int i = 0; i < TB_DT_COUNT; i++) {
		assert_int_equal(tb_dtype_parse(tb_dtype_name((tb_dtype)i), &dt), 0);
		assert_int_equal(dt, i);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_f16_edges),  cmocka_unit_test(test_f16_roundtrip),
		cmocka_unit_test(test_bf16),       cmocka_unit_test(test_f8),
		cmocka_unit_test(test_round_f8),
		cmocka_unit_test(test_block_conversion), cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests_name("dtype", tests, NULL, NULL);
}
