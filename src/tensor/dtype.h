/*
 * dtype: the element types tbisect reads, their sizes, and exact conversion
 * of a block of elements to float32.
 *
 * Every value of every supported type except f64 and wide integers is
 * representable in binary32, so the conversion is exact for them; f64 and
 * 64-bit integers are rounded to nearest.  Pure functions, no state the
 * caller owns; the lookup tables are built once, thread-safely.
 */
#ifndef TB_DTYPE_H
#define TB_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum tb_dtype {
	TB_DT_F64,
	TB_DT_F32,
	TB_DT_F16,
	TB_DT_BF16,
	TB_DT_F8_E4M3FN,
	TB_DT_F8_E5M2,
	TB_DT_F8_E4M3FNUZ,
	TB_DT_F8_E5M2FNUZ,
	TB_DT_I64,
	TB_DT_I32,
	TB_DT_I16,
	TB_DT_I8,
	TB_DT_U64,
	TB_DT_U32,
	TB_DT_U16,
	TB_DT_U8,
	TB_DT_BOOL,
	TB_DT_COUNT
} tb_dtype;

/* Short canonical name: "f32", "bf16", "f8_e4m3fn", "i64", "bool", ... */
const char *tb_dtype_name(tb_dtype dt);
/* Bytes per element. */
size_t tb_dtype_size(tb_dtype dt);
bool tb_dtype_is_float(tb_dtype dt);
/* The relative rounding of a value stored in dt, as tolerances are floored
 * at it (2^-8 for bf16, 2^-11 for f16, 2^-23 for f32 and the integers). */
double tb_dtype_rounding(tb_dtype dt);
/* Accepts canonical names and common spellings ("float32", "bfloat16",
 * "float8_e4m3fn", "torch.float16", ...).  Returns 0, or -1 if unknown. */
int tb_dtype_parse(const char *name, tb_dtype *out);

/* Convert n elements at src (any alignment) to float32 at dst.  swap: the
 * source elements are big-endian (byte-swap before decoding). */
void tb_dtype_to_f32(tb_dtype dt, const void *src, size_t n, bool swap, float *dst);

/* Single-value decoders, exposed for tests and writers. */
float tb_f16_to_f32(uint16_t h);
float tb_bf16_to_f32(uint16_t h);
float tb_f8e4m3fn_to_f32(uint8_t b);
float tb_f8e5m2_to_f32(uint8_t b);
/* float32 to bf16 / f16 with round-to-nearest-even (for writers and tests). */
uint16_t tb_f32_to_bf16(float f);
uint16_t tb_f32_to_f16(float f);
/* x rounded to the fp8 type dt (f8_e4m3fn or f8_e5m2): to nearest, ties to
 * even, saturating at the type's largest finite value, as a saturating cast
 * into an fp8 KV cache stores it (the replay of a decode step reads it). */
float tb_f32_round_f8(float x, tb_dtype dt);

#endif
