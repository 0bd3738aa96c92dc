/* test_config.c - unit tests of the JSON config file: good files, and every kind of bad one.
 *
 * Each case runs sd_params_load() in a fork()ed child (it runs once per
 * process) with SMDDP_CONFIG pointing at a file of tests/unit/data/config
 * (found through $top_srcdir) or at one written here, and checks the result
 * and the exact sentence.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/param.h"
#include "util/sd.h"
#include "check.h"

/* Every key of the config file, in the order the library lists them. */
#define KNOWN_KEYS                                                                                 \
	"timeout, check_coll, debug, debug_subsys, debug_file, shm_chunk, spin, liveness_ms, "     \
	"single_copy, single_copy_min, shm_algo, cuda_async, cuda_fast, cuda_direct, cuda_stream, " \
	"cuda_stream_chunk, boot_addr, "                                                            \
	"allow_no_token, single_copy_ptracer, topo_file, algo, fabric_provider, net_transport, "    \
	"socket_nsocks, socket_threads, socket_long, socket_credit, "                             \
	"net_chunk, net_rd_max, optimize_sdp, trace_entries, "                                      \
	"trace_dir, trace_signal"

static char datadir[1024];
static char tmpdir[256];

static void clean_env(void)
{
	static const char *const vars[] = {
		"SMDDP_TIMEOUT", "SMDDP_CHECK_COLL", "SMDDP_DEBUG", "SMDDP_DEBUG_SUBSYS",
		"SMDDP_DEBUG_FILE", "SMDDP_SHM_CHUNK", "SMDDP_SPIN", "SMDDP_LIVENESS_MS",
		"SMDATAPARALLEL_OPTIMIZE_SDP", "SMDDP_RANK",
	};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

/* Loads with SMDDP_CONFIG=path in a child; the child checks rc and message
 * (msg NULL: success expected) and then runs more checks. */
static void expect(const char *what, const char *path, int want_rc, const char *msg,
		   int (*more)(void))
{
	pid_t pid;
	int status;

	printf("--- %s\n", what);
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(99);
	}
	if (pid == 0) {
		struct sd_err err = {"unset"};
		int rc;

		failures = 0; /* the parent's count is not this child's */
		clean_env();
		if (path != NULL)
			setenv("SMDDP_CONFIG", path, 1);
		else
			unsetenv("SMDDP_CONFIG");
		rc = sd_params_load(&err);
		CHECK(rc == want_rc, "SMDDP_CONFIG=%s: result %d (want %d)", path ? path : "(unset)",
		      rc, want_rc);
		if (msg != NULL)
			CHECK(strcmp(err.msg, msg) == 0, "message:\n       got  %s\n       want %s", err.msg,
			      msg);
		else
			CHECK(err.msg[0] == '\0', "no message (got \"%s\")", err.msg);
		if (more != NULL)
			more();
		fflush(stdout);
		_exit(failures ? 1 : 0);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		printf("FAIL case \"%s\"\n", what);
		failures++;
	}
}

static const char *data(const char *name)
{
	static char buf[8][1200];
	static int next;
	char *b = buf[next++ % 8];

	snprintf(b, sizeof(buf[0]), "%s/%s", datadir, name);
	return b;
}

/* Writes text (len bytes) to a file of tmpdir and returns its path. */
static const char *tmpfile_with(const char *name, const char *text, size_t len)
{
	static char buf[8][400];
	static int next;
	char *b = buf[next++ % 8];
	FILE *f;

	snprintf(b, sizeof(buf[0]), "%s/%s", tmpdir, name);
	f = fopen(b, "w");
	if (f == NULL || fwrite(text, 1, len, f) != len || fclose(f) != 0) {
		perror(b);
		exit(99);
	}
	return b;
}
#define TMPJSON(name, text) tmpfile_with(name, text, strlen(text))

static char msg[8][2048];
static const char *fmt_msg(int slot, const char *fmt, const char *path)
{
	snprintf(msg[slot], sizeof(msg[0]), fmt, path);
	return msg[slot];
}

static int check_valid(void)
{
	CHECK(sd_param_int("SMDDP_TIMEOUT") == 30, "timeout is 30");
	CHECK(strcmp(sd_param_source("SMDDP_TIMEOUT"), "config") == 0, "from the config file");
	CHECK(sd_param_int("SMDDP_CHECK_COLL") == 1, "check_coll true is 1");
	CHECK(strcmp(sd_param_str("SMDDP_DEBUG"), "INFO") == 0, "debug \"info\" is INFO");
	CHECK(strcmp(sd_param_str("SMDDP_DEBUG_SUBSYS"), "^SHM") == 0, "debug_subsys is ^SHM");
	CHECK(sd_param_int("SMDDP_SHM_CHUNK") == 1 << 20, "shm_chunk \"1M\" is 1048576");
	CHECK(sd_param_int("SMDDP_SPIN") == 100, "spin is 100");
	CHECK(sd_param_int("SMDDP_LIVENESS_MS") == 20, "liveness_ms is 20");
	CHECK(sd_param_int("SMDATAPARALLEL_OPTIMIZE_SDP") == 0 &&
		      strcmp(sd_param_source("SMDATAPARALLEL_OPTIMIZE_SDP"), "config") == 0,
	      "optimize_sdp false is 0, from the config file");
	CHECK(strcmp(sd_param_source("SMDDP_DEBUG_FILE"), "default") == 0,
	      "debug_file, not in the file, is the default");
	return 0;
}

static int check_numeric_chunk(void)
{
	CHECK(sd_param_int("SMDDP_SHM_CHUNK") == 4096, "shm_chunk 4096 (a number) is 4096");
	CHECK(sd_param_int("SMDDP_TIMEOUT") == 1000, "timeout 1e3 is 1000");
	return 0;
}

static int check_defaults(void)
{
	CHECK(sd_param_int("SMDDP_TIMEOUT") == 600 &&
		      strcmp(sd_param_source("SMDDP_TIMEOUT"), "default") == 0,
	      "timeout is the default 600");
	return 0;
}

static int check_error_sticks(void)
{
	struct sd_err err;

	CHECK(sd_params_load(&err) == SMDDP_ECONFIG && strstr(err.msg, "timout") != NULL,
	      "a second load returns the same error: %s", err.msg);
	CHECK(sd_param_int("SMDDP_TIMEOUT") == 600, "the accessors still answer (default 600)");
	return 0;
}

int main(void)
{
	const char *top = getenv("top_srcdir");
	const char *t = getenv("TMPDIR");
	const char *p;
	struct stat st;

	setvbuf(stdout, NULL, _IOLBF, 0);
	snprintf(datadir, sizeof(datadir), "%s/tests/unit/data/config", top && *top ? top : ".");
	if (stat(data("valid.json"), &st) != 0) {
		printf("cannot find %s (is top_srcdir set?)\n", data("valid.json"));
		return 99;
	}
	snprintf(tmpdir, sizeof(tmpdir), "%s/test_config.XXXXXX", t && *t ? t : "/tmp");
	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return 99;
	}
	printf("data from %s, scratch folder %s\n", datadir, tmpdir);

	/* Good files. */
	expect("a valid file sets every tunable", data("valid.json"), SMDDP_OK, NULL, check_valid);
	expect("numbers for sizes, 1e3 for an integer",
	       TMPJSON("numeric.json", "{\"shm_chunk\": 4096, \"timeout\": 1e3}"), SMDDP_OK, NULL,
	       check_numeric_chunk);
	expect("an empty object", TMPJSON("emptyobj.json", " {}\n"), SMDDP_OK, NULL, check_defaults);
	expect("SMDDP_CONFIG=/dev/null means no file", "/dev/null", SMDDP_OK, NULL, check_defaults);
	expect("SMDDP_CONFIG=\"\" means no file", "", SMDDP_OK, NULL, check_defaults);
	if (stat("/etc/smddp.json", &st) != 0 && errno == ENOENT)
		expect("SMDDP_CONFIG unset and no /etc/smddp.json", NULL, SMDDP_OK, NULL,
		       check_defaults);
	else
		printf("skip: /etc/smddp.json exists here, so the no-file default is not tested\n");

	/* Bad files, the data folder's. */
	p = data("invalid-json.json");
	expect("invalid JSON", p, SMDDP_ECONFIG,
	       fmt_msg(0, "%s: invalid JSON near line 3 column 12", p), NULL);
	p = data("unknown-key.json");
	expect("an unknown key", p, SMDDP_ECONFIG,
	       fmt_msg(0,
		       "%s: unknown key \"timout\" (did you mean \"timeout\"? known keys: " KNOWN_KEYS ")",
		       p),
	       check_error_sticks);
	p = data("wrong-type.json");
	expect("a string for a number", p, SMDDP_ECONFIG,
	       fmt_msg(0, "%s: key \"timeout\": expected a number, got a string", p), NULL);
	p = data("env-only.json");
	expect("an env-only key", p, SMDDP_ECONFIG,
	       fmt_msg(0,
		       "%s: key \"rank\": SMDDP_RANK cannot be set in a config file; set it in the "
		       "environment",
		       p),
	       NULL);
	p = data("not-object.json");
	expect("an array, not an object", p, SMDDP_ECONFIG,
	       fmt_msg(0, "%s: expected a JSON object like {\"timeout\": 600}, got an array", p),
	       NULL);
	p = data("bad-range.json");
	expect("timeout 0", p, SMDDP_ECONFIG,
	       fmt_msg(0, "%s: key \"timeout\": expected a positive integer (seconds), got 0", p),
	       NULL);
	p = data("duplicate.json");
	expect("a key twice", p, SMDDP_ECONFIG,
	       fmt_msg(0, "%s: key \"timeout\" appears more than once", p), NULL);
	p = data("empty.json");
	expect("an empty file", p, SMDDP_ECONFIG,
	       fmt_msg(0, "%s: empty file; expected a JSON object like {\"timeout\": 600}", p), NULL);

	/* Files that cannot be read. */
	p = data("no-such-file.json");
	expect("SMDDP_CONFIG names a missing file", p, SMDDP_ECONFIG,
	       fmt_msg(0, "%s: cannot open the config file: No such file or directory", p), NULL);
	expect("SMDDP_CONFIG names a folder", datadir, SMDDP_ECONFIG,
	       fmt_msg(0, "%s: cannot read the config file: Is a directory", datadir), NULL);
	if (geteuid() != 0) {
		p = TMPJSON("noperm.json", "{}");
		chmod(p, 0);
		expect("a file without read permission", p, SMDDP_ECONFIG,
		       fmt_msg(0, "%s: cannot open the config file: Permission denied", p), NULL);
	} else {
		printf("skip: running as root, so a file without read permission is readable\n");
	}

	/* More wrong values, written here. */
	p = TMPJSON("float.json", "{\"spin\": 1.5}");
	expect("1.5 for an integer", p, SMDDP_ECONFIG,
	       fmt_msg(0, "%s: key \"spin\": expected an integer, got 1.5", p), NULL);
	p = TMPJSON("boolnum.json", "{\"check_coll\": 1}");
	expect("1 for a boolean", p, SMDDP_ECONFIG,
	       fmt_msg(0, "%s: key \"check_coll\": expected true or false, got a number", p), NULL);
	p = TMPJSON("boolstr.json", "{\"optimize_sdp\": \"true\"}");
	expect("\"true\" for a boolean", p, SMDDP_ECONFIG,
	       fmt_msg(0, "%s: key \"optimize_sdp\": expected true or false, got a string", p),
	       NULL);
	p = TMPJSON("size.json", "{\"shm_chunk\": \"512X\"}");
	expect("a bad size string", p, SMDDP_ECONFIG,
	       fmt_msg(0,
		       "%s: key \"shm_chunk\": expected a size from 4K to 2G, like 512K or 4M, "
		       "got \"512X\"",
		       p),
	       NULL);
	p = TMPJSON("sizesmall.json", "{\"shm_chunk\": 1024}");
	expect("a size below 4K", p, SMDDP_ECONFIG,
	       fmt_msg(0,
		       "%s: key \"shm_chunk\": expected a size from 4K to 2G, like 512K or 4M, "
		       "got 1024",
		       p),
	       NULL);
	p = TMPJSON("sizeneg.json", "{\"shm_chunk\": -4}");
	expect("a negative size", p, SMDDP_ECONFIG,
	       fmt_msg(0, "%s: key \"shm_chunk\": expected a size like 512K or 4M, got -4", p),
	       NULL);
	p = TMPJSON("sizebool.json", "{\"shm_chunk\": true}");
	expect("true for a size", p, SMDDP_ECONFIG,
	       fmt_msg(0, "%s: key \"shm_chunk\": expected a number or a string like \"512K\", got true",
		       p),
	       NULL);
	p = TMPJSON("enum.json", "{\"debug\": \"LOUD\"}");
	expect("a bad enum value", p, SMDDP_ECONFIG,
	       fmt_msg(0,
		       "%s: key \"debug\": expected one of NONE, WARN, INFO, TRACE, got \"LOUD\"", p),
	       NULL);
	p = TMPJSON("subsys.json", "{\"debug_subsys\": \"INIT,NOPE\"}");
	expect("a bad subsystem", p, SMDDP_ECONFIG,
	       fmt_msg(0,
		       "%s: key \"debug_subsys\": expected a comma-separated list of INIT, BOOT, "
		       "SHM, COLL, CONFIG, ENV, NET, ALL (a leading ^ excludes them), got \"INIT,NOPE\"",
		       p),
	       NULL);
	p = TMPJSON("nested.json", "{\"timeout\": {\"seconds\": 5}}");
	expect("an object for a number", p, SMDDP_ECONFIG,
	       fmt_msg(0, "%s: key \"timeout\": expected a number, got an object", p), NULL);
	p = TMPJSON("null.json", "{\"debug_file\": null}");
	expect("null for a string", p, SMDDP_ECONFIG,
	       fmt_msg(0, "%s: key \"debug_file\": expected a string, got null", p), NULL);
	p = TMPJSON("envname.json", "{\"SMDDP_TIMEOUT\": 5}");
	expect("the environment name as a key", p, SMDDP_ECONFIG,
	       fmt_msg(0,
		       "%s: unknown key \"SMDDP_TIMEOUT\" (did you mean \"timeout\"? known keys: " KNOWN_KEYS
		       ")",
		       p),
	       NULL);
	p = TMPJSON("token.json", "{\"job_token\": \"s3cret\"}");
	expect("job_token in a file", p, SMDDP_ECONFIG,
	       fmt_msg(0,
		       "%s: key \"job_token\": SMDDP_JOB_TOKEN cannot be set in a config file; set "
		       "it in the environment",
		       p),
	       NULL);
	p = TMPJSON("trailing.json", "{\"timeout\": 5}\n}");
	expect("junk after the object", p, SMDDP_ECONFIG,
	       fmt_msg(0, "%s: invalid JSON near line 2 column 1", p), NULL);
	p = TMPJSON("comma.json", "{\"timeout\": 5,}");
	expect("a trailing comma", p, SMDDP_ECONFIG,
	       fmt_msg(0, "%s: invalid JSON near line 1 column 16", p), NULL);
	p = tmpfile_with("nul.json", "{\"timeout\": 5}\0{}", 17);
	expect("a NUL byte", p, SMDDP_ECONFIG,
	       fmt_msg(0, "%s: invalid JSON: NUL byte at line 1 column 15", p), NULL);

	/* The environment beats a file, but does not excuse a broken one. */
	{
		pid_t pid;
		int status;
		const char *bad = data("wrong-type.json");

		printf("--- SMDDP_TIMEOUT set, file's timeout has the wrong type\n");
		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			struct sd_err err;

			failures = 0;
			clean_env();
			setenv("SMDDP_CONFIG", bad, 1);
			setenv("SMDDP_TIMEOUT", "5", 1);
			CHECK(sd_params_load(&err) == SMDDP_ECONFIG,
			      "still SMDDP_ECONFIG: %s", err.msg);
			fflush(stdout);
			_exit(failures ? 1 : 0);
		}
		waitpid(pid, &status, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			failures++;
	}

	if (failures == 0) {
		char cmd[400];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			printf("note: could not remove %s\n", tmpdir);
	}
	printf("%s: %d failure%s\n", failures ? "FAIL" : "PASS", failures, failures == 1 ? "" : "s");
	return failures ? 1 : 0;
}
