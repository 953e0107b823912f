#include "config.h"

#include <string.h>

#include "base/onnxname.h"

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_alpha(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

/* Index past a run of digits from i. */
static size_t digits(const char *s, size_t n, size_t i)
{
	while (i < n && is_digit(s[i]))
		i++;
	return i;
}

bool tb_onnx_output_name(const char *s, size_t n)
{
	static const char tag[] = "_output_";
	const size_t tlen = sizeof tag - 1;
	size_t i = 1;

	if (n == 0 || s[0] < 'A' || s[0] > 'Z')
		return false;
	while (i < n && is_alpha(s[i]))
		i++;
	/* "_K" numbers the op's repeats within its module ("Add_1"). */
	if (i + 1 < n && s[i] == '_' && is_digit(s[i + 1]))
		i = digits(s, n, i + 1);
	if (n - i <= tlen || memcmp(s + i, tag, tlen))
		return false;
	return digits(s, n, i + tlen) == n;
}
