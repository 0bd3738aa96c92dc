/* fuzz.c - the helpers of fuzz.h. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"

char *fuzz_text(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

const char *fuzz_file(int slot, const void *data, size_t size)
{
	static int fds[4] = {-1, -1, -1, -1};
	static char paths[4][64];

	if (slot < 0 || slot >= 4)
		abort();
	if (fds[slot] < 0) {
		fds[slot] = memfd_create("fuzz", 0);
		if (fds[slot] < 0) {
			perror("memfd_create");
			abort();
		}
		snprintf(paths[slot], sizeof(paths[slot]), "/proc/self/fd/%d", fds[slot]);
	}
	if (ftruncate(fds[slot], 0) < 0 || pwrite(fds[slot], data, size, 0) != (ssize_t)size) {
		perror("fuzz_file");
		abort();
	}
	return paths[slot];
}

size_t fuzz_split(const uint8_t *data, size_t size, const uint8_t **part, size_t *len, size_t max)
{
	static const char sep[] = "\n%%\n";
	size_t n = 0, start = 0;

	if (max == 0)
		return 0;
	for (size_t i = 0; i + 4 <= size && n + 1 < max; i++) {
		if (memcmp(data + i, sep, 4) == 0) {
			part[n] = data + start;
			len[n++] = i - start;
			start = i + 4;
			i += 3;
		}
	}
	part[n] = data + start;
	len[n++] = size - start;
	return n;
}

int fuzz_fd_mark(void)
{
	int fd = fcntl(0, F_DUPFD_CLOEXEC, 0);

	if (fd >= 0)
		close(fd);
	return fd; /* the lowest free descriptor */
}

void fuzz_close_from(int mark)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	if (!d || mark < 0)
		abort();
	while ((e = readdir(d))) {
		int fd = atoi(e->d_name);

		if (e->d_name[0] != '.' && fd >= mark && fd != dirfd(d))
			close(fd);
	}
	closedir(d);
}
