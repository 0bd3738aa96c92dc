/* test_ptracer.c - PR_SET_PTRACER_ANY is taken only for single copy, and given back with the last communicator.
 *
 * This machine may have no Yama at all, so the test points the library at a
 * scope file of its own and stands in for prctl(2) (a definition here wins
 * over libc's for the library code linked into this program), recording
 * what the library asks for.  Then: the reference counting by hand, the
 * switch, other scopes, and two real 2-rank communicators (with a split)
 * over loopback, whose last destroy reverts it.
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/sd.h"
#include "transport/shm/shm.h"
#include "check.h"

static int set_any, set_zero; /* PR_SET_PTRACER calls seen */

int prctl(int option, ...)
{
	va_list ap;
	unsigned long a2, a3, a4, a5;

	va_start(ap, option);
	a2 = va_arg(ap, unsigned long);
	a3 = va_arg(ap, unsigned long);
	a4 = va_arg(ap, unsigned long);
	a5 = va_arg(ap, unsigned long);
	va_end(ap);
	if (option == PR_SET_PTRACER) {
		if (a2 == (unsigned long)PR_SET_PTRACER_ANY)
			set_any++;
		else if (a2 == 0)
			set_zero++;
		return 0;
	}
	return (int)syscall(SYS_prctl, option, a2, a3, a4, a5);
}

static char dir[64], scope_path[128], log_path[128];

static void write_scope(const char *v)
{
	FILE *f = fopen(scope_path, "w");

	if (f) {
		fputs(v, f);
		fclose(f);
	}
}

static int log_has(const char *s)
{
	char buf[65536];
	FILE *f = fopen(log_path, "r");
	size_t n = 0;

	if (f) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	return strstr(buf, s) != NULL;
}

static void by_hand(void)
{
	write_scope("1\n");
	CHECK(sd_shm_ptracer_hold(1) == 1 && set_any == 1, "scope 1: the first hold sets PR_SET_PTRACER_ANY");
	CHECK(log_has("[SMDDP INFO SHM] single copy: any process of user"), "and says so at INFO");
	CHECK(sd_shm_ptracer_hold(1) == 1 && set_any == 1 && sd_shm_ptracer_holders() == 2,
	      "a second hold counts, without another prctl");
	sd_shm_ptracer_release();
	CHECK(set_zero == 0 && sd_shm_ptracer_holders() == 1, "one release of two: still set");
	sd_shm_ptracer_release();
	CHECK(set_zero == 1 && sd_shm_ptracer_holders() == 0, "the last release reverts it (PR_SET_PTRACER 0)");
	CHECK(log_has("PR_SET_PTRACER_ANY reverted"), "and says so at INFO");
	sd_shm_ptracer_release();
	CHECK(set_zero == 1 && sd_shm_ptracer_holders() == 0, "a release too many does nothing");

	CHECK(sd_shm_ptracer_hold(0) == 0 && set_any == 1, "SMDDP_SINGLE_COPY_PTRACER=0: not set");
	CHECK(log_has("SMDDP_SINGLE_COPY_PTRACER=0, so peers may not read this process"), "and says why at INFO");
	write_scope("0\n");
	CHECK(sd_shm_ptracer_hold(1) == 0 && set_any == 1, "scope 0: nothing to do");
	write_scope("2\n");
	CHECK(sd_shm_ptracer_hold(1) == 0 && set_any == 1, "scope 2: nothing to do");
	unlink(scope_path);
	CHECK(sd_shm_ptracer_hold(1) == 0 && set_any == 1, "no Yama: nothing to do");
}

/* One rank of a 2-rank job over loopback: a communicator and a split of
 * it; exits 0 when the ptracer was held exactly while they lived. */
static int rank_main(int rank, int port, int single_copy)
{
	struct smddp_comm *c = NULL, *sub = NULL;
	char p[16];
	int rc, ok = 1;

	snprintf(p, sizeof(p), "%d", port);
	setenv("SMDDP_RANK", rank ? "1" : "0", 1);
	setenv("SMDDP_WORLD_SIZE", "2", 1);
	setenv("SMDDP_MASTER_ADDR", "127.0.0.1", 1);
	setenv("SMDDP_MASTER_PORT", p, 1);
	setenv("SMDDP_JOB_TOKEN", "test-ptracer-token", 1);
	setenv("SMDDP_SINGLE_COPY", single_copy ? "1" : "0", 1);
	setenv("SMDDP_TIMEOUT", "20", 1);
	set_any = set_zero = 0;
	write_scope("1\n");
	rc = smddp_init(&c);
	if (rc) {
		printf("FAIL rank %d: smddp_init: %s\n", rank, smddp_last_error(NULL));
		return 1;
	}
	rc = smddp_comm_split(c, 0, rank, &sub);
	if (rc) {
		printf("FAIL rank %d: split: %s\n", rank, smddp_last_error(c));
		return 1;
	}
	if (single_copy) {
		ok &= set_any == 1 && sd_shm_ptracer_holders() == 2;
		printf("%s rank %d: two communicators with single copy hold it (%d set, %d holders)\n",
		       ok ? "ok  " : "FAIL", rank, set_any, sd_shm_ptracer_holders());
	} else {
		ok &= set_any == 0 && sd_shm_ptracer_holders() == 0;
		printf("%s rank %d: SMDDP_SINGLE_COPY=0: never set (%d)\n", ok ? "ok  " : "FAIL", rank, set_any);
	}
	smddp_comm_destroy(sub);
	if (single_copy) {
		int k = set_zero == 0 && sd_shm_ptracer_holders() == 1;

		printf("%s rank %d: still set while the first communicator lives\n", k ? "ok  " : "FAIL", rank);
		ok &= k;
	}
	smddp_comm_destroy(c);
	if (single_copy) {
		int k = set_zero == 1 && sd_shm_ptracer_holders() == 0;

		printf("%s rank %d: reverted when the last one went (%d)\n", k ? "ok  " : "FAIL", rank, set_zero);
		ok &= k;
	}
	return ok ? 0 : 1;
}

static int free_port(void)
{
	struct sockaddr_in sa = {0};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

static void two_ranks(int single_copy)
{
	int port = free_port();
	pid_t pid[2];

	fflush(stdout);
	for (int r = 0; r < 2; r++) {
		pid[r] = fork();
		if (pid[r] == 0) {
			alarm(30);
			int rc = rank_main(r, port, single_copy);
			fflush(stdout);
			_exit(rc);
		}
	}
	for (int r = 0; r < 2; r++) {
		int st = 0;

		waitpid(pid[r], &st, 0);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d of the 2-rank job (single copy %d)", r,
		      single_copy);
	}
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	snprintf(dir, sizeof(dir), "/tmp/test_ptracer.XXXXXX");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 99;
	}
	snprintf(scope_path, sizeof(scope_path), "%s/ptrace_scope", dir);
	snprintf(log_path, sizeof(log_path), "%s/log", dir);
	sd_shm_yama_scope_path = scope_path;
	setenv("SMDDP_CONFIG", "/dev/null", 1);
	setenv("SMDDP_DEBUG", "INFO", 1);
	setenv("SMDDP_DEBUG_SUBSYS", "SHM", 1);
	setenv("SMDDP_DEBUG_FILE", log_path, 1);
	by_hand();
	two_ranks(1);
	two_ranks(0);
	unlink(scope_path);
	unlink(log_path);
	rmdir(dir);
	printf("test_ptracer: %s\n", failures ? "FAIL" : "PASS");
	return failures ? 1 : 0;
}
