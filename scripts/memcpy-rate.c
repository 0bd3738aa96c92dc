/* scripts/memcpy-rate.c - the roof of single-copy transfers: memcpy's rate, or process_vm_readv's.
 *
 * usage: memcpy-rate BYTES [REPEATS [cma]]   (BYTES a plain number)
 * Copies BYTES between two buffers of its own REPEATS times (default 10)
 * after one untimed copy and prints the median rate in GB/s (10^9 bytes
 * per second).  With "cma" the source lies in a child process and is read
 * with process_vm_readv in calls of 512 KiB, as libsmddp's single copy
 * reads a peer's buffer of more than 4 MiB.  scripts/bench-p2p-node.sh
 * runs one per rank at once, as the ranks of a sendrecv copy at once.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CALL (512 * 1024)

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* A child holding BYTES of 1s; its address comes back through a pipe. */
static pid_t child_with(size_t bytes, uintptr_t *addr)
{
	int fd[2];
	pid_t pid, parent = getpid();

	if (pipe(fd) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		char *src;

		/* gone with the parent, however it ends */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
			_exit(1);
		src = malloc(bytes);
		uintptr_t a = (uintptr_t)src;

		if (src)
			memset(src, 1, bytes);
		if (write(fd[1], &a, sizeof(a)) != (ssize_t)sizeof(a))
			_exit(1);
		pause(); /* until the parent's SIGKILL */
		_exit(0);
	}
	close(fd[1]);
	if (pid < 0 || read(fd[0], addr, sizeof(*addr)) != (ssize_t)sizeof(*addr) || !*addr) {
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
		pid = -1;
	}
	close(fd[0]);
	return pid;
}

static int copy(pid_t pid, char *dst, const char *src, uintptr_t remote, size_t bytes)
{
	if (pid <= 0) {
		memcpy(dst, src, bytes);
		return 0;
	}
	for (size_t off = 0; off < bytes; off += CALL) {
		size_t len = bytes - off < CALL ? bytes - off : CALL;
		struct iovec l = {dst + off, len}, r = {(void *)(remote + off), len};

		if (process_vm_readv(pid, &l, 1, &r, 1, 0) != (ssize_t)len)
			return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	size_t bytes = 0;
	int reps, cma, bad = 0;
	char *src = NULL, *dst;
	double *secs;
	uintptr_t remote = 0;
	pid_t pid = 0;

	char *end = NULL;

	cma = argc == 4 && strcmp(argv[3], "cma") == 0;
	if (argc >= 2)
		bytes = strtoull(argv[1], &end, 0);
	if (argc < 2 || argc > 4 || (argc == 4 && !cma) || bytes == 0 || *end ||
	    (reps = argc >= 3 ? atoi(argv[2]) : 10) < 1) {
		fprintf(stderr, "usage: memcpy-rate BYTES [REPEATS [cma]]\n");
		return 2;
	}
	dst = malloc(bytes);
	secs = calloc((size_t)reps, sizeof(*secs));
	if (cma)
		pid = child_with(bytes, &remote);
	else if ((src = malloc(bytes)))
		memset(src, 1, bytes);
	if (!dst || !secs || (cma ? pid <= 0 : !src)) {
		fprintf(stderr, "memcpy-rate: cannot set up 2 x %zu bytes%s\n", bytes,
			cma ? " across two processes" : "");
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
		return 1;
	}
	memset(dst, 2, bytes);
	bad |= copy(pid, dst, src, remote, bytes);
	for (int i = 0; i < reps && !bad; i++) {
		struct timespec t0, t1;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		bad |= copy(pid, dst, src, remote, bytes);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		secs[i] = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
	}
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	if (bad || dst[bytes / 2] != 1) {
		fprintf(stderr, "memcpy-rate: the copy failed or copied wrong bytes\n");
		return 1;
	}
	qsort(secs, (size_t)reps, sizeof(*secs), cmp);
	printf("%.2f\n", (double)bytes / secs[reps / 2] / 1e9);
	return 0;
}
