/* cmd/run/sagemaker.c - smddp-run on SageMaker: the plan from its configuration, workers */

/*
 * resourceconfig.json, hyperparameters.json, the estimator's distribution
 * and the SM_* variables, read the way SageMaker's training toolkit reads
 * them, into a struct plan; errors name the file and key (exit 2). A host
 * that is not the master of an mpirun form waits for mpirun's daemon
 * (worker_wait(), at the end).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <cjson/cJSON.h>

#include "run/launch.h"
#include "run/run.h"

/* EFA-capable instance types (public AWS specifications) and whether they
 * support RDMA reads from device memory (FI_EFA_USE_DEVICE_RDMA). */
static const struct {
	const char *type;
	bool rdma;
} efa_types[] = {
	{ "p3dn.24xlarge",  false },
	{ "p4d.24xlarge",   true },
	{ "p4de.24xlarge",  true },
	{ "p5.48xlarge",    true },
	{ "p5e.48xlarge",   true },
	{ "p5en.48xlarge",  true },
	{ "trn1.32xlarge",  true },
	{ "trn1n.32xlarge", true },
	{ "g4dn.8xlarge",   false },
	{ "g4dn.12xlarge",  false },
	{ "g4dn.16xlarge",  false },
	{ "g4dn.metal",     false },
	{ "g5.48xlarge",    false },
};

/* -1: not an EFA type; else whether device RDMA works. "ml." is optional. */
int efa_rdma(const char *type)
{
	if (!type)
		return -1;
	if (strncmp(type, "ml.", 3) == 0)
		type += 3;
	for (size_t i = 0; i < sizeof efa_types / sizeof efa_types[0]; i++)
		if (strcmp(type, efa_types[i].type) == 0)
			return efa_types[i].rdma;
	return -1;
}

/* Errors in SageMaker's configuration: a clear line, exit 2. */
noreturn TOOL_PRINTF(1, 2) static void config_error(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	tool_warn("%s", msg);
	exit(TOOL_EXIT_USAGE);
}

static char *read_file(const char *path, const char *what)
{
	FILE *f = fopen(path, "re");
	if (!f)
		config_error("cannot open %s '%s': %s", what, path, strerror(errno));
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	if (!buf)
		out_of_memory();
	for (;;) {
		if (len + 1 >= cap) {
			if (cap >= (64u << 20))
				config_error("%s '%s' is larger than 64 MiB", what, path);
			char *nb = realloc(buf, cap *= 2);
			if (!nb)
				out_of_memory();
			buf = nb;
		}
		size_t n = fread(buf + len, 1, cap - len - 1, f);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(f))
		config_error("cannot read %s '%s': %s", what, path, strerror(errno));
	fclose(f);
	buf[len] = '\0';
	return buf;
}

/* TEXT as JSON; WHAT names it in errors, with the line of the problem. */
static cJSON *parse_json(const char *text, const char *what)
{
	const char *end = NULL;
	cJSON *j = cJSON_ParseWithOpts(text, &end, true);
	if (!j) {
		const char *at = end ? end : cJSON_GetErrorPtr();
		int line = 1;
		for (const char *p = text; at && p < at && *p; p++)
			line += *p == '\n';
		config_error("%s is not valid JSON (line %d, near '%.20s')", what, line,
		             at && *at ? at : "end of input");
	}
	return j;
}

static cJSON *load_json_file(const char *path, const char *what)
{
	char *text = read_file(path, what);
	char desc[4200];
	snprintf(desc, sizeof desc, "%s '%s'", what, path);
	cJSON *j = parse_json(text, desc);
	free(text);
	return j;
}

static const char *json_string(const cJSON *obj, const char *key, const char *what)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!v || cJSON_IsNull(v))
		return NULL;
	if (!cJSON_IsString(v))
		config_error("%s: \"%s\" must be a string", what, key);
	return v->valuestring;
}

/* A JSON array of host names into SV. */
static void json_hosts(const cJSON *arr, struct strv *sv, const char *what)
{
	const cJSON *h;
	if (!cJSON_IsArray(arr))
		config_error("%s: \"hosts\" must be an array of host names", what);
	cJSON_ArrayForEach(h, arr) {
		if (!cJSON_IsString(h) || !valid_host(h->valuestring))
			config_error("%s: \"hosts\" holds an invalid host name", what);
		if (!strv_has(sv, h->valuestring))
			strv_add(sv, h->valuestring);
	}
}

/* Hyperparameter values are JSON encoded into strings ("true", "8",
 * "\"-x FOO\""); SM_HPS holds them decoded. Returns a new item. */
static cJSON *hp_value(const cJSON *v)
{
	if (cJSON_IsString(v)) {
		cJSON *d = cJSON_Parse(v->valuestring);
		if (d)
			return d;
	}
	return cJSON_Duplicate(v, true);
}

/* The hyperparameter form of the distribution, as the estimator's
 * distribution argument, so that one parser reads both. */
static cJSON *hp_to_distribution(const cJSON *hps, const char *what, char **itype)
{
	static const struct {
		const char *hp, *form, *sub, *key;
	} map[] = {
		{ "sagemaker_distributed_dataparallel_enabled", "smdistributed", "dataparallel", "enabled" },
		{ "sagemaker_distributed_dataparallel_custom_mpi_options", "smdistributed", "dataparallel",
		  "custom_mpi_options" },
		{ "sagemaker_mpi_enabled", "mpi", NULL, "enabled" },
		{ "sagemaker_mpi_num_of_processes_per_host", "mpi", NULL, "processes_per_host" },
		{ "sagemaker_mpi_custom_mpi_options", "mpi", NULL, "custom_mpi_options" },
		{ "sagemaker_pytorch_ddp_enabled", "pytorchddp", NULL, "enabled" },
		{ "sagemaker_torch_distributed_enabled", "torch_distributed", NULL, "enabled" },
		{ "sagemaker_parameter_server_enabled", "parameter_server", NULL, "enabled" },
		{ "mp_parameters", "smdistributed", "modelparallel", "parameters" },
		{ "sagemaker_distribution_instance_groups", "instance_groups", NULL, NULL },
	};
	static const char *const ours[] = {
		"sagemaker_distributed_", "sagemaker_mpi_", "sagemaker_pytorch_", "sagemaker_torch_",
		"sagemaker_parameter_server", "sagemaker_distribution_",
	};
	cJSON *d = cJSON_CreateObject();
	const cJSON *kv;

	if (!d)
		out_of_memory();
	cJSON_ArrayForEach(kv, hps) {
		size_t i;
		if (strcmp(kv->string, "sagemaker_instance_type") == 0) {
			if (cJSON_IsString(kv)) {
				cJSON *t = hp_value(kv);
				free(*itype); /* a key given twice: the last one */
				*itype = xstrdup(cJSON_IsString(t) ? t->valuestring : kv->valuestring);
				cJSON_Delete(t);
			}
			continue;
		}
		for (i = 0; i < sizeof map / sizeof map[0]; i++)
			if (strcmp(kv->string, map[i].hp) == 0)
				break;
		if (i == sizeof map / sizeof map[0]) {
			for (size_t k = 0; k < sizeof ours / sizeof ours[0]; k++)
				if (strncmp(kv->string, ours[k], strlen(ours[k])) == 0)
					config_error("%s: unknown hyperparameter \"%s\"", what, kv->string);
			continue;   /* the program's own hyperparameter */
		}
		cJSON *val = hp_value(kv);
		if (!map[i].key) {
			cJSON_AddItemToObject(d, map[i].form, val);
			continue;
		}
		cJSON *form = cJSON_GetObjectItemCaseSensitive(d, map[i].form);
		if (!form)
			form = cJSON_AddObjectToObject(d, map[i].form);
		if (map[i].sub) {
			cJSON *sub = cJSON_GetObjectItemCaseSensitive(form, map[i].sub);
			if (!sub)
				sub = cJSON_AddObjectToObject(form, map[i].sub);
			form = sub;
		}
		if (strcmp(map[i].hp, "mp_parameters") == 0)
			cJSON_AddTrueToObject(form, "enabled");
		cJSON_AddItemToObject(form, map[i].key, val);
	}
	return d;
}

struct dist {
	const char *form;        /* NULL: none enabled */
	bool mpirun;
	long ppn;                /* 0: not given */
	struct strv mpi_opts;
	char *mp_params;         /* smdistributed.modelparallel parameters, JSON */
	struct strv groups;      /* instance_groups */
};

static bool dist_bool(const cJSON *v, const char *what, const char *key)
{
	if (cJSON_IsBool(v))
		return cJSON_IsTrue(v);
	if (cJSON_IsString(v) && (strcasecmp(v->valuestring, "true") == 0 ||
	                          strcasecmp(v->valuestring, "false") == 0))
		return strcasecmp(v->valuestring, "true") == 0;
	config_error("%s: \"%s\" must be true or false", what, key);
}

/* Checks OBJ's keys against KNOWN (space-separated) and returns enabled. */
static bool dist_form(const cJSON *obj, const char *what, const char *name, const char *known)
{
	const cJSON *kv;
	bool enabled = false;
	char path[128];

	if (!cJSON_IsObject(obj))
		config_error("%s: \"%s\" must be an object such as {\"enabled\": true}", what, name);
	cJSON_ArrayForEach(kv, obj) {
		size_t n = strlen(kv->string);
		const char *k = known;
		bool ok = false;
		while (*k && !ok) {
			size_t m = strcspn(k, " ");
			ok = m == n && strncmp(k, kv->string, n) == 0;
			k += m + (k[m] == ' ');
		}
		if (!ok)
			config_error("%s: unknown key \"%s\" in \"%s\" (known: %s)", what, kv->string, name,
			             known);
		snprintf(path, sizeof path, "%s.%s", name, kv->string);
		if (strcmp(kv->string, "enabled") == 0)
			enabled = dist_bool(kv, what, path);
	}
	return enabled;
}

static void dist_mpi_options(const cJSON *obj, struct dist *d, const char *what, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "custom_mpi_options");
	if (!v)
		return;
	if (!cJSON_IsString(v))
		config_error("%s: \"%s.custom_mpi_options\" must be a string", what, name);
	if (split_words(v->valuestring, &d->mpi_opts) < 0)
		config_error("%s: \"%s.custom_mpi_options\": a quote is not closed", what, name);
}

static void parse_distribution(const cJSON *j, struct dist *d, const char *what)
{
	static const char known[] =
		"torch_distributed pytorchddp smdistributed mpi parameter_server instance_groups";
	const cJSON *kv;
	bool torch = false, ddp = false, sdp = false, smp = false, mpi = false, ps = false;
	const cJSON *jmpi = NULL, *jsdp = NULL, *jsmp = NULL;

	memset(d, 0, sizeof *d);
	if (!cJSON_IsObject(j))
		config_error("%s must be a JSON object such as {\"torch_distributed\": "
		             "{\"enabled\": true}}", what);
	cJSON_ArrayForEach(kv, j) {
		const char *k = kv->string;
		if (strcmp(k, "torch_distributed") == 0) {
			torch = dist_form(kv, what, k, "enabled");
		} else if (strcmp(k, "pytorchddp") == 0) {
			ddp = dist_form(kv, what, k, "enabled");
		} else if (strcmp(k, "parameter_server") == 0) {
			ps = dist_form(kv, what, k, "enabled");
		} else if (strcmp(k, "mpi") == 0) {
			mpi = dist_form(kv, what, k, "enabled processes_per_host custom_mpi_options");
			jmpi = kv;
		} else if (strcmp(k, "smdistributed") == 0) {
			const cJSON *s;
			if (!cJSON_IsObject(kv))
				config_error("%s: \"smdistributed\" must be an object", what);
			cJSON_ArrayForEach(s, kv) {
				if (strcmp(s->string, "dataparallel") == 0) {
					sdp = dist_form(s, what, "smdistributed.dataparallel",
					                "enabled custom_mpi_options");
					jsdp = s;
				} else if (strcmp(s->string, "modelparallel") == 0) {
					smp = dist_form(s, what, "smdistributed.modelparallel",
					                "enabled parameters");
					jsmp = s;
				} else {
					config_error("%s: unknown key \"%s\" in \"smdistributed\" (known: "
					             "dataparallel modelparallel)", what, s->string);
				}
			}
		} else if (strcmp(k, "instance_groups") == 0) {
			const cJSON *g;
			if (!cJSON_IsArray(kv))
				config_error("%s: \"instance_groups\" must be an array", what);
			cJSON_ArrayForEach(g, kv) {
				const char *name = cJSON_IsString(g) ? g->valuestring
				                   : json_string(g, "instance_group_name", what);
				if (!name)
					config_error("%s: \"instance_groups\" holds neither a name nor an object "
					             "with \"instance_group_name\"", what);
				strv_add(&d->groups, name);
			}
		} else {
			config_error("%s: unknown key \"%s\" (known: %s)", what, k, known);
		}
	}

	const char *on[6];
	int non = 0;
	if (torch)
		on[non++] = "torch_distributed";
	if (ddp)
		on[non++] = "pytorchddp";
	if (sdp)
		on[non++] = "smdistributed.dataparallel";
	if (smp)
		on[non++] = "smdistributed.modelparallel";
	if (ps)
		on[non++] = "parameter_server";
	if (mpi && !smp)
		on[non++] = "mpi";
	if (non > 1)
		config_error("%s: conflicting distribution: %s and %s are both enabled", what, on[0],
		             on[1]);
	if (smp && !mpi)
		config_error("%s: smdistributed.modelparallel runs through MPI: add \"mpi\": "
		             "{\"enabled\": true, \"processes_per_host\": N}", what);
	if (non == 0)
		return;
	d->form = on[0];
	d->mpirun = !torch && !ps;
	if (mpi) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(jmpi, "processes_per_host");
		double x = 0;
		if (v && cJSON_IsString(v))
			tool_parse_double(v->valuestring, 1, MAX_NPROC, &x);
		else if (v && cJSON_IsNumber(v))
			x = v->valuedouble;
		if (v && (x < 1 || x > MAX_NPROC || x != (long)x))
			config_error("%s: \"mpi.processes_per_host\" must be a whole number from 1 to %d",
			             what, MAX_NPROC);
		d->ppn = (long)x;
		dist_mpi_options(jmpi, d, what, "mpi");
	}
	if (sdp)
		dist_mpi_options(jsdp, d, what, "smdistributed.dataparallel");
	if (smp) {
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(jsmp, "parameters");
		if (p && !cJSON_IsObject(p))
			config_error("%s: \"smdistributed.modelparallel.parameters\" must be an object",
			             what);
		d->mp_params = p ? cJSON_PrintUnformatted(p) : xstrdup("{}");
		if (!d->mp_params)
			out_of_memory();
	}
}

/* What the plan does not keep of the distribution d (its mpi_opts are the
 * plan's), of the hyperparameters' one dh where --distribution overrode it,
 * and the hyperparameters' instance type (the plan has a copy). */
static void dist_unused(struct dist *d, struct dist *dh, char *hp_itype)
{
	strv_free(&d->groups);
	free(d->mp_params);
	if (dh) {
		strv_free(&dh->groups);
		strv_free(&dh->mpi_opts);
		free(dh->mp_params);
	}
	free(hp_itype);
}

static const char *sm_config_dir(void)
{
	const char *d = getenv("SMDDP_SM_CONFIG_DIR");
	return d && *d ? d : "/opt/ml/input/config";
}

bool sm_detect(void)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/resourceconfig.json", sm_config_dir());
	return access(path, F_OK) == 0;
}

/* resourceconfig: the file given by flag, else SM_RESOURCE_CONFIG, else
 * the file of the configuration folder, else SM_HOSTS alone; *what names
 * where it came from, for messages. */
static cJSON *load_resource_config(const struct options *o, const char *rcpath, const char **what)
{
	const char *env;
	cJSON *rc;

	if (o->resource_config) {
		rc = load_json_file(o->resource_config, "resource config");
		*what = o->resource_config;
	} else if ((env = getenv("SM_RESOURCE_CONFIG")) && *env) {
		rc = parse_json(env, "SM_RESOURCE_CONFIG");
		*what = "SM_RESOURCE_CONFIG";
	} else if (access(rcpath, F_OK) == 0) {
		rc = load_json_file(rcpath, "resource config");
		*what = rcpath;
	} else {
		rc = cJSON_CreateObject();
		*what = "SM_HOSTS";
		if (!getenv("SM_HOSTS") || !getenv("SM_CURRENT_HOST"))
			config_error("--sagemaker: no resource config: give --resource-config FILE, or "
			             "set SM_RESOURCE_CONFIG, or SM_HOSTS and SM_CURRENT_HOST (looked for "
			             "%s)", rcpath);
	}
	if (!cJSON_IsObject(rc))
		config_error("%s: expected a JSON object", *what);
	return rc;
}

/* This host as the resource config says, SM_* over it (unless the config
 * was given by flag). The strings point into rc or the environment. */
struct sm_host {
	const char *cur, *netif, *itype, *group;
	struct strv hosts;
};

static void read_host(const struct options *o, const cJSON *rc, const char *rcwhat,
                      struct sm_host *h)
{
	const char *env;

	h->cur = json_string(rc, "current_host", rcwhat);
	h->netif = json_string(rc, "network_interface_name", rcwhat);
	h->itype = json_string(rc, "current_instance_type", rcwhat);
	const char *g1 = json_string(rc, "current_group_name", rcwhat);
	const char *g2 = json_string(rc, "current_instance_group", rcwhat);
	if (g1 && g2 && strcmp(g1, g2) != 0)
		config_error("%s: conflicting \"current_group_name\" (%s) and "
		             "\"current_instance_group\" (%s)", rcwhat, g1, g2);
	h->group = g1 ? g1 : g2;
	const cJSON *jh = cJSON_GetObjectItemCaseSensitive(rc, "hosts");
	if (jh)
		json_hosts(jh, &h->hosts, rcwhat);
	if (!o->resource_config) {
		if ((env = getenv("SM_CURRENT_HOST")) && *env)
			h->cur = env;
		if ((env = getenv("SM_NETWORK_INTERFACE_NAME")) && *env)
			h->netif = env;
		if ((env = getenv("SM_HOSTS")) && *env) {
			cJSON *j = parse_json(env, "SM_HOSTS");
			struct strv fresh = { 0 };
			json_hosts(j, &fresh, "SM_HOSTS");
			strv_free(&h->hosts);
			h->hosts = fresh;
			cJSON_Delete(j);
		}
	}
	if (!h->cur)
		config_error("%s: no \"current_host\"", rcwhat);
	if (!valid_host(h->cur))
		config_error("%s: invalid current host '%s'", rcwhat, h->cur);
	if (h->hosts.n == 0)
		config_error("%s: no \"hosts\"", rcwhat);
}

/* hyperparameters: the file given by flag, else SM_HPS, else the file of
 * the configuration folder, else none (NULL). */
static cJSON *load_hyperparameters(const struct options *o, const char *hppath, const char **what)
{
	const char *env;
	cJSON *hps = NULL;

	if (o->hyperparameters) {
		hps = load_json_file(o->hyperparameters, "hyperparameters");
		*what = o->hyperparameters;
	} else if ((env = getenv("SM_HPS")) && *env) {
		hps = parse_json(env, "SM_HPS");
		*what = "SM_HPS";
	} else if (access(hppath, F_OK) == 0) {
		hps = load_json_file(hppath, "hyperparameters");
		*what = hppath;
	}
	if (hps && !cJSON_IsObject(hps))
		config_error("%s: expected a JSON object", *what);
	return hps;
}

/* The distribution: the flag, else the hyperparameter form (*dh, which
 * must agree with the flag's where both are given). */
static void read_distribution(const struct options *o, const cJSON *hps, const char *hpwhat,
                              struct dist *d, struct dist *dh, char **hp_itype)
{
	if (hps) {
		cJSON *hd = hp_to_distribution(hps, hpwhat, hp_itype);
		parse_distribution(hd, dh, hpwhat);
		cJSON_Delete(hd);
	}
	if (o->distribution) {
		const char *s = o->distribution + strspn(o->distribution, " \t\r\n");
		cJSON *j = *s == '{' || *s == '[' ? parse_json(s, "--distribution")
		                     : load_json_file(o->distribution, "distribution");
		parse_distribution(j, d, "--distribution");
		cJSON_Delete(j);
		if (dh->form && (!d->form || strcmp(d->form, dh->form) != 0))
			config_error("conflicting distribution: --distribution says %s, %s says %s",
			             d->form ? d->form : "none", hpwhat, dh->form);
	} else {
		*d = *dh;
	}
}

/* Instance groups: only the hosts of the groups the distribution names
 * train; and this host's instance type from its group when nothing else
 * said it. */
static void apply_groups(const cJSON *rc, const char *rcwhat, const struct dist *d,
                         struct sm_host *h)
{
	const cJSON *igs = cJSON_GetObjectItemCaseSensitive(rc, "instance_groups");
	if (d->groups.n) {
		struct strv kept = { 0 };
		if (!cJSON_IsArray(igs))
			config_error("the distribution names instance groups but %s has no "
			             "\"instance_groups\"", rcwhat);
		for (size_t i = 0; i < d->groups.n; i++) {
			const cJSON *g, *found = NULL;
			cJSON_ArrayForEach(g, igs)
				if (cJSON_IsObject(g) && json_string(g, "instance_group_name", rcwhat) &&
				    strcmp(json_string(g, "instance_group_name", rcwhat), d->groups.v[i]) == 0)
					found = g;
			if (!found)
				config_error("instance group '%s' is not in %s", d->groups.v[i], rcwhat);
			json_hosts(cJSON_GetObjectItemCaseSensitive(found, "hosts"), &kept, rcwhat);
		}
		strv_free(&h->hosts);
		h->hosts = kept;
	}
	if (!h->itype && h->group && cJSON_IsArray(igs)) {
		const cJSON *g;
		cJSON_ArrayForEach(g, igs)
			if (cJSON_IsObject(g) && json_string(g, "instance_group_name", rcwhat) &&
			    strcmp(json_string(g, "instance_group_name", rcwhat), h->group) == 0)
				h->itype = json_string(g, "instance_type", rcwhat);
	}
}

/* Processes per host: -n, else the distribution's, else the GPUs
 * (SM_NUM_GPUS, else counted), at least one. */
static long plan_ppn(const struct options *o, const struct dist *d)
{
	const char *env;
	long gpus = 0, ppn;

	if ((env = getenv("SM_NUM_GPUS")) && *env &&
	    tool_parse_long(env, 0, MAX_NPROC, &gpus) < 0)
		config_error("SM_NUM_GPUS='%s': expected a number from 0 to %d", env, MAX_NPROC);
	if (!env || !*env)
		gpus = count_gpus();
	ppn = o->nproc ? o->nproc : d->ppn ? d->ppn : gpus > 0 ? gpus : 1;
	return ppn > MAX_NPROC ? MAX_NPROC : ppn;
}

/* parameter_server: one server and one worker per host, as SageMaker's
 * TensorFlow containers: workers on port 2222, servers on 2223. */
static void plan_parameter_server(const struct options *o, struct plan *p)
{
	if (o->nproc)
		config_error("parameter_server runs one server and one worker per host: "
		             "-n does not apply");
	p->ppn = 2;
	char *cluster = xasprintf("{\"cluster\":{\"ps\":[");
	for (int role = 0; role < 2; role++) {
		for (size_t i = 0; i < p->hosts.n; i++) {
			char *c = xasprintf("%s%s\"%s:%d\"", cluster, i ? "," : "", p->hosts.v[i],
			                    role ? 2222 : 2223);
			free(cluster);
			cluster = c;
		}
		char *c = xasprintf("%s]%s", cluster, role ? "}" : ",\"worker\":[");
		free(cluster);
		cluster = c;
	}
	p->tf_config[0] = xasprintf("TF_CONFIG=%s,\"environment\":\"cloud\",\"task\":{\"type\":\"ps\","
	                            "\"index\":%d}}", cluster, p->node_rank);
	p->tf_config[1] = xasprintf("TF_CONFIG=%s,\"environment\":\"cloud\",\"task\":{\"type\":\"worker\","
	                            "\"index\":%d}}", cluster, p->node_rank);
	free(cluster);
}

/* SageMaker: resourceconfig.json, hyperparameters.json, the distribution
 * and SM_* into a plan. Precedence: a file given by flag, then the SM_*
 * variables, then the files of the configuration folder. */
void sagemaker_plan(const struct options *o, struct plan *p)
{
	char rcpath[4200], hppath[4200];
	const char *rcwhat, *hpwhat = NULL;
	struct sm_host h = { 0 };
	struct dist d = { 0 }, dh = { 0 };
	char *hp_itype = NULL;

	snprintf(rcpath, sizeof rcpath, "%s/resourceconfig.json", sm_config_dir());
	snprintf(hppath, sizeof hppath, "%s/hyperparameters.json", sm_config_dir());
	cJSON *rc = load_resource_config(o, rcpath, &rcwhat);
	read_host(o, rc, rcwhat, &h);
	cJSON *hps = load_hyperparameters(o, hppath, &hpwhat);
	read_distribution(o, hps, hpwhat, &d, &dh, &hp_itype);
	if (!h.itype)
		h.itype = hp_itype;
	apply_groups(rc, rcwhat, &d, &h);

	qsort(h.hosts.v, h.hosts.n, sizeof *h.hosts.v, cmp_str);
	p->hosts = h.hosts;
	p->current_host = xstrdup(h.cur);
	p->node_rank = -1;
	for (size_t i = 0; i < h.hosts.n; i++)
		if (strcmp(h.hosts.v[i], h.cur) == 0)
			p->node_rank = (int)i;
	p->form = d.form ? d.form : "local";
	if (p->node_rank < 0) {
		if (!d.groups.n)
			config_error("%s: the current host '%s' is not among the hosts", rcwhat, h.cur);
		/* in no group that trains: this host idles */
		p->kind = PLAN_IDLE;
		strv_free(&d.mpi_opts);
		goto out;
	}
	p->netif = o->netif ? o->netif : h.netif ? xstrdup(h.netif) : NULL;
	p->instance_type = h.itype ? xstrdup(h.itype) : NULL;
	p->mpi_opts = d.mpi_opts;
	if (d.mp_params)
		envv_set(&p->env, "SM_HP_MP_PARAMETERS", d.mp_params, true);
	p->ppn = plan_ppn(o, &d);
	if (d.form && strcmp(d.form, "parameter_server") == 0)
		plan_parameter_server(o, p);
	if (d.mpirun)
		p->kind = p->node_rank == 0 ? PLAN_MPIRUN : PLAN_WORKER;
	else
		p->kind = PLAN_LOCAL;
out:
	dist_unused(&d, o->distribution ? &dh : NULL, hp_itype);
	cJSON_Delete(rc);
	cJSON_Delete(hps);
}


/* ---- a SageMaker host that is not the master ----------------------------
 *
 * With an mpirun form, the master host's smddp-run starts mpirun, which
 * reaches the other hosts (ssh, by default) and starts Open MPI's daemon
 * there. The others' smddp-run must keep their container alive meanwhile:
 * it waits (at most --worker-wait) for that daemon to appear, then for it
 * to exit, without polling. */

/* Open MPI's daemon on this host: in our network namespace, so that hosts
 * that share a kernel (containers, the test cluster) keep theirs apart. */
static pid_t find_daemon(void)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	struct stat self_net, st;
	pid_t found = 0;
	if (!d)
		return 0;
	bool have_net = stat("/proc/self/ns/net", &self_net) == 0;
	while (!found && (de = readdir(d))) {
		char path[300], comm[64] = "";
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/ns/net", de->d_name);
		if (have_net && (stat(path, &st) != 0 || st.st_ino != self_net.st_ino ||
		                 st.st_dev != self_net.st_dev))
			continue;
		snprintf(path, sizeof path, "/proc/%s/comm", de->d_name);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		if (fgets(comm, sizeof comm, f)) {
			comm[strcspn(comm, "\n")] = '\0';
			if (strcmp(comm, "orted") == 0 || strcmp(comm, "prted") == 0)
				found = (pid_t)atol(de->d_name);
		}
		fclose(f);
	}
	closedir(d);
	return found;
}

int worker_wait(const struct options *o, const struct plan *p)
{
	int64_t until = sd_now_ms() + sd_ms_from_s(o->worker_wait_s);
	int64_t stop = o->timeout_s > 0 ? sd_now_ms() + sd_ms_from_s(o->timeout_s) : 0;
	pid_t pid;

	tool_warn("host %s runs ranks %ld..%ld of this %s job; waiting for mpirun on %s to "
	          "start them", p->current_host, p->node_rank * p->ppn,
	          p->node_rank * p->ppn + p->ppn - 1, p->form, p->hosts.v[0]);
	while (!(pid = find_daemon())) {
		if (sd_now_ms() >= until) {
			tool_warn("mpirun on %s did not reach host %s within %g seconds (--worker-wait)",
			          p->hosts.v[0], p->current_host, o->worker_wait_s);
			return TOOL_EXIT_FAILURE;
		}
		struct timespec ts = { 0, 200 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	for (;;) {
		int left = -1;
		if (stop) {
			int64_t l = stop - sd_now_ms();
			if (l <= 0)
				return 124;
			left = l > INT_MAX ? INT_MAX : (int)l;
		}
		if (fd >= 0) {
			struct pollfd pf = { .fd = fd, .events = POLLIN };
			if (poll(&pf, 1, left) > 0)
				return 0;
		} else {
			/* no pidfd (Linux < 5.3): the daemon is not our child */
			if (kill(pid, 0) < 0 && errno == ESRCH)
				return 0;
			struct timespec ts = { 0, 500 * 1000 * 1000 };
			nanosleep(&ts, NULL);
		}
	}
}
