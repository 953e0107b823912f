/*
 * jsonq: print one value of a JSON document, for shell tests.
 *   jsonq FILE PATH     PATH like  first_divergence.tap  or  cells.3.status  or  cells.#
 * Strings print raw, numbers with %.17g, null as "null", objects and arrays as
 * compact JSON; "#" prints an array's length.  Exit 1 when the path is absent.
 */
#include "config.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *slurp(const char *path)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	size_t cap = 1 << 16, n = 0, k;
	char *buf = malloc(cap);

	if (!f || !buf)
		return NULL;
	while ((k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
		n += k;
		if (n + 1 == cap && !(buf = realloc(buf, cap *= 2)))
			return NULL;
	}
	buf[n] = '\0';
	if (f != stdin)
		fclose(f);
	return buf;
}

int main(int argc, char **argv)
{
	char *text, *path, *tok, *save;
	cJSON *root, *v;
	bool counted = false;
	int rc = 0;

	if (argc != 3) {
		fprintf(stderr, "usage: jsonq FILE PATH\n");
		return 2;
	}
	text = slurp(argv[1]);
	root = text ? cJSON_Parse(text) : NULL;
	if (!root) {
		fprintf(stderr, "jsonq: %s: not JSON\n", argv[1]);
		free(text);
		return 2;
	}
	v = root;
	path = strdup(argv[2]);
	for (tok = strtok_r(path, ".", &save); tok && v; tok = strtok_r(NULL, ".", &save)) {
		if (!strcmp(tok, "#") && cJSON_IsArray(v)) {
			printf("%d\n", cJSON_GetArraySize(v));
			counted = true;
			break;
		}
		if (cJSON_IsArray(v))
			v = cJSON_GetArrayItem(v, atoi(tok));
		else
			v = cJSON_GetObjectItemCaseSensitive(v, tok);
	}
	if (counted)
		;
	else if (!v)
		rc = 1;
	else if (cJSON_IsString(v))
		printf("%s\n", v->valuestring);
	else if (cJSON_IsNumber(v))
		printf("%.17g\n", v->valuedouble);
	else {
		char *s = cJSON_PrintUnformatted(v);
		printf("%s\n", s);
		free(s);
	}
	free(path);
	cJSON_Delete(root);
	free(text);
	return rc;
}
