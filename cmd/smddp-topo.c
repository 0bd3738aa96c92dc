/* smddp-topo - shows this node's topology as libsmddp sees it, as text or JSON.
 *
 * The tool only asks the library (smddp_topo_*) and renders the JSON it
 * gets, so what it shows is what the library uses.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>
#include <smddp/smddp.h>

#include "common/tool.h"

#define PROG "smddp-topo"

#ifndef SMDDP_EXPECTDIR
#define SMDDP_EXPECTDIR "/usr/local/share/libsmddp/expect"
#endif

static void usage(void)
{
	printf("Usage: %s [OPTION]...\n"
	       "Show this node's CPUs, NUMA nodes, GPUs, NICs and how close they are, as\n"
	       "libsmddp sees them.\n"
	       "\n"
	       "  -j, --json            print the topology as JSON (man 5 smddp-topo.json)\n"
	       "  -s, --sysroot DIR     read DIR/sys and DIR/proc instead of this machine's\n"
	       "  -t, --topo FILE       show the topology in FILE (- for stdin) instead of\n"
	       "                        discovering one\n"
	       "  -e, --expect FILE     compare with an expected layout; exit 3 on differences\n"
	       "                        (FILE may name a shipped one: p4d.24xlarge, p5.48xlarge)\n"
	       "      --env             list every SMDDP_* variable: value, source, default\n"
	       "  -h, --help            show this help and exit\n"
	       "  -V, --version         show the version and exit\n"
	       "\n"
	       "Without --sysroot or --topo, SMDDP_TOPO_FILE is honoured as the library does.\n"
	       "Exit status: 0 ok, 1 failure, 2 usage error, 3 the node differs from --expect.\n"
	       "See smddp-topo(1).\n",
	       PROG);
}

static const char *s_or(const cJSON *o, const char *key, const char *dflt)
{
	const cJSON *v = cJSON_GetObjectItem(o, key);

	return cJSON_IsString(v) && *v->valuestring ? v->valuestring : dflt;
}

static const char *cell(const cJSON *v)
{
	return cJSON_IsString(v) ? v->valuestring : "?";
}

/* A number as text, "-" when null. */
static const char *n_or(const cJSON *o, const char *key, char *buf, size_t len)
{
	const cJSON *v = cJSON_GetObjectItem(o, key);

	if (!cJSON_IsNumber(v))
		return "-";
	snprintf(buf, len, "%.0f", v->valuedouble);
	return buf;
}

/* A quantity with its unit, "unknown" when null. */
static const char *q_or(const cJSON *o, const char *key, const char *unit, char *buf, size_t len)
{
	const cJSON *v = cJSON_GetObjectItem(o, key);

	if (!cJSON_IsNumber(v))
		return "unknown";
	snprintf(buf, len, "%.0f %s", v->valuedouble, unit);
	return buf;
}

static const char *plural(double n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

static void print_cpu(const cJSON *t)
{
	const cJSON *cpu = cJSON_GetObjectItem(t, "cpu"), *numa = cJSON_GetObjectItem(t, "numa"), *n;
	const cJSON *sk = cJSON_GetObjectItem(cpu, "sockets"), *co = cJSON_GetObjectItem(cpu, "cores"),
		    *th = cJSON_GetObjectItem(cpu, "threads");
	char a[32], b[32], c[32];

	printf("Host: %s\n", s_or(t, "host", "-"));
	printf("CPU: %s %s, %s %s, %s %s (%s)\n", n_or(cpu, "sockets", a, sizeof(a)),
	       plural(cJSON_IsNumber(sk) ? sk->valuedouble : 0, "socket", "sockets"),
	       n_or(cpu, "cores", b, sizeof(b)),
	       plural(cJSON_IsNumber(co) ? co->valuedouble : 0, "core", "cores"),
	       n_or(cpu, "threads", c, sizeof(c)),
	       plural(cJSON_IsNumber(th) ? th->valuedouble : 0, "thread", "threads"),
	       s_or(cpu, "model", "model unknown"));
	printf("NUMA nodes: %d\n", cJSON_GetArraySize(numa));
	cJSON_ArrayForEach(n, numa)
	{
		printf("  node %s: cpus %s, memory %s\n", n_or(n, "node", a, sizeof(a)),
		       s_or(n, "cpus", "unknown"), q_or(n, "memory_mb", "MiB", b, sizeof(b)));
	}
}

static void print_gpus(const cJSON *t)
{
	const cJSON *gpus = cJSON_GetObjectItem(t, "gpus"), *g;
	int i = 0;

	if (cJSON_GetArraySize(gpus) == 0) {
		printf("GPUs: none\n");
		return;
	}
	printf("GPUs: %d\n", cJSON_GetArraySize(gpus));
	cJSON_ArrayForEach(g, gpus)
	{
		char a[32], b[32], c[32];

		printf("  GPU%d: %s, pci %s, numa %s, memory %s, nvlinks %s\n", i++,
		       s_or(g, "name", "unknown"), s_or(g, "pci_bus_id", "-"),
		       n_or(g, "numa_node", a, sizeof(a)), q_or(g, "memory_mb", "MiB", b, sizeof(b)),
		       n_or(g, "nvlinks", c, sizeof(c)));
	}
}

static void print_nics(const cJSON *t)
{
	const cJSON *nics = cJSON_GetObjectItem(t, "nics"), *n;
	int i = 0;

	if (cJSON_GetArraySize(nics) == 0) {
		printf("NICs: none\n");
		return;
	}
	printf("NICs: %d\n", cJSON_GetArraySize(nics));
	cJSON_ArrayForEach(n, nics)
	{
		const cJSON *provs = cJSON_GetObjectItem(n, "providers"), *p;
		char a[32], b[32];
		int k = 0;

		printf("  NIC%d: %s, pci %s, numa %s, speed %s%s", i++, s_or(n, "name", "-"),
		       s_or(n, "pci_bus_id", "-"), n_or(n, "numa_node", a, sizeof(a)),
		       q_or(n, "speed_mbps", "Mb/s", b, sizeof(b)),
		       cJSON_IsTrue(cJSON_GetObjectItem(n, "efa")) ? ", EFA" : "");
		if (cJSON_IsString(cJSON_GetObjectItem(n, "ib_device")))
			printf(", rdma %s", s_or(n, "ib_device", "-"));
		cJSON_ArrayForEach(p, provs)
		{
			printf("%s%s (%s)", k++ ? ", " : "; libfabric ", s_or(p, "provider", "?"),
			       s_or(p, "domain", "?"));
		}
		printf("\n");
	}
}

/* The matrix of nvidia-smi topo -m: GPUs then NICs across, GPUs down. */
static void print_matrix(const cJSON *t)
{
	const cJSON *gpus = cJSON_GetObjectItem(t, "gpus"), *nics = cJSON_GetObjectItem(t, "nics");
	const cJSON *links = cJSON_GetObjectItem(t, "gpu_links"),
		    *gnic = cJSON_GetObjectItem(t, "gpu_nic");
	int ng = cJSON_GetArraySize(gpus), nn = cJSON_GetArraySize(nics);
	char name[32];

	if (ng == 0)
		return;
	printf("\n%-8s", "");
	for (int j = 0; j < ng; j++) {
		snprintf(name, sizeof(name), "GPU%d", j);
		printf("%-7s", name);
	}
	for (int j = 0; j < nn; j++) {
		snprintf(name, sizeof(name), "NIC%d", j);
		printf("%-7s", name);
	}
	printf("%-15s%s\n", "CPU Affinity", "NUMA Affinity");
	for (int i = 0; i < ng; i++) {
		const cJSON *g = cJSON_GetArrayItem(gpus, i);
		const cJSON *lr = cJSON_GetArrayItem(links, i), *nr = cJSON_GetArrayItem(gnic, i);
		char a[32];

		snprintf(name, sizeof(name), "GPU%d", i);
		printf("%-8s", name);
		for (int j = 0; j < ng; j++)
			printf("%-7s", cell(cJSON_GetArrayItem(lr, j)));
		for (int j = 0; j < nn; j++)
			printf("%-7s", cell(cJSON_GetArrayItem(nr, j)));
		printf("%-15s%s\n", s_or(g, "cpus", "N/A"), n_or(g, "numa_node", a, sizeof(a)));
	}
	printf("\nLegend:\n\n"
	       "  X    = Self\n"
	       "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA "
	       "nodes\n"
	       "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host "
	       "Bridges within a NUMA node\n"
	       "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the "
	       "CPU)\n"
	       "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe "
	       "Host Bridge)\n"
	       "  PIX  = Connection traversing at most a single PCIe bridge\n"
	       "  NV#  = Connection traversing a bonded set of # NVLinks\n");
	if (nn > 0) {
		printf("\nNIC Legend:\n\n");
		for (int j = 0; j < nn; j++)
			printf("  NIC%d: %s\n", j, s_or(cJSON_GetArrayItem(nics, j), "name", "-"));
	}
}

static int print_text(const char *json)
{
	cJSON *t = cJSON_Parse(json);

	if (t == NULL) {
		tool_warn("out of memory");
		return TOOL_EXIT_FAILURE;
	}
	print_cpu(t);
	print_gpus(t);
	print_nics(t);
	print_matrix(t);
	cJSON_Delete(t);
	return TOOL_EXIT_OK;
}

static int list_env(int json)
{
	size_t n = smddp_param_count();

	/* A bad value fails the first call as well as any: nothing printed then. */
	int rc = smddp_param_info(0, NULL, NULL, NULL, NULL, NULL);

	if (rc != SMDDP_OK) {
		tool_warn("%s", *smddp_last_error(NULL) ? smddp_last_error(NULL) : smddp_strerror(rc));
		return TOOL_EXIT_FAILURE;
	}
	if (!json)
		printf("%-28s %-12s %-8s %s\n", "VARIABLE", "VALUE", "SOURCE", "DEFAULT");
	for (size_t i = 0; i < n; i++) {
		const char *name, *def, *value, *source, *help;

		if (smddp_param_info(i, &name, &def, &value, &source, &help) != SMDDP_OK)
			continue;
		if (json) { /* JSON lines: one variable a line */
			cJSON *o = cJSON_CreateObject();
			char *s;

			cJSON_AddStringToObject(o, "name", name);
			cJSON_AddStringToObject(o, "value", value);
			cJSON_AddStringToObject(o, "source", source);
			cJSON_AddStringToObject(o, "default", def);
			cJSON_AddStringToObject(o, "help", help);
			s = cJSON_PrintUnformatted(o);
			cJSON_Delete(o);
			if (s == NULL) {
				tool_warn("out of memory");
				return TOOL_EXIT_FAILURE;
			}
			printf("%s\n", s);
			cJSON_free(s);
			continue;
		}
		printf("%-28s %-12s %-8s %s\n", name, *value ? value : "-", source,
		       *def ? def : "-");
		printf("    %s\n", help);
	}
	return TOOL_EXIT_OK;
}

/* --expect NAME finds a shipped layout when NAME is not a file. */
static const char *expect_path(const char *arg, char *buf, size_t len)
{
	struct stat st;

	if (strchr(arg, '/') != NULL || stat(arg, &st) == 0)
		return arg;
	snprintf(buf, len, "%s/%s.json", SMDDP_EXPECTDIR, arg);
	if (stat(buf, &st) == 0)
		return buf;
	snprintf(buf, len, "%s/%s", SMDDP_EXPECTDIR, arg);
	if (stat(buf, &st) == 0)
		return buf;
	return NULL;
}

static int check(const struct smddp_topo *t, const char *arg, int json)
{
	char buf[4096], *report = NULL;
	const char *path = expect_path(arg, buf, sizeof(buf));
	int ndiff = 0, rc;

	if (path == NULL) {
		tool_warn("--expect: %s: no such file, nor %s/%s.json", arg, SMDDP_EXPECTDIR, arg);
		return TOOL_EXIT_FAILURE;
	}
	rc = smddp_topo_compare(t, path, &report, &ndiff);
	if (rc != SMDDP_OK) {
		tool_warn("--expect: %s", smddp_topo_error());
		return TOOL_EXIT_FAILURE;
	}
	if (json) {
		cJSON *o = cJSON_CreateObject(), *d = cJSON_CreateArray();
		char *s;

		cJSON_AddStringToObject(o, "expect", path);
		cJSON_AddBoolToObject(o, "match", ndiff == 0);
		cJSON_AddItemToObject(o, "differences", d);
		for (char *line = strtok(report, "\n"); line != NULL; line = strtok(NULL, "\n"))
			cJSON_AddItemToArray(d, cJSON_CreateString(line));
		s = cJSON_PrintUnformatted(o); /* one line: a verdict per host */
		if (s != NULL)
			printf("%s\n", s);
		cJSON_free(s);
		cJSON_Delete(o);
	} else if (ndiff == 0) {
		printf("This node matches %s\n", path);
	} else {
		printf("%s", report);
		printf("%d difference%s from %s\n", ndiff, ndiff == 1 ? "" : "s", path);
	}
	free(report);
	return ndiff ? TOOL_EXIT_CHECK : TOOL_EXIT_OK;
}

int main(int argc, char **argv)
{
	enum { OPT_ENV = 256 };
	static const struct option longopts[] = {
		{"json", no_argument, NULL, 'j'},
		{"sysroot", required_argument, NULL, 's'},
		{"topo", required_argument, NULL, 't'},
		{"expect", required_argument, NULL, 'e'},
		{"env", no_argument, NULL, OPT_ENV},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	const char *sysroot = NULL, *topo = NULL, *expect = NULL;
	int json = 0, env = 0, c, rc;
	struct smddp_topo *t = NULL;
	char *text = NULL;

	tool_init(PROG);
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:js:t:e:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'j': json = 1; break;
		case 's': sysroot = optarg; break;
		case 't': topo = optarg; break;
		case 'e': expect = optarg; break;
		case OPT_ENV: env = 1; break;
		case 'h': usage(); return TOOL_EXIT_OK;
		case 'V': tool_print_version(); return TOOL_EXIT_OK;
		default: tool_getopt_error_long(c, optopt, argv, optind, longopts);
		}
	}
	if (optind < argc)
		tool_usage_error("unexpected argument '%s'", argv[optind]);
	if (sysroot != NULL && topo != NULL)
		tool_usage_error("--sysroot and --topo: choose one source");
	if (env && (sysroot != NULL || topo != NULL || expect != NULL))
		tool_usage_error("--env lists variables; it takes no topology options");
	if (sysroot != NULL && *sysroot == '\0')
		tool_usage_error("--sysroot: empty directory name");
	if (topo != NULL && *topo == '\0')
		tool_usage_error("--topo: empty file name");
	if (expect != NULL && *expect == '\0')
		tool_usage_error("--expect: empty file name");

	if (env)
		return list_env(json);

	if (topo != NULL)
		rc = smddp_topo_load(strcmp(topo, "-") == 0 ? "/dev/stdin" : topo, &t);
	else if (sysroot != NULL)
		rc = smddp_topo_discover(sysroot, &t);
	else
		rc = smddp_topo_get(&t);
	if (rc != SMDDP_OK) {
		tool_warn("%s", *smddp_topo_error() ? smddp_topo_error() : smddp_strerror(rc));
		return TOOL_EXIT_FAILURE;
	}
	if (expect != NULL) {
		rc = check(t, expect, json);
		smddp_topo_free(t);
		return rc;
	}
	rc = smddp_topo_json(t, &text);
	smddp_topo_free(t);
	if (rc != SMDDP_OK) {
		tool_warn("%s", smddp_topo_error());
		return TOOL_EXIT_FAILURE;
	}
	if (json) {
		fputs(text, stdout);
		rc = TOOL_EXIT_OK;
	} else {
		rc = print_text(text);
	}
	free(text);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		tool_warn_errno("write error");
		return TOOL_EXIT_FAILURE;
	}
	return rc;
}
