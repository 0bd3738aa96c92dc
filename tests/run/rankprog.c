/* tests/run/rankprog.c - a scriptable rank for the smddp-run tests
 *
 * rankprog ACTION [ARGS]... runs the actions in order; RANK is SMDDP_RANK.
 *   env NAME           print "NAME=value", or "NAME unset", on stdout
 *   out TEXT           print TEXT and a newline on stdout
 *   err TEXT           print TEXT and a newline on stderr
 *   part TEXT          print TEXT on stdout without a newline
 *   lines N LEN        print N lines "RANK i xxx..." (LEN x's) on stdout
 *   elines N LEN       the same on stderr
 *   pid DIR            write our pid to DIR/pid.RANK
 *   waitn DIR N        wait (at most 30 s) until DIR holds N pid.* files
 *   child DIR          fork a child that sleeps 600 s, keeping our stdio and
 *                      process group; its pid in DIR/child.RANK
 *   daemon DIR         the same, but in a new session with stdio on /dev/null
 *   exit-if R CODE     exit CODE if RANK is R
 *   kill-if R SIG      kill ourselves with SIG if RANK is R
 *   ignore SIG         ignore SIG
 *   catch SIG DIR      on SIG, create DIR/got.RANK and exit 0
 *   shm NAME           create /dev/shm/smddp-$SMDDP_JOB_ID-NAME.RANK
 *   sleep SECONDS      sleep (resumed after handled signals)
 *   stdio              from here on, leave stdout to stdio's buffering: no
 *                      flush after each action or before sleep (a C program
 *                      that just calls printf)
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/types.h>

static int rank = -1;
static int flush_actions = 1;   /* "stdio" turns it off */
static char catch_path[4096];

static void die(const char *what)
{
	fprintf(stderr, "rankprog: %s: %s\n", what, strerror(errno));
	exit(99);
}

static void write_pid_file(const char *dir, const char *what, pid_t pid)
{
	char tmp[4096], path[4096];
	snprintf(path, sizeof path, "%s/%s.%d", dir, what, rank);
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f)
		die(tmp);
	fprintf(f, "%d\n", (int)pid);
	if (fclose(f) != 0 || rename(tmp, path) != 0)
		die(path);
}

static void on_signal(int sig)
{
	int fd = open(catch_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0)
		close(fd);
	_exit(0);
}

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (time_t)s) * 1e9) };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void need(int argc, int i, int n)
{
	if (i + n >= argc) {
		fprintf(stderr, "rankprog: missing arguments\n");
		exit(98);
	}
}

int main(int argc, char **argv)
{
	const char *r = getenv("SMDDP_RANK");
	rank = r ? atoi(r) : -1;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "env")) {
			need(argc, i, 1);
			const char *v = getenv(argv[++i]);
			if (v)
				printf("%s=%s\n", argv[i], v);
			else
				printf("%s unset\n", argv[i]);
		} else if (!strcmp(a, "out")) {
			need(argc, i, 1);
			printf("%s\n", argv[++i]);
		} else if (!strcmp(a, "err")) {
			need(argc, i, 1);
			fprintf(stderr, "%s\n", argv[++i]);
		} else if (!strcmp(a, "part")) {
			need(argc, i, 1);
			fputs(argv[++i], stdout);
		} else if (!strcmp(a, "lines") || !strcmp(a, "elines")) {
			need(argc, i, 2);
			FILE *f = a[0] == 'e' ? stderr : stdout;
			int n = atoi(argv[++i]), len = atoi(argv[++i]);
			char *x = malloc(len + 1);
			memset(x, 'x', len);
			x[len] = '\0';
			for (int k = 0; k < n; k++) {
				fprintf(f, "%d %d %s\n", rank, k, x);
				if (k % 7 == 0)
					fflush(f);   /* vary the chunking */
			}
			free(x);
		} else if (!strcmp(a, "pid")) {
			need(argc, i, 1);
			write_pid_file(argv[++i], "pid", getpid());
		} else if (!strcmp(a, "waitn")) {
			need(argc, i, 2);
			const char *dir = argv[++i];
			int n = atoi(argv[++i]), have = 0;
			for (int t = 0; t < 3000 && have < n; t++) {
				have = 0;
				for (int k = 0; k < 4096 && have < n; k++) {
					char path[4096];
					snprintf(path, sizeof path, "%s/pid.%d", dir, k);
					have += access(path, F_OK) == 0;
				}
				if (have < n)
					sleep_s(0.01);
			}
			if (have < n) {
				fprintf(stderr, "rankprog: only %d of %d pid files\n", have, n);
				return 97;
			}
		} else if (!strcmp(a, "child") || !strcmp(a, "daemon")) {
			need(argc, i, 1);
			int daemonize = a[0] == 'd';
			fflush(NULL);
			pid_t pid = fork();
			if (pid < 0)
				die("fork");
			if (pid == 0) {
				if (daemonize) {
					setsid();
					int fd = open("/dev/null", O_RDWR);
					dup2(fd, 0);
					dup2(fd, 1);
					dup2(fd, 2);
				}
				sleep_s(600);
				_exit(0);
			}
			write_pid_file(argv[++i], "child", pid);
		} else if (!strcmp(a, "exit-if")) {
			need(argc, i, 2);
			int who = atoi(argv[++i]), code = atoi(argv[++i]);
			if (who == rank) {
				fflush(NULL);
				exit(code);
			}
		} else if (!strcmp(a, "kill-if")) {
			need(argc, i, 2);
			int who = atoi(argv[++i]), sig = atoi(argv[++i]);
			if (who == rank) {
				fflush(NULL);
				kill(getpid(), sig);
				sleep_s(10);
			}
		} else if (!strcmp(a, "ignore")) {
			need(argc, i, 1);
			signal(atoi(argv[++i]), SIG_IGN);
		} else if (!strcmp(a, "catch")) {
			need(argc, i, 2);
			int sig = atoi(argv[++i]);
			snprintf(catch_path, sizeof catch_path, "%s/got.%d", argv[++i], rank);
			struct sigaction sa = { .sa_handler = on_signal };
			sigaction(sig, &sa, NULL);
		} else if (!strcmp(a, "shm")) {
			need(argc, i, 1);
			char path[4096];
			const char *id = getenv("SMDDP_JOB_ID");
			snprintf(path, sizeof path, "/dev/shm/smddp-%s-%s.%d", id ? id : "none",
			         argv[++i], rank);
			int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
			if (fd < 0)
				die(path);
			close(fd);
		} else if (!strcmp(a, "sleep")) {
			need(argc, i, 1);
			if (flush_actions)
				fflush(NULL);
			sleep_s(atof(argv[++i]));
		} else if (!strcmp(a, "stdio")) {
			flush_actions = 0;
		} else {
			fprintf(stderr, "rankprog: unknown action '%s'\n", a);
			return 98;
		}
		if (flush_actions)
			fflush(NULL);
	}
	return 0;
}
