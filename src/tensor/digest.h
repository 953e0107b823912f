/*
 * digest: a keyed 64-bit checksum of a tensor's values, which tells a
 * dump rewritten with the same values from a changed one (the history of
 * passes).  Not cryptographic.
 *
 * The values' bytes are taken as pairs of 32-bit little-endian words, the
 * q-th pair (a, b) adding (a + k1(q)) * (b + k2(q)) modulo 2^64, with
 * keys that step with q (NH, as in UMAC): one multiply per 8 bytes, so it
 * runs at several times memory speed, and the sum of a tensor's pieces is
 * the tensor's, so the comparison adds the digests of the rows it reads
 * while they are in cache, on any number of threads, instead of reading
 * both trees a second time.  One changed value changes the sum unless its
 * partner word plus key is 0 modulo 2^32 (a chance of 2^-32).
 */
#ifndef TB_DIGEST_H
#define TB_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "tensor/tensor.h"

/* Pieces start at multiples of this many bytes from the tensor's first. */
#define TB_DIGEST_ALIGN 8

/* The sum of the n bytes at p, which lie at byte offset off of the values
 * (a multiple of TB_DIGEST_ALIGN).  n need be a multiple of
 * TB_DIGEST_ALIGN only where more pieces follow: the last pair of words is
 * filled with zero bytes. */
uint64_t tb_digest_piece(uint64_t off, const void *p, size_t n);
/* The digest of n_bytes of values whose pieces' sums add up to sum. */
uint64_t tb_digest_final(uint64_t sum, uint64_t n_bytes);
/* Whose values tb_tensor_digest takes: the bytes in place
 * (tb_tensor_data), or float32 decoded (*elem_size 4) when there are none.
 * t acquired.  The bytes in place, or NULL. */
const void *tb_digest_source(const tb_tensor *t, size_t *elem_size);
/* The digest of t's values: of its bytes in place, else of its values as
 * float32; of its block hashes for a sketch.  -1 when t cannot be read. */
int tb_tensor_digest(tb_tensor *t, uint64_t *out, tb_err *err);

#endif
