/* sysfs.c - reading /sys and /proc under a sysroot, for discovery: paths, files, PCI names.
 *
 * Under a sysroot, paths are resolved by sd_topo_resolve() below, confined
 * to the root, and a "link file" stands in for a symlink (discover.c says
 * why).  On the live machine ("/") they are plain paths.
 */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/sd.h"
#include "topo/discover.h"

/* ---- small readers -------------------------------------------------------- */

#define LINK_MAGIC "!<symlink>"

/* Reads the target of a link file; -1 when path is not one. */
static int link_file(const char *path, char *target, size_t len)
{
	char buf[PATH_MAX + sizeof(LINK_MAGIC)];
	FILE *f = fopen(path, "re");
	size_t n;

	if (f == NULL)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (strncmp(buf, LINK_MAGIC, strlen(LINK_MAGIC)) != 0)
		return -1;
	buf[strcspn(buf, "\n")] = '\0';
	snprintf(target, len, "%s", buf + strlen(LINK_MAGIC));
	return 0;
}

/* Resolves rel (which may cross symlinks and link files) to the path the
 * kernel would show ("/sys/devices/..."), without leaving the root: ".."
 * stops at it and absolute targets start from it.  NULL if it does not
 * exist.  On the live machine this is realpath(). */
char *sd_topo_resolve(const struct ctx *c, const char *rel)
{
	char cur[PATH_MAX] = "", rest[PATH_MAX * 2], full[PATH_MAX * 2], target[PATH_MAX];
	int hops = 0;

	if (c->live) {
		char r[PATH_MAX];

		return realpath(rel, r) ? strdup(r) : NULL;
	}
	snprintf(rest, sizeof(rest), "%s", rel);
	while (rest[0] != '\0') {
		char comp[NAME_MAX + 1], tail[PATH_MAX * 2];
		size_t l;
		struct stat st;
		const char *p = rest;

		while (*p == '/')
			p++;
		l = strcspn(p, "/");
		if (l == 0)
			break;
		if (l > NAME_MAX)
			return NULL;
		memcpy(comp, p, l);
		comp[l] = '\0';
		snprintf(tail, sizeof(tail), "%s", p + l);
		if (strcmp(comp, ".") == 0) {
			snprintf(rest, sizeof(rest), "%s", tail);
			continue;
		}
		if (strcmp(comp, "..") == 0) {
			char *slash = strrchr(cur, '/');

			if (slash != NULL)
				*slash = '\0';
			snprintf(rest, sizeof(rest), "%s", tail);
			continue;
		}
		snprintf(full, sizeof(full), "%s%s/%s", c->root, cur, comp);
		if (lstat(full, &st) != 0)
			return NULL;
		if (S_ISLNK(st.st_mode) || (S_ISREG(st.st_mode) && st.st_size < PATH_MAX &&
					    link_file(full, target, sizeof(target)) == 0)) {
			ssize_t n;

			if (++hops > 40)
				return NULL; /* a loop */
			if (S_ISLNK(st.st_mode)) {
				n = readlink(full, target, sizeof(target) - 1);
				if (n <= 0)
					return NULL;
				target[n] = '\0';
			}
			if (target[0] == '/')
				cur[0] = '\0';
			if (strlen(target) + strlen(tail) + 2 > sizeof(rest))
				return NULL;
			snprintf(rest, sizeof(rest), "%s%s", target, tail);
			continue;
		}
		if (strlen(cur) + l + 2 > sizeof(cur))
			return NULL;
		strcat(cur, "/");
		strcat(cur, comp);
		snprintf(rest, sizeof(rest), "%s", tail);
	}
	return strdup(cur[0] ? cur : "/");
}

/* The real path of rel under the root, through links; 0 when it does not
 * resolve. */
static int path_rel(const struct ctx *c, const char *rel, char *p, size_t len)
{
	char *r = c->live ? NULL : sd_topo_resolve(c, rel);

	if (!c->live && r == NULL)
		return 0;
	snprintf(p, len, "%s%s", c->root, c->live ? rel : r);
	free(r);
	return 1;
}

/* fopen/opendir of a path under the root, through links. */
FILE *sd_topo_open(const struct ctx *c, const char *rel)
{
	char p[PATH_MAX * 2];

	return path_rel(c, rel, p, sizeof(p)) ? fopen(p, "re") : NULL;
}

static DIR *opendir_rel(const struct ctx *c, const char *rel)
{
	char p[PATH_MAX * 2];

	return path_rel(c, rel, p, sizeof(p)) ? opendir(p) : NULL;
}

int sd_topo_read(const struct ctx *c, const char *rel, char *buf, size_t len)
{
	FILE *f = sd_topo_open(c, rel);
	size_t n;

	if (f == NULL)
		return -1;
	n = fread(buf, 1, len - 1, f);
	if (ferror(f)) { /* e.g. EINVAL reading speed of a link that is down */
		fclose(f);
		return -1;
	}
	fclose(f);
	buf[n] = '\0';
	while (n > 0 && isspace((unsigned char)buf[n - 1]))
		buf[--n] = '\0';
	return 0;
}

int sd_topo_read_long(const struct ctx *c, const char *rel, int base, long *out)
{
	char buf[64], *end;

	if (sd_topo_read(c, rel, buf, sizeof(buf)) != 0 || buf[0] == '\0')
		return -1;
	errno = 0;
	*out = strtol(buf, &end, base);
	return errno != 0 || (*end != '\0' && !isspace((unsigned char)*end)) ? -1 : 0;
}

int sd_topo_is_bdf(const char *s, size_t len)
{
	unsigned a, b, d, f;
	int used = 0;

	return len == 12 && sscanf(s, "%4x:%2x:%2x.%1x%n", &a, &b, &d, &f, &used) == 4 &&
	       used == 12;
}

/* Cuts path after its last PCI component; copies that component to bus. */
int sd_topo_pci_cut(char *path, char bus[16])
{
	char *end = path + strlen(path);

	while (end > path) {
		char *s = end;

		while (s > path && s[-1] != '/')
			s--;
		if (sd_topo_is_bdf(s, (size_t)(end - s))) {
			memcpy(bus, s, 12);
			bus[12] = '\0';
			*end = '\0';
			return 0;
		}
		end = s > path ? s - 1 : path;
	}
	return -1;
}

void sd_topo_lower(char *s)
{
	for (; *s; s++)
		*s = (char)tolower((unsigned char)*s);
}

int sd_topo_numa_of(const struct ctx *c, const char *pcipath)
{
	char rel[PATH_MAX];
	long v;

	snprintf(rel, sizeof(rel), "%s/numa_node", pcipath);
	return sd_topo_read_long(c, rel, 10, &v) == 0 && v >= 0 ? (int)v : -1;
}

cJSON *sd_topo_num_or_null(long long v)
{
	return v >= 0 ? cJSON_CreateNumber((double)v) : cJSON_CreateNull();
}

cJSON *sd_topo_str_or_null(const char *s)
{
	return s != NULL && *s != '\0' ? cJSON_CreateString(s) : cJSON_CreateNull();
}


static int names_cmp(const void *a, const void *b)
{
	return strverscmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of a directory under the root, sorted naturally; NULL-ended. */
char **sd_topo_list_dir(const struct ctx *c, const char *rel, int *n)
{
	DIR *d;
	struct dirent *e;
	char **v = NULL;
	int cap = 0;

	*n = 0;
	d = opendir_rel(c, rel);
	if (d == NULL)
		return NULL;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		if (*n + 1 >= cap) {
			char **nv = realloc(v, (size_t)(cap = cap ? cap * 2 : 16) * sizeof(*v));

			if (nv == NULL)
				break;
			v = nv;
		}
		v[(*n)++] = strdup(e->d_name);
	}
	closedir(d);
	if (v == NULL)
		return NULL;
	v[*n] = NULL;
	qsort(v, (size_t)*n, sizeof(*v), names_cmp);
	return v;
}

void sd_topo_free_list(char **v)
{
	for (char **p = v; p != NULL && *p != NULL; p++)
		free(*p);
	free(v);
}
