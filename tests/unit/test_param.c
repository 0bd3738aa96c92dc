/* test_param.c - unit tests of the parsers, the parameter registry's precedence and logging.
 *
 * sd_params_load() and sd_log_init() run once per process, so every case
 * that sets the environment runs in a fork()ed child; the parent counts
 * the children that failed.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/param.h"
#include "util/sd.h"
#include "check.h"

static char tmpdir[256];

/* Runs fn in a child with a clean slate of SMDDP_* variables. */
static void run_case(const char *name, int (*fn)(void))
{
	pid_t pid;
	int status;

	printf("--- %s\n", name);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(99);
	}
	if (pid == 0) {
		static const char *const vars[] = {
			"SMDDP_TIMEOUT",    "SMDDP_CHECK_COLL",	 "SMDDP_DEBUG",	   "SMDDP_DEBUG_SUBSYS",
			"SMDDP_DEBUG_FILE", "SMDDP_SHM_CHUNK",	 "SMDDP_SPIN",	   "SMDDP_LIVENESS_MS",
			"SMDDP_RANK",	    "SMDDP_MASTER_PORT", "SMDDP_JOB_ID",   "SMDDP_MASTER_ADDR",
			"SMDATAPARALLEL_OPTIMIZE_SDP",
		};
		int rc;

		failures = 0; /* the parent's count is not this child's */
		for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
			unsetenv(vars[i]);
		setenv("SMDDP_CONFIG", "/dev/null", 1);
		rc = fn();
		fflush(stdout);
		fflush(stderr);
		_exit(rc == 0 && failures == 0 ? 0 : 1);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		printf("FAIL case \"%s\" (child status %#x)\n", name, status);
		failures++;
	}
}

static void short_host(char *buf, size_t len)
{
	if (gethostname(buf, len) != 0)
		snprintf(buf, len, "?");
	buf[len - 1] = '\0';
	buf[strcspn(buf, ".")] = '\0';
}

/* Reads a whole (small) file; NULL if it cannot. */
static char *slurp(const char *path)
{
	static char buf[1 << 20];
	int fd = open(path, O_RDONLY);
	ssize_t n;
	size_t len = 0;

	if (fd < 0)
		return NULL;
	while ((n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	return buf;
}

static size_t count_lines(const char *s)
{
	size_t n = 0;

	for (; *s != '\0'; s++)
		n += *s == '\n';
	return n;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0) {
		perror(path);
		exit(99);
	}
}

/* ---- parsers ---------------------------------------------------------- */

static void test_parse_int(void)
{
	static const struct {
		const char *s;
		int ok;
		int64_t v;
	} cases[] = {
		{"0", 1, 0},
		{"42", 1, 42},
		{"-7", 1, -7},
		{"+5", 1, 5},
		{"007", 1, 7},
		{"9223372036854775807", 1, INT64_MAX},
		{"-9223372036854775808", 1, INT64_MIN},
		{"9223372036854775808", 0, 0},
		{"-9223372036854775809", 0, 0},
		{"99999999999999999999999", 0, 0},
		{"", 0, 0},
		{" 1", 0, 0},
		{"1 ", 0, 0},
		{"12a", 0, 0},
		{"0x10", 0, 0},
		{"1.5", 0, 0},
		{"-", 0, 0},
		{"+", 0, 0},
		{"--1", 0, 0},
	};

	printf("--- sd_parse_int\n");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int64_t v = 12345;
		int rc = sd_parse_int(cases[i].s, &v);

		if (cases[i].ok)
			CHECK(rc == 0 && v == cases[i].v, "sd_parse_int(\"%s\") = %" PRId64,
			      cases[i].s, cases[i].v);
		else
			CHECK(rc == -1, "sd_parse_int(\"%s\") is rejected", cases[i].s);
	}
	{
		int64_t v;

		CHECK(sd_parse_int(NULL, &v) == -1, "sd_parse_int(NULL) is rejected");
	}
}

static void test_parse_bool(void)
{
	static const struct {
		const char *s;
		int ok, v;
	} cases[] = {
		{"1", 1, 1},	  {"0", 1, 0},	   {"true", 1, 1}, {"FALSE", 1, 0}, {"Yes", 1, 1},
		{"no", 1, 0},	  {"on", 1, 1},	   {"OFF", 1, 0},  {"2", 0, 0},	    {"", 0, 0},
		{"truee", 0, 0}, {" 1", 0, 0},	   {"1 ", 0, 0},   {"y", 0, 0},	    {"-1", 0, 0},
	};

	printf("--- sd_parse_bool\n");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int v = 7;
		int rc = sd_parse_bool(cases[i].s, &v);

		if (cases[i].ok)
			CHECK(rc == 0 && v == cases[i].v, "sd_parse_bool(\"%s\") = %d", cases[i].s,
			      cases[i].v);
		else
			CHECK(rc == -1, "sd_parse_bool(\"%s\") is rejected", cases[i].s);
	}
}

static void test_parse_size(void)
{
	static const struct {
		const char *s;
		int ok;
		uint64_t v;
	} cases[] = {
		{"0", 1, 0},
		{"64", 1, 64},
		{"512K", 1, 512 << 10},
		{"512k", 1, 512 << 10},
		{"1KiB", 1, 1024},
		{"1kib", 1, 1024},
		{"4M", 1, 4 << 20},
		{"4MiB", 1, 4 << 20},
		{"4mib", 1, 4 << 20},
		{"2G", 1, 2ull << 30},
		{"2GiB", 1, 2ull << 30},
		{"18446744073709551615", 1, UINT64_MAX},
		{"17179869183G", 1, UINT64_MAX - ((1ull << 30) - 1)},
		{"18446744073709551616", 0, 0},
		{"17179869184G", 0, 0},
		{"99999999999999999999K", 0, 0},
		{"", 0, 0},
		{"-1", 0, 0},
		{"+1", 0, 0},
		{" 1", 0, 0},
		{"1 ", 0, 0},
		{"1 K", 0, 0},
		{"K", 0, 0},
		{"1.5K", 0, 0},
		{"1KB", 0, 0},
		{"1Kx", 0, 0},
		{"1X", 0, 0},
		{"0x10", 0, 0},
	};

	printf("--- sd_parse_size\n");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t v = 12345;
		int rc = sd_parse_size(cases[i].s, &v);

		if (cases[i].ok)
			CHECK(rc == 0 && v == cases[i].v, "sd_parse_size(\"%s\") = %" PRIu64,
			      cases[i].s, cases[i].v);
		else
			CHECK(rc == -1, "sd_parse_size(\"%s\") is rejected", cases[i].s);
	}
}

/* ---- the table ----------------------------------------------------------- */

static void test_table(void)
{
	static const char *const expected[] = {
		"SMDDP_TIMEOUT",	  "SMDDP_CHECK_COLL",	 "SMDDP_DEBUG",
		"SMDDP_DEBUG_SUBSYS",	  "SMDDP_DEBUG_FILE",	 "SMDDP_SHM_CHUNK",
		"SMDDP_SPIN",		  "SMDDP_LIVENESS_MS",	 "SMDATAPARALLEL_OPTIMIZE_SDP",
		"SMDDP_CONFIG",		  "SMDDP_RANK",		 "SMDDP_WORLD_SIZE",
		"SMDDP_LOCAL_RANK",	  "SMDDP_LOCAL_WORLD_SIZE", "SMDDP_MASTER_ADDR",
		"SMDDP_MASTER_PORT",	  "SMDDP_JOB_TOKEN",	 "SMDDP_JOB_ID",
		"SMDDP_HOSTID",
	};
	size_t n = sd_param_count();

	printf("--- the parameter table\n");
	for (size_t i = 0; i < sizeof(expected) / sizeof(expected[0]); i++) {
		int found = 0;

		for (size_t j = 0; j < n; j++)
			found |= strcmp(sd_param_at(j)->name, expected[i]) == 0;
		CHECK(found, "%s is in the table", expected[i]);
	}
	CHECK(sd_param_at(n) == NULL, "sd_param_at(count) is NULL");
	for (size_t i = 0; i < n; i++) {
		const struct sd_param_info *p = sd_param_at(i);
		char key[64];
		size_t k = 0;
		const char *s = strncmp(p->name, "SMDDP_", 6) == 0 ? p->name + 6 : p->name;

		CHECK(p->help != NULL && *p->help != '\0' && p->def != NULL,
		      "%s has help text and a default", p->name);
		CHECK(p->type != SD_PARAM_ENUM || p->choices != NULL, "%s: an enum lists its choices",
		      p->name);
		if (p->key == NULL)
			continue;
		if (strcmp(p->name, "SMDATAPARALLEL_OPTIMIZE_SDP") == 0)
			s = "OPTIMIZE_SDP";
		for (; *s && k + 1 < sizeof(key); s++)
			key[k++] = (char)(*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s);
		key[k] = '\0';
		CHECK(strcmp(p->key, key) == 0, "%s has config key \"%s\"", p->name, key);
		for (size_t j = 0; j < i; j++)
			CHECK(sd_param_at(j)->key == NULL || strcmp(sd_param_at(j)->key, p->key) != 0,
			      "key \"%s\" is unique against %s", p->key, sd_param_at(j)->name);
	}
}

/* ---- precedence: environment > config file > default --------------------- */

static int case_defaults(void)
{
	struct sd_err err = {"x"};
	int rc = sd_params_load(&err);

	CHECK(rc == SMDDP_OK && err.msg[0] == '\0', "load with no file and no environment succeeds");
	CHECK(sd_param_int("SMDDP_TIMEOUT") == 600, "timeout defaults to 600");
	CHECK(strcmp(sd_param_source("SMDDP_TIMEOUT"), "default") == 0, "its source is default");
	CHECK(sd_param_int("SMDDP_CHECK_COLL") == 0, "check_coll defaults to 0");
	CHECK(sd_param_int("SMDDP_SHM_CHUNK") == 512 * 1024, "shm_chunk defaults to 512K = 524288");
	CHECK(sd_param_int("SMDDP_SPIN") == -1, "spin defaults to -1");
	CHECK(sd_param_int("SMDDP_LIVENESS_MS") == 50, "liveness_ms defaults to 50");
	CHECK(sd_param_int("SMDATAPARALLEL_OPTIMIZE_SDP") == 0, "optimize_sdp defaults to 0");
	CHECK(strcmp(sd_param_str("SMDDP_DEBUG"), "WARN") == 0, "debug defaults to WARN");
	CHECK(strcmp(sd_param_str("SMDDP_DEBUG_SUBSYS"), "ALL") == 0, "debug_subsys defaults to ALL");
	CHECK(strcmp(sd_param_str("SMDDP_DEBUG_FILE"), "") == 0, "debug_file defaults to \"\"");
	CHECK(strcmp(sd_param_str("SMDDP_SHM_CHUNK"), "512K") == 0,
	      "sd_param_str gives a SIZE as text (\"512K\")");
	CHECK(strcmp(sd_param_str("SMDDP_JOB_ID"), "") == 0, "an unset env-only param is \"\"");
	CHECK(strcmp(sd_param_source("SMDDP_JOB_ID"), "default") == 0,
	      "an unset env-only param's source is default");
	/* A programming bug, not a crash: 0, "" and a WARN line on stderr. */
	CHECK(sd_param_int("SMDDP_NO_SUCH_THING") == 0, "sd_param_int of an unknown name is 0");
	CHECK(strcmp(sd_param_str("SMDDP_NO_SUCH_THING"), "") == 0,
	      "sd_param_str of an unknown name is \"\"");
	return 0;
}

static int case_precedence(void)
{
	char path[300];
	struct sd_err err;
	int rc;

	snprintf(path, sizeof(path), "%s/prec.json", tmpdir);
	write_file(path, "{\"timeout\": 30, \"spin\": 100, \"shm_chunk\": \"1M\", "
			 "\"check_coll\": true}\n");
	setenv("SMDDP_CONFIG", path, 1);
	setenv("SMDDP_TIMEOUT", "45", 1);
	setenv("SMDDP_SHM_CHUNK", "", 1); /* empty = unset: the file's value stands */
	setenv("SMDDP_CHECK_COLL", "off", 1);
	setenv("SMDDP_MASTER_ADDR", "node7", 1);
	rc = sd_params_load(&err);
	CHECK(rc == SMDDP_OK, "load with a file and environment succeeds (%s)", err.msg);
	CHECK(sd_param_int("SMDDP_TIMEOUT") == 45 &&
		      strcmp(sd_param_source("SMDDP_TIMEOUT"), "env") == 0,
	      "environment (45) beats file (30) beats default (600)");
	CHECK(sd_param_int("SMDDP_SPIN") == 100 && strcmp(sd_param_source("SMDDP_SPIN"), "config") == 0,
	      "file (100) beats default (-1)");
	CHECK(sd_param_int("SMDDP_SHM_CHUNK") == 1 << 20 &&
		      strcmp(sd_param_source("SMDDP_SHM_CHUNK"), "config") == 0,
	      "an empty environment value counts as unset (shm_chunk from the file: 1M)");
	CHECK(sd_param_int("SMDDP_CHECK_COLL") == 0 &&
		      strcmp(sd_param_source("SMDDP_CHECK_COLL"), "env") == 0,
	      "SMDDP_CHECK_COLL=off beats the file's true");
	CHECK(sd_param_int("SMDDP_LIVENESS_MS") == 50 &&
		      strcmp(sd_param_source("SMDDP_LIVENESS_MS"), "default") == 0,
	      "liveness_ms, set nowhere, stays at its default 50");
	CHECK(strcmp(sd_param_str("SMDDP_MASTER_ADDR"), "node7") == 0 &&
		      strcmp(sd_param_source("SMDDP_MASTER_ADDR"), "env") == 0,
	      "an env-only param reads the environment");
	/* Once per process: a later change of the environment changes nothing. */
	setenv("SMDDP_TIMEOUT", "99", 1);
	rc = sd_params_load(&err);
	CHECK(rc == SMDDP_OK && sd_param_int("SMDDP_TIMEOUT") == 45,
	      "a second load returns the first result");
	return 0;
}

static int case_implicit_load(void)
{
	setenv("SMDDP_LIVENESS_MS", "7", 1);
	CHECK(sd_param_int("SMDDP_LIVENESS_MS") == 7,
	      "sd_param_int loads the registry when nobody has");
	return 0;
}

static int expect_env_error(const char *var, const char *value, const char *msg)
{
	struct sd_err err = {""};
	int rc;

	setenv(var, value, 1);
	rc = sd_params_load(&err);
	CHECK(rc == SMDDP_ECONFIG, "%s=\"%s\" is SMDDP_ECONFIG (got %d)", var, value, rc);
	CHECK(strcmp(err.msg, msg) == 0, "message: \"%s\" (want \"%s\")", err.msg, msg);
	rc = sd_params_load(&err);
	CHECK(rc == SMDDP_ECONFIG && strcmp(err.msg, msg) == 0,
	      "a second load returns the same error and message");
	return 0;
}

static int case_env_timeout_abc(void)
{
	return expect_env_error("SMDDP_TIMEOUT", "abc",
				"SMDDP_TIMEOUT=\"abc\": expected a positive integer (seconds)");
}

static int case_env_timeout_zero(void)
{
	return expect_env_error("SMDDP_TIMEOUT", "0",
				"SMDDP_TIMEOUT=\"0\": expected a positive integer (seconds)");
}

static int case_env_timeout_overflow(void)
{
	return expect_env_error("SMDDP_TIMEOUT", "99999999999999999999",
				"SMDDP_TIMEOUT=\"99999999999999999999\": expected a positive integer "
				"(seconds)");
}

static int case_env_spin(void)
{
	return expect_env_error("SMDDP_SPIN", "-2",
				"SMDDP_SPIN=\"-2\": expected -1 or a non-negative integer (polls)");
}

static int case_env_chunk(void)
{
	return expect_env_error("SMDDP_SHM_CHUNK", "1x",
				"SMDDP_SHM_CHUNK=\"1x\": expected a size from 4K to 2G, like "
				"512K or 4M");
}

static int case_env_bool(void)
{
	return expect_env_error("SMDDP_CHECK_COLL", "maybe",
				"SMDDP_CHECK_COLL=\"maybe\": expected 1/0, true/false, yes/no or "
				"on/off");
}

static int case_env_rank(void)
{
	return expect_env_error("SMDDP_RANK", "-1",
				"SMDDP_RANK=\"-1\": expected a non-negative integer (this "
				"process's rank)");
}

static int case_env_port(void)
{
	return expect_env_error("SMDDP_MASTER_PORT", "70000",
				"SMDDP_MASTER_PORT=\"70000\": expected a TCP port number from 1 to "
				"65535");
}

static int case_env_job_id(void)
{
	return expect_env_error("SMDDP_JOB_ID", "../x",
				"SMDDP_JOB_ID=\"../x\": expected at most 32 letters, digits, '_' "
				"or '-'");
}

static int case_env_good_values(void)
{
	struct sd_err err;

	setenv("SMDDP_CHECK_COLL", "yes", 1);
	setenv("SMDDP_SHM_CHUNK", "64KiB", 1);
	setenv("SMDDP_DEBUG", "none", 1);
	setenv("SMDATAPARALLEL_OPTIMIZE_SDP", "1", 1);
	setenv("SMDDP_RANK", "3", 1);
	setenv("SMDDP_JOB_ID", "job-42_a", 1);
	CHECK(sd_params_load(&err) == SMDDP_OK, "valid environment loads (%s)", err.msg);
	CHECK(sd_param_int("SMDDP_CHECK_COLL") == 1, "SMDDP_CHECK_COLL=yes is 1");
	CHECK(sd_param_int("SMDDP_SHM_CHUNK") == 65536, "SMDDP_SHM_CHUNK=64KiB is 65536");
	CHECK(strcmp(sd_param_str("SMDDP_DEBUG"), "NONE") == 0, "SMDDP_DEBUG=none reads as NONE");
	CHECK(sd_param_int("SMDATAPARALLEL_OPTIMIZE_SDP") == 1, "SMDATAPARALLEL_OPTIMIZE_SDP=1 is 1");
	CHECK(sd_param_int("SMDDP_RANK") == 3, "sd_param_int(SMDDP_RANK) reads the environment: 3");
	return 0;
}

/* A bad SMDDP_DEBUG is logging's warning, not a configuration error. */
static int case_env_bad_debug_is_lenient(void)
{
	struct sd_err err;

	setenv("SMDDP_DEBUG", "LOUD", 1);
	setenv("SMDDP_DEBUG_FILE", "/dev/null", 1);
	CHECK(sd_params_load(&err) == SMDDP_OK,
	      "SMDDP_DEBUG=LOUD does not fail the load (%s)", err.msg);
	CHECK(strcmp(sd_param_str("SMDDP_DEBUG"), "WARN") == 0, "and SMDDP_DEBUG reads as WARN");
	return 0;
}

/* ---- logging ----------------------------------------------------------- */

static int case_log_file(void)
{
	char pat[300];

	snprintf(pat, sizeof(pat), "%s/log-%%h-%%p.txt", tmpdir);
	setenv("SMDDP_DEBUG", "info", 1);
	setenv("SMDDP_DEBUG_FILE", pat, 1);
	SD_INFO(SD_SUB_INIT, "hello %d", 1);
	SD_TRACE(SD_SUB_INIT, "not shown at INFO");
	sd_log_set_rank(3);
	SD_WARN(SD_SUB_BOOT, "world\n"); /* a trailing newline is not doubled */
	CHECK(sd_log_level == SD_LOG_INFO, "SMDDP_DEBUG=info sets the level to INFO");
	return 0;
}

static void test_log_file(void)
{
	char host[256], path[600], want[1024];
	const char *text;
	pid_t pid;
	int status;

	printf("--- logging to SMDDP_DEBUG_FILE with %%h and %%p\n");
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		failures = 0;
		setenv("SMDDP_CONFIG", "/dev/null", 1);
		unsetenv("SMDDP_DEBUG_SUBSYS");
		_exit(case_log_file() == 0 && failures == 0 ? 0 : 1);
	}
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the logging child succeeded");
	short_host(host, sizeof(host));
	snprintf(path, sizeof(path), "%s/log-%s-%d.txt", tmpdir, host, (int)pid);
	text = slurp(path);
	CHECK(text != NULL, "the log file %s exists", path);
	if (text == NULL)
		return;
	snprintf(want, sizeof(want),
		 "%s:%d:- [SMDDP INFO INIT] hello 1\n%s:%d:3 [SMDDP WARN BOOT] world\n", host,
		 (int)pid, host, (int)pid);
	CHECK(strcmp(text, want) == 0, "it holds exactly:\n%s---- got:\n%s----", want, text);
}

/* Child: stdout and stderr into files of tmpdir, then fn. */
static int with_output(const char *tag, void (*fn)(void))
{
	char out[300], err[300];
	int fo, fe;

	snprintf(out, sizeof(out), "%s/%s.out", tmpdir, tag);
	snprintf(err, sizeof(err), "%s/%s.err", tmpdir, tag);
	fflush(stdout);
	fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fo < 0 || fe < 0)
		return 1;
	dup2(fo, STDOUT_FILENO);
	dup2(fe, STDERR_FILENO);
	close(fo);
	close(fe);
	fn();
	fflush(stdout);
	return 0;
}

static void run_output(const char *tag, void (*fn)(void), char *errtext, size_t len)
{
	char path[300];
	const char *t;
	pid_t pid;
	int status;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		setenv("SMDDP_CONFIG", "/dev/null", 1);
		_exit(with_output(tag, fn));
	}
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "[%s] the child ran", tag);
	snprintf(path, sizeof(path), "%s/%s.out", tmpdir, tag);
	t = slurp(path);
	CHECK(t != NULL && *t == '\0', "[%s] nothing went to stdout", tag);
	snprintf(path, sizeof(path), "%s/%s.err", tmpdir, tag);
	t = slurp(path);
	snprintf(errtext, len, "%s", t ? t : "");
}

static void log_bad_level(void)
{
	setenv("SMDDP_DEBUG", "LOUD", 1);
	unsetenv("SMDDP_DEBUG_FILE");
	unsetenv("SMDDP_DEBUG_SUBSYS");
	SD_INFO(SD_SUB_INIT, "info line");
	SD_WARN(SD_SUB_COLL, "warn line");
}

static void log_subsys_exclude(void)
{
	setenv("SMDDP_DEBUG", "INFO", 1);
	setenv("SMDDP_DEBUG_SUBSYS", "^boot, shm", 1);
	unsetenv("SMDDP_DEBUG_FILE");
	SD_INFO(SD_SUB_BOOT, "boot info");
	SD_INFO(SD_SUB_SHM, "shm info");
	SD_INFO(SD_SUB_COLL, "coll info");
	SD_WARN(SD_SUB_BOOT, "boot warn");
}

static void log_subsys_include(void)
{
	setenv("SMDDP_DEBUG", "TRACE", 1);
	setenv("SMDDP_DEBUG_SUBSYS", "INIT,CONFIG,BOGUS", 1);
	unsetenv("SMDDP_DEBUG_FILE");
	SD_INFO(SD_SUB_COLL, "coll info");
	SD_TRACE(SD_SUB_CONFIG, "config trace");
}

static void log_none(void)
{
	setenv("SMDDP_DEBUG", "off", 1);
	unsetenv("SMDDP_DEBUG_FILE");
	SD_WARN(SD_SUB_INIT, "silenced");
}

static void log_bad_file(void)
{
	setenv("SMDDP_DEBUG", "WARN", 1);
	setenv("SMDDP_DEBUG_FILE", "/nonexistent-dir-smddp/x-%p.log", 1);
	unsetenv("SMDDP_DEBUG_SUBSYS");
	SD_WARN(SD_SUB_INIT, "still logged");
}

static void load_with_typo(void)
{
	struct sd_err err;

	unsetenv("SMDDP_DEBUG");
	unsetenv("SMDDP_DEBUG_FILE");
	setenv("SMDDP_TIMOUT", "5", 1);
	setenv("SMDDP_WHATEVER_ELSE", "1", 1);
	sd_params_load(&err);
}

static void test_log_stderr(void)
{
	static char e[1 << 16];

	printf("--- an invalid SMDDP_DEBUG warns once and means WARN\n");
	run_output("badlevel", log_bad_level, e, sizeof(e));
	CHECK(count_lines(e) == 2, "two lines on stderr:\n%s", e);
	CHECK(strstr(e, "[SMDDP WARN INIT] SMDDP_DEBUG=\"LOUD\" is not one of NONE, WARN, INFO, "
			"TRACE; using WARN\n") != NULL,
	      "the first says SMDDP_DEBUG=\"LOUD\" is invalid");
	CHECK(strstr(e, "[SMDDP WARN COLL] warn line\n") != NULL && strstr(e, "info line") == NULL,
	      "WARN lines are shown, INFO lines are not");

	printf("--- SMDDP_DEBUG_SUBSYS=^boot, shm\n");
	run_output("exclude", log_subsys_exclude, e, sizeof(e));
	CHECK(strstr(e, "boot info") == NULL && strstr(e, "shm info") == NULL,
	      "excluded subsystems' INFO lines are hidden");
	CHECK(strstr(e, "[SMDDP INFO COLL] coll info\n") != NULL, "others' are shown");
	CHECK(strstr(e, "[SMDDP WARN BOOT] boot warn\n") != NULL, "WARN lines are always shown");
	CHECK(count_lines(e) == 2, "and nothing else:\n%s", e);

	printf("--- SMDDP_DEBUG_SUBSYS=INIT,CONFIG,BOGUS at TRACE\n");
	run_output("include", log_subsys_include, e, sizeof(e));
	CHECK(strstr(e, "coll info") == NULL, "COLL is not listed, so hidden");
	CHECK(strstr(e, "[SMDDP TRACE CONFIG] test_param.c:") != NULL &&
		      strstr(e, " config trace\n") != NULL,
	      "a TRACE line carries file:line");
	CHECK(strstr(e, "unknown subsystem \"BOGUS\"") != NULL, "the unknown name is reported");

	printf("--- a misspelt SMDDP_ variable\n");
	run_output("typo", load_with_typo, e, sizeof(e));
	CHECK(strstr(e, "[SMDDP WARN ENV] SMDDP_TIMOUT is not a libsmddp variable and is ignored "
			"(did you mean SMDDP_TIMEOUT?); see smddp(7)\n") != NULL,
	      "warns and suggests SMDDP_TIMEOUT");
	CHECK(strstr(e, "[SMDDP WARN ENV] SMDDP_WHATEVER_ELSE is not a libsmddp variable and is "
			"ignored; see smddp(7)\n") != NULL,
	      "warns without a hint where nothing is close:\n%s", e);

	printf("--- SMDDP_DEBUG=off\n");
	run_output("none", log_none, e, sizeof(e));
	CHECK(e[0] == '\0', "prints nothing at all (got \"%s\")", e);

	printf("--- SMDDP_DEBUG_FILE that cannot be opened\n");
	run_output("badfile", log_bad_file, e, sizeof(e));
	CHECK(strstr(e, "[SMDDP WARN INIT] SMDDP_DEBUG_FILE: cannot open \"/nonexistent-dir-smddp/x-") !=
			  NULL &&
		      strstr(e, "logging to stderr instead\n") != NULL,
	      "warns on stderr");
	CHECK(strstr(e, "] still logged\n") != NULL, "and logs to stderr:\n%s", e);
}

/* Many threads, one file: every line must come out whole. */
#define NTHREADS 8
#define NLINES 500
static void *spam(void *arg)
{
	int t = (int)(intptr_t)arg;

	for (int i = 0; i < NLINES; i++)
		SD_INFO(SD_SUB_COLL, "thread %d line %d %s", t, i,
			"................................................................"
			"................................................................");
	return NULL;
}

static int case_threads(void)
{
	char path[300];
	pthread_t th[NTHREADS];

	snprintf(path, sizeof(path), "%s/threads.log", tmpdir);
	setenv("SMDDP_DEBUG", "INFO", 1);
	setenv("SMDDP_DEBUG_FILE", path, 1);
	unsetenv("SMDDP_DEBUG_SUBSYS");
	for (int i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, spam, (void *)(intptr_t)i);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	return 0;
}

static void test_threads(void)
{
	char path[300];
	char *text, *line, *save = NULL;
	size_t good = 0, n = 0;

	run_case("logging from 8 threads at once", case_threads);
	snprintf(path, sizeof(path), "%s/threads.log", tmpdir);
	text = slurp(path);
	CHECK(text != NULL, "%s exists", path);
	if (text == NULL)
		return;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		int t, i, len = 0;
		const char *p = strstr(line, " [SMDDP INFO COLL] thread ");

		n++;
		if (p != NULL && sscanf(p, " [SMDDP INFO COLL] thread %d line %d %*[.]%n", &t, &i,
					&len) == 2 &&
		    len > 0 && p[len] == '\0')
			good++;
	}
	CHECK(n == NTHREADS * NLINES && good == n, "%d whole lines (got %zu lines, %zu whole)",
	      NTHREADS * NLINES, n, good);
}

/* The config file's debug settings take effect at load, and each
 * non-default parameter is logged at INFO with its source. */
static int case_config_debug(void)
{
	char cfg[300], logp[300], host[256], want[600];
	struct sd_err err;
	const char *text;

	snprintf(cfg, sizeof(cfg), "%s/debug.json", tmpdir);
	snprintf(logp, sizeof(logp), "%s/cfglog-%%p.txt", tmpdir);
	{
		char json[800];

		snprintf(json, sizeof(json),
			 "{\"debug\": \"info\", \"debug_file\": \"%s\", \"timeout\": 31}\n", logp);
		write_file(cfg, json);
	}
	setenv("SMDDP_CONFIG", cfg, 1);
	setenv("SMDDP_SPIN", "5", 1);
	SD_INFO(SD_SUB_INIT, "before load: not shown");
	CHECK(sd_params_load(&err) == SMDDP_OK, "load %s (%s)", cfg, err.msg);
	CHECK(sd_log_level == SD_LOG_INFO, "\"debug\": \"info\" in the file sets the level");
	snprintf(logp, sizeof(logp), "%s/cfglog-%d.txt", tmpdir, (int)getpid());
	text = slurp(logp);
	CHECK(text != NULL, "\"debug_file\" in the file opens %s", logp);
	if (text == NULL)
		return 0;
	short_host(host, sizeof(host));
	CHECK(strstr(text, "not shown") == NULL, "lines from before the load are not there");
	snprintf(want, sizeof(want), "%s:%d:- [SMDDP INFO CONFIG] SMDDP_TIMEOUT=31 (key \"timeout\" of %s; default 600)\n",
		 host, (int)getpid(), cfg);
	CHECK(strstr(text, want) != NULL, "logs the file's timeout: %s", want);
	CHECK(strstr(text, "[SMDDP INFO ENV] SMDDP_SPIN=5 (from the environment; default -1)\n") !=
		      NULL,
	      "logs the environment's SMDDP_SPIN");
	CHECK(strstr(text, "SMDDP_LIVENESS_MS") == NULL, "does not log defaults:\n%s", text);
	return 0;
}

int main(void)
{
	const char *t = getenv("TMPDIR");

	setvbuf(stdout, NULL, _IOLBF, 0);
	snprintf(tmpdir, sizeof(tmpdir), "%s/test_param.XXXXXX", t && *t ? t : "/tmp");
	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return 99;
	}
	printf("scratch folder %s\n", tmpdir);

	test_parse_int();
	test_parse_bool();
	test_parse_size();
	test_table();
	run_case("defaults", case_defaults);
	run_case("precedence: environment > config file > default", case_precedence);
	run_case("the accessors load on first use", case_implicit_load);
	run_case("SMDDP_TIMEOUT=abc", case_env_timeout_abc);
	run_case("SMDDP_TIMEOUT=0", case_env_timeout_zero);
	run_case("SMDDP_TIMEOUT overflowing", case_env_timeout_overflow);
	run_case("SMDDP_SPIN=-2", case_env_spin);
	run_case("SMDDP_SHM_CHUNK=1x", case_env_chunk);
	run_case("SMDDP_CHECK_COLL=maybe", case_env_bool);
	run_case("SMDDP_RANK=-1", case_env_rank);
	run_case("SMDDP_MASTER_PORT=70000", case_env_port);
	run_case("SMDDP_JOB_ID=../x", case_env_job_id);
	run_case("valid values of every type", case_env_good_values);
	run_case("SMDDP_DEBUG=LOUD in the registry", case_env_bad_debug_is_lenient);
	test_log_file();
	test_log_stderr();
	test_threads();
	run_case("debug settings from the config file", case_config_debug);

	if (failures == 0) {
		char cmd[400];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			printf("note: could not remove %s\n", tmpdir);
	}
	printf("%s: %d failure%s\n", failures ? "FAIL" : "PASS", failures, failures == 1 ? "" : "s");
	return failures ? 1 : 0;
}
