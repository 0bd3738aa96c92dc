/* sanitizer.c - whether NVIDIA compute-sanitizer is loaded into this process, for SMDDP_CUDA_ASYNC=auto.
 *
 * The CUDA driver loads a tool into a process through the library that
 * CUDA_INJECTION64_PATH names, when the process initializes CUDA.
 * compute-sanitizer sets it for the program it runs to its own library,
 * libsanitizer-collection.so, installed beside the tool in the toolkit's
 * compute-sanitizer/ folder (its "Unable to find injection library
 * libsanitizer-collection.so" is that load failing).  Other tools inject
 * themselves the same way (Nsight Systems, Nsight Compute, CUPTI-based
 * profilers) and are not matched: only the sanitizer's memcheck is known to
 * stop the queued mode's kernels (state.c, say_sanitizer()).
 * Libc only, so that the unit tests build it without CUDA.
 */
#include "config.h"

#include <string.h>

#include "cuda/cuda.h"

/* One path of the value: compute-sanitizer's when its file name starts
 * with "libsanitizer" or it lies in a folder named compute-sanitizer. */
static int sanitizer_path(const char *p, size_t len)
{
	static const char dir[] = "compute-sanitizer/", lib[] = "libsanitizer";
	size_t name = len;

	while (name > 0 && p[name - 1] != '/')
		name--;
	if (len - name >= sizeof(lib) - 1 && !memcmp(p + name, lib, sizeof(lib) - 1))
		return 1;
	/* A folder named exactly compute-sanitizer: at the start or after '/'. */
	for (size_t i = 0; i + sizeof(dir) - 1 <= name; i++)
		if ((i == 0 || p[i - 1] == '/') && !memcmp(p + i, dir, sizeof(dir) - 1))
			return 1;
	return 0;
}

int sd_cuda_sanitizer(const char *inject)
{
	const char *p = inject;

	if (!p)
		return 0;
	/* A list of paths (':' or ';' between them) is read path by path. */
	while (*p) {
		size_t len = strcspn(p, ":;");

		if (len && sanitizer_path(p, len))
			return 1;
		p += len;
		if (*p)
			p++;
	}
	return 0;
}
