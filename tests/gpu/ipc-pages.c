/* ipc-pages.c - does the way peers' buffers are mapped set the speed of the one-GPU
 * allreduce's kernel?  A probe of the dip of docs/internals/gpu-measurements.md.
 *
 * On one GPU the allreduce is one rank's kernel (lib/cuda/move.c, "who works"):
 * it reduces the N ranks' inputs into the N ranks' outputs, reading and
 * writing the peers' buffers through their IPC mappings.  With 2 N S bytes
 * through that kernel near 2 GiB (H100) or 4 GiB (H200), some runs are 1.3-1.5
 * times slower than others, each run keeping its speed, while one process
 * moving the same bytes through its own buffers never is.  The hypothesis is
 * address translation: pages of IPC mappings the driver may map small.  Here
 * N processes on GPU 0 each allocate an input and an output of S bytes,
 * process 0 maps the others' and runs lib/cuda's kernel over all 2N, the
 * way the worker does, for each way of allocating and mapping:
 *
 *   ipc    cudaMalloc, cudaIpcGetMemHandle / cudaIpcOpenMemHandle (the library's way)
 *   local  cudaMalloc of all 2N buffers in process 0: the same bytes, no IPC
 *   vmm    cuMemCreate at the driver's minimum granularity, shared as a file
 *          descriptor, mapped with cuMemMap
 *   vmm1g  the same, reserved and sized in whole GiB (room for the largest pages)
 *
 * Every round allocates anew (the speed changed between runs, never within
 * one) and runs each mode once, in turn; a line per mode and round: the
 * median of -n launches timed by CUDA events, and the rate of 2 N S bytes.
 * If the hypothesis holds, ipc shows both speeds across rounds, local and
 * vmm1g only the fast one.
 *
 * Usage: ipc-pages [-N RANKS] [-b BYTES] [-n ITERS] [-r ROUNDS] [-m MODE,...]
 *                  [-p const|bench]   (the inputs: one byte repeated, or the bench's data)
 * Exit 0; 1 on a CUDA or system error or a wrong sum; 2 usage; 77 without a GPU.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "clock/clock.h"
#include "config/param.h"
#include "util/sd.h"
#include "cuda/kernels.h"

#define MAXR 8
#define DEADLINE_S 120

enum mode { M_IPC, M_LOCAL, M_VMM, M_VMM1G, NMODES };
static const char *const mode_name[NMODES] = {"ipc", "local", "vmm", "vmm1g"};

/* What the processes share: a barrier, a failure flag, the legacy handles. */
struct shared {
	int arrived, gen, failed;
	cudaIpcMemHandle_t h[MAXR][2];
};

static struct shared *sh;
static int rank, nranks, sock[MAXR]; /* process 0: one end per peer; a peer: sock[0] */

static void die(const char *what, const char *why)
{
	fprintf(stderr, "ipc-pages: rank %d: %s: %s\n", rank, what, why);
	__atomic_store_n(&sh->failed, 1, __ATOMIC_RELEASE);
	exit(1);
}

#define CK(call)                                                                              \
	do {                                                                                  \
		cudaError_t e_ = (call);                                                      \
		if (e_ != cudaSuccess)                                                        \
			die(#call, cudaGetErrorString(e_));                                   \
	} while (0)
#define CU(call)                                                                              \
	do {                                                                                  \
		CUresult r_ = (call);                                                         \
		if (r_ != CUDA_SUCCESS) {                                                     \
			char m_[32];                                                          \
			snprintf(m_, sizeof(m_), "CUresult %d", (int)r_);                     \
			die(#call, m_);                                                       \
		}                                                                             \
	} while (0)

/* The driver's VMM calls, through the runtime (no -lcuda, as lib/cuda). */
static __typeof__(&cuMemCreate) p_create;
static __typeof__(&cuMemRelease) p_release;
static __typeof__(&cuMemAddressReserve) p_reserve;
static __typeof__(&cuMemAddressFree) p_addrfree;
static __typeof__(&cuMemMap) p_map;
static __typeof__(&cuMemUnmap) p_unmap;
static __typeof__(&cuMemSetAccess) p_access;
static __typeof__(&cuMemExportToShareableHandle) p_export;
static __typeof__(&cuMemImportFromShareableHandle) p_import;
static __typeof__(&cuMemGetAllocationGranularity) p_gran;

static void *entry(const char *name)
{
	enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
	void *fn = NULL;

	if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) !=
		    cudaSuccess ||
	    q != cudaDriverEntryPointSuccess || !fn)
		die(name, "not in this driver");
	return fn;
}

static void load_driver(void)
{
	p_create = entry("cuMemCreate");
	p_release = entry("cuMemRelease");
	p_reserve = entry("cuMemAddressReserve");
	p_addrfree = entry("cuMemAddressFree");
	p_map = entry("cuMemMap");
	p_unmap = entry("cuMemUnmap");
	p_access = entry("cuMemSetAccess");
	p_export = entry("cuMemExportToShareableHandle");
	p_import = entry("cuMemImportFromShareableHandle");
	p_gran = entry("cuMemGetAllocationGranularity");
}

/* All ranks here, or exit 1 after DEADLINE_S or once another failed. */
static void barrier(void)
{
	int g = __atomic_load_n(&sh->gen, __ATOMIC_ACQUIRE);
	double end = sd_now_s() + DEADLINE_S;

	if (__atomic_add_fetch(&sh->arrived, 1, __ATOMIC_ACQ_REL) == nranks) {
		__atomic_store_n(&sh->arrived, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&sh->gen, g + 1, __ATOMIC_RELEASE);
		return;
	}
	while (__atomic_load_n(&sh->gen, __ATOMIC_ACQUIRE) == g) {
		struct timespec ts = {0, 200000};

		if (__atomic_load_n(&sh->failed, __ATOMIC_ACQUIRE))
			exit(1); /* the one that failed said why */
		if (sd_now_s() > end)
			die("barrier", "a peer did not arrive within 120 s");
		nanosleep(&ts, NULL);
	}
}

static void send_fd(int s, int fd)
{
	char c = 0, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {&c, 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			   .msg_controllen = sizeof(ctl)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);

	memset(ctl, 0, sizeof(ctl));
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	while (sendmsg(s, &m, 0) < 0)
		if (errno != EINTR)
			die("sendmsg", strerror(errno));
}

static int recv_fd(int s)
{
	char c, ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {&c, 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			   .msg_controllen = sizeof(ctl)};
	struct cmsghdr *cm;
	int fd;
	ssize_t got;

	/* the sockets have a receive timeout (main) */
	while ((got = recvmsg(s, &m, 0)) < 0)
		if (errno != EINTR)
			die("recvmsg", strerror(errno));
	cm = CMSG_FIRSTHDR(&m);
	if (got != 1 || !cm || cm->cmsg_type != SCM_RIGHTS)
		die("recvmsg", "no descriptor came");
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

/* One buffer: cudaMalloc'd (or an opened IPC handle), or a VMM mapping. */
struct buf {
	void *p;
	size_t size; /* of the mapping */
	int vmm, opened;
	CUmemGenericAllocationHandle h;
};

static CUmemAllocationProp vmm_prop(void)
{
	CUmemAllocationProp prop;

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	return prop;
}

/* The size and alignment of a mode's VMM mapping of bytes. */
static size_t vmm_unit(enum mode m)
{
	CUmemAllocationProp prop = vmm_prop();
	size_t g = 0;

	CU(p_gran(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	return m == M_VMM1G ? (size_t)1 << 30 : g;
}

static void vmm_map(struct buf *b, enum mode m)
{
	size_t unit = vmm_unit(m);
	CUdeviceptr va;
	CUmemAccessDesc ad;

	memset(&ad, 0, sizeof(ad));
	ad.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	ad.location.id = 0;
	ad.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CU(p_reserve(&va, b->size, unit, 0, 0));
	CU(p_map(va, b->size, 0, b->h, 0));
	CU(p_access(va, b->size, &ad, 1));
	b->p = (void *)(uintptr_t)va;
}

static void alloc_buf(struct buf *b, size_t bytes, enum mode m)
{
	memset(b, 0, sizeof(*b));
	if (m == M_IPC || m == M_LOCAL) {
		b->size = bytes;
		CK(cudaMalloc(&b->p, bytes));
		return;
	}
	CUmemAllocationProp prop = vmm_prop();
	size_t unit = vmm_unit(m);

	b->vmm = 1;
	b->size = (bytes + unit - 1) / unit * unit;
	CU(p_create(&b->h, b->size, &prop, 0));
	vmm_map(b, m);
}

static void free_buf(struct buf *b)
{
	if (!b->p)
		return;
	if (b->vmm) {
		CU(p_unmap((CUdeviceptr)(uintptr_t)b->p, b->size));
		CU(p_addrfree((CUdeviceptr)(uintptr_t)b->p, b->size));
		CU(p_release(b->h));
	} else if (b->opened) {
		CK(cudaIpcCloseMemHandle(b->p));
	} else {
		CK(cudaFree(b->p));
	}
	b->p = NULL;
}

static int cmpf(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

#define FILL 0x3c /* every byte: each float32 is 0x3c3c3c3c, about 0.0115 */
/* -p bench: the inputs hold smddp-allreduce-bench's float sum pattern
 * (bench_data.c: integers -8..8, period 17, shifted by rank) in chunks of
 * CHUNK elements, as the bench's buffers do, instead of one byte repeated:
 * does the data set the speed? */
#define CHUNK (256u << 10)
static int bench_data;

static float pattern(int q, size_t i)
{
	return (float)((int)((i % CHUNK * 7 + (size_t)q * 13 + 5) % 17) - 8);
}

static void fill_input(void *p, size_t bytes, int q)
{
	static float *h;

	if (!bench_data) {
		CK(cudaMemset(p, FILL, bytes));
		return;
	}
	if (!h && !(h = malloc(CHUNK * sizeof(float))))
		die("malloc", strerror(errno));
	for (size_t i = 0; i < CHUNK; i++)
		h[i] = pattern(q, i);
	for (size_t off = 0; off < bytes; off += CHUNK * sizeof(float)) {
		size_t n = bytes - off < CHUNK * sizeof(float) ? bytes - off : CHUNK * sizeof(float);

		CK(cudaMemcpy((char *)p + off, h, n, cudaMemcpyHostToDevice));
	}
}

/* The sum the kernel leaves at element i of every output. */
static float want_at(size_t i)
{
	float v, want = 0;

	memset(&v, FILL, sizeof(v));
	for (int q = 0; q < nranks; q++)
		want += bench_data ? pattern(q, i) : v;
	return want;
}

/* Process 0: the kernel over the 2N buffers, -n times; the median in us. */
static float run_kernel(struct buf *in, struct buf *out, size_t bytes, int iters)
{
	struct sd_cuda_kargs a;
	cudaStream_t st;
	cudaEvent_t e0, e1;
	float ms[1000], want, got[4];

	memset(&a, 0, sizeof(a));
	for (int q = 0; q < nranks; q++) {
		a.src[q] = in[q].p;
		a.dst[q] = out[q].p;
	}
	a.nsrc = a.ndst = nranks;
	a.count = bytes / 4;
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	CK(cudaEventCreate(&e0));
	CK(cudaEventCreate(&e1));
	for (int i = 0; i < 3; i++)
		CK((cudaError_t)sd_cuda_kernel_reduce(&a, SMDDP_FLOAT32, SMDDP_SUM, 1, st, 0));
	for (int i = 0; i < iters; i++) {
		CK(cudaEventRecord(e0, st));
		CK((cudaError_t)sd_cuda_kernel_reduce(&a, SMDDP_FLOAT32, SMDDP_SUM, 1, st, 0));
		CK(cudaEventRecord(e1, st));
		CK(cudaEventSynchronize(e1));
		CK(cudaEventElapsedTime(&ms[i], e0, e1));
	}
	/* the sum, left to right as the kernel adds, at both ends of every output */
	for (int q = 0; q < nranks; q++) {
		CK(cudaMemcpy(&got[0], out[q].p, 2 * sizeof(float), cudaMemcpyDeviceToHost));
		CK(cudaMemcpy(&got[2], (char *)out[q].p + bytes - 2 * sizeof(float),
			      2 * sizeof(float), cudaMemcpyDeviceToHost));
		for (int i = 0; i < 4; i++)
			if (got[i] != (want = want_at(i < 2 ? (size_t)i : a.count - 4 + (size_t)i))) {
				char m[96];

				snprintf(m, sizeof(m), "output of rank %d holds %g, not %g", q,
					 (double)got[i], (double)want);
				die("check", m);
			}
	}
	cudaEventDestroy(e0);
	cudaEventDestroy(e1);
	cudaStreamDestroy(st);
	qsort(ms, (size_t)iters, sizeof(float), cmpf);
	return ms[iters / 2] * 1000.0f;
}

/* One mode, one round, on every rank. */
static void one(enum mode m, int round, size_t bytes, int iters)
{
	struct buf in[MAXR], out[MAXR];
	int mine = m == M_LOCAL ? rank == 0 : 1;

	memset(in, 0, sizeof(in));
	memset(out, 0, sizeof(out));
	if (mine)
		for (int q = m == M_LOCAL ? 0 : rank; q < (m == M_LOCAL ? nranks : rank + 1); q++) {
			alloc_buf(&in[q], bytes, m);
			alloc_buf(&out[q], bytes, m);
			fill_input(in[q].p, bytes, q);
			CK(cudaMemset(out[q].p, 0, bytes));
		}
	CK(cudaDeviceSynchronize());
	if (m == M_IPC && rank) {
		CK(cudaIpcGetMemHandle(&sh->h[rank][0], in[rank].p));
		CK(cudaIpcGetMemHandle(&sh->h[rank][1], out[rank].p));
	}
	if ((m == M_VMM || m == M_VMM1G) && rank)
		for (int k = 0; k < 2; k++) {
			struct buf *b = k ? &out[rank] : &in[rank];
			int fd = -1;

			CU(p_export(&fd, b->h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
			send_fd(sock[0], fd);
			close(fd);
		}
	barrier(); /* the peers' buffers are filled and shared */
	if (rank == 0) {
		for (int q = 1; q < nranks && m != M_LOCAL; q++)
			for (int k = 0; k < 2; k++) {
				struct buf *b = k ? &out[q] : &in[q];

				if (m == M_IPC) {
					CK(cudaIpcOpenMemHandle(&b->p, sh->h[q][k],
								cudaIpcMemLazyEnablePeerAccess));
					b->opened = 1;
					b->size = bytes;
					continue;
				}
				int fd = recv_fd(sock[q]);
				size_t unit = vmm_unit(m);

				b->vmm = 1;
				b->size = (bytes + unit - 1) / unit * unit;
				CU(p_import(&b->h, (void *)(uintptr_t)fd,
					    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
				close(fd);
				vmm_map(b, m);
			}
		float us = run_kernel(in, out, bytes, iters);
		double through = 2.0 * nranks * (double)bytes;

		printf("%-6s %5d %5d %10zu %12.1f %8.2f\n", mode_name[m], round, nranks,
		       bytes >> 20, (double)us, through / (us * 1e-6) / 1e12);
		fflush(stdout);
		for (int q = 1; q < nranks && m != M_LOCAL; q++) {
			free_buf(&in[q]);
			free_buf(&out[q]);
		}
	}
	barrier(); /* process 0 is done with the peers' buffers */
	for (int q = 0; q < nranks; q++)
		if (mine) {
			free_buf(&in[q]);
			free_buf(&out[q]);
		}
	CK(cudaDeviceSynchronize());
}

static int usage(FILE *f, int rc)
{
	fprintf(f, "usage: ipc-pages [-N RANKS (2-%d)] [-b BYTES] [-n ITERS (<=1000)] "
		   "[-r ROUNDS] [-m ipc,local,vmm,vmm1g] [-p const|bench]\n",
		MAXR);
	return rc;
}

int main(int argc, char **argv)
{
	uint64_t bytes = 256ull << 20;
	int iters = 20, rounds = 4, want[NMODES] = {1, 1, 1, 1}, opt, ngpu = 0, bad = 0;
	pid_t pid[MAXR];
	struct timeval tv = {DEADLINE_S, 0};
	int64_t v;

	nranks = 4;
	while ((opt = getopt(argc, argv, "N:b:n:r:m:p:h")) != -1) {
		switch (opt) {
		case 'N':
			if (sd_parse_int(optarg, &v) || v < 2 || v > MAXR)
				return usage(stderr, 2);
			nranks = (int)v;
			break;
		case 'b':
			if (sd_parse_size(optarg, &bytes) || bytes < 4096 || bytes % 16)
				return usage(stderr, 2);
			break;
		case 'n':
			if (sd_parse_int(optarg, &v) || v < 1 || v > 1000)
				return usage(stderr, 2);
			iters = (int)v;
			break;
		case 'r':
			if (sd_parse_int(optarg, &v) || v < 1 || v > 100)
				return usage(stderr, 2);
			rounds = (int)v;
			break;
		case 'm':
			memset(want, 0, sizeof(want));
			for (char *t = strtok(optarg, ","); t; t = strtok(NULL, ",")) {
				int k = 0;

				while (k < NMODES && strcmp(t, mode_name[k]))
					k++;
				if (k == NMODES)
					return usage(stderr, 2);
				want[k] = 1;
			}
			break;
		case 'p':
			if (strcmp(optarg, "const") && strcmp(optarg, "bench"))
				return usage(stderr, 2);
			bench_data = !strcmp(optarg, "bench");
			break;
		case 'h':
			return usage(stdout, 0);
		default:
			return usage(stderr, 2);
		}
	}
	if (optind != argc)
		return usage(stderr, 2);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("ipc-pages: mmap");
		return 1;
	}
	/* CUDA is touched after the fork only: a forked child cannot use it. */
	for (int q = 1; q < nranks; q++) {
		int sv[2];

		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
			perror("ipc-pages: socketpair");
			return 1;
		}
		setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		pid[q] = fork();
		if (pid[q] < 0) {
			perror("ipc-pages: fork");
			__atomic_store_n(&sh->failed, 1, __ATOMIC_RELEASE);
			nranks = q; /* reap those already made */
			bad = 1;
			break;
		}
		if (pid[q] == 0) {
			for (int p = 1; p < q; p++)
				close(sock[p]);
			close(sv[0]);
			sock[0] = sv[1];
			rank = q;
			break;
		}
		close(sv[1]);
		sock[q] = sv[0];
	}
	if (bad)
		goto reap;
	if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < 1) {
		if (rank)
			_exit(77);
		printf("SKIP: no GPU\n");
		bad = 77;
		goto reap;
	}
	CK(cudaSetDevice(0));
	CK(cudaFree(NULL));
	load_driver();
	if (rank == 0)
		printf("# ipc-pages: %d ranks on GPU 0, %zu MiB per buffer, 2 N S = %.2f GiB "
		       "through the kernel; vmm granularity %zu KiB\n"
		       "# mode  round ranks   size_MiB      time_us     TB/s\n",
		       nranks, (size_t)(bytes >> 20), 2.0 * nranks * (double)bytes / (1 << 30),
		       vmm_unit(M_VMM) >> 10);
	for (int r = 0; r < rounds; r++)
		for (int m = 0; m < NMODES; m++)
			if (want[m])
				one((enum mode)m, r, (size_t)bytes, iters);
	if (rank)
		_exit(0);
reap:
	for (int q = 1; q < nranks; q++) {
		int st = 0;
		double end = sd_now_s() + DEADLINE_S + 10;

		while (waitpid(pid[q], &st, WNOHANG) == 0) {
			struct timespec ts = {0, 10000000};

			if (sd_now_s() > end || bad == 1) {
				kill(pid[q], SIGKILL);
				waitpid(pid[q], &st, 0);
				break;
			}
			nanosleep(&ts, NULL);
		}
		if (bad != 77 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
			bad = 1;
	}
	return bad;
}
