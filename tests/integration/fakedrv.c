/* fakedrv.c - a stand-in for the CUDA driver's pointer query, loaded by cuda-late (cuda-late.sh).
 *
 * Built twice: fakecuda/libcuda.so.1, the name that the library's probe
 * looks for; libfakeplain.so, any other object. */
#include <stdint.h>

static const void *marked;

/* The next queries answer "device memory" for p. */
void fakedrv_mark(const void *p)
{
	marked = p;
}

/* CU_POINTER_ATTRIBUTE_MEMORY_TYPE (2) and _IS_MANAGED (8), as the probe asks. */
int cuPointerGetAttributes(unsigned int n, int *attributes, void **data, unsigned long long ptr)
{
	for (unsigned int i = 0; i < n; i++) {
		unsigned int *v = data[i];

		if (attributes[i] == 2)
			*v = marked && (uintptr_t)marked == ptr ? 2 : 0;
		else
			*v = 0;
	}
	return 0;
}
