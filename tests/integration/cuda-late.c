/* cuda-late.c - a CUDA driver that the process loads after its first calls is noticed (cuda-late.sh).
 *
 *   cuda-late DRIVER [OTHER]
 *
 * Calls on host memory, loads OTHER (an object that is not the driver)
 * and calls again if given, then loads DRIVER (a stand-in whose soname is
 * libcuda.so.1, tests/integration/fakedrv.c) and marks a buffer as device
 * memory: the next call on it must be refused as device memory in a build
 * without CUDA (a call that took it for host memory would read it as
 * such), while host buffers still work.  Prints CUDA-LATE-OK. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <smddp/smddp.h>

static int calls(struct smddp_comm *c, const char *when)
{
	float a[2] = {1, 2}, b[4];
	int rc;

	for (int i = 0; i < 3; i++) {
		if ((rc = smddp_broadcast(a, 2, SMDDP_FLOAT32, 0, c, NULL)) ||
		    (rc = smddp_allreduce(a, b, 2, SMDDP_FLOAT32, SMDDP_SUM, c, NULL)) ||
		    (rc = smddp_allgather(a, b, 2, SMDDP_FLOAT32, c, NULL)) ||
		    (rc = smddp_reduce(a, b, 2, SMDDP_FLOAT32, SMDDP_SUM, 0, c, NULL))) {
			printf("CUDA-LATE-BAD %s: host call: %s\n", when, smddp_last_error(c));
			return 1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct smddp_comm *c;
	static float dev[2];
	void (*mark)(const void *);
	void *h;
	int rc;

	if (argc < 2) {
		fprintf(stderr, "usage: cuda-late DRIVER [OTHER]\n");
		return 2;
	}
	if ((rc = smddp_init(&c))) {
		printf("CUDA-LATE-BAD init: %s\n", smddp_last_error(NULL));
		return 1;
	}
	if (calls(c, "before"))
		return 1;
	if (argc > 2) {
		if (!dlopen(argv[2], RTLD_NOW | RTLD_LOCAL)) {
			printf("CUDA-LATE-BAD dlopen %s: %s\n", argv[2], dlerror());
			return 1;
		}
		if (calls(c, "after the other object"))
			return 1;
	}
	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	mark = h ? (void (*)(const void *))dlsym(h, "fakedrv_mark") : NULL;
	if (!mark) {
		printf("CUDA-LATE-BAD dlopen %s: %s\n", argv[1], dlerror());
		return 1;
	}
	mark(dev);
	rc = smddp_broadcast(dev, 2, SMDDP_FLOAT32, 0, c, NULL);
	if (rc != SMDDP_EUNSUPPORTED || !strstr(smddp_last_error(c), "CUDA device memory")) {
		printf("CUDA-LATE-BAD device buffer after the driver's load: %d (%s)\n", rc,
		       rc ? smddp_last_error(c) : "taken for host memory");
		return 1;
	}
	rc = smddp_allreduce(dev, dev, 2, SMDDP_FLOAT32, SMDDP_SUM, c, NULL);
	if (rc != SMDDP_EUNSUPPORTED) {
		printf("CUDA-LATE-BAD allreduce on the device buffer: %d\n", rc);
		return 1;
	}
	if (calls(c, "after the driver"))
		return 1;
	if ((rc = smddp_comm_destroy(c))) {
		printf("CUDA-LATE-BAD destroy: %d\n", rc);
		return 1;
	}
	printf("CUDA-LATE-OK\n");
	return 0;
}
