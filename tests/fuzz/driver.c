/* driver.c - main() for the fuzz targets without libFuzzer: each file named,
 * or each file in each folder named, through LLVMFuzzerTestOneInput() once.
 * libFuzzer's own main() does the same with files as arguments, so
 * tests/fuzz/replay.sh runs either build the same way. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (!f) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	do {
		if (len == cap) {
			cap = cap ? 2 * cap : 4096;
			buf = realloc(buf, cap);
			if (!buf)
				abort();
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
	} while (n > 0);
	fclose(f);
	/* like libFuzzer: a copy of exactly the input's size, so ASan sees
	 * any read past its end */
	uint8_t *in = malloc(len ? len : 1);
	if (!in)
		abort();
	memcpy(in, buf, len);
	free(buf);
	LLVMFuzzerTestOneInput(in, len);
	free(in);
	return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
	int ran = 0, bad = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (argv[i][0] == '-') /* libFuzzer flags: nothing to do without it */
			continue;
		if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
			struct dirent **ents;
			int n = scandir(argv[i], &ents, NULL, by_name);

			if (n < 0) {
				fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
				bad++;
				continue;
			}
			for (int j = 0; j < n; j++) {
				char path[4096];

				if (ents[j]->d_name[0] != '.') {
					snprintf(path, sizeof(path), "%s/%s", argv[i], ents[j]->d_name);
					if (run_file(path) < 0)
						bad++;
					else
						ran++;
				}
				free(ents[j]);
			}
			free(ents);
		} else if (run_file(argv[i]) < 0) {
			bad++;
		} else {
			ran++;
		}
	}
	fprintf(stderr, "%s: %d input(s) replayed\n", argv[0], ran);
	return bad ? 1 : 0;
}
