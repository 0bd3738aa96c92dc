/* cmd/run/util.c - smddp-run's small helpers: strings, word splitting, host names */
#include "config.h"

#include <glob.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run/run.h"

noreturn void out_of_memory(void)
{
	tool_warn("out of memory");
	exit(TOOL_EXIT_FAILURE);
}

char *xstrdup(const char *s)
{
	char *d = strdup(s);
	if (!d)
		out_of_memory();
	return d;
}

TOOL_PRINTF(1, 2) char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	va_start(ap, fmt);
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		out_of_memory();
	return s;
}

/* Takes ownership of S. */
void strv_take(struct strv *sv, char *s)
{
	if (sv->n + 2 > sv->cap) {
		size_t cap = sv->cap ? sv->cap * 2 : 16;
		char **nv = realloc(sv->v, cap * sizeof *nv);
		if (!nv)
			out_of_memory();
		sv->v = nv;
		sv->cap = cap;
	}
	sv->v[sv->n++] = s;
	sv->v[sv->n] = NULL;
}

void strv_add(struct strv *sv, const char *s)
{
	strv_take(sv, xstrdup(s));
}

/* Frees the strings and the vector; SV is empty afterwards. */
void strv_free(struct strv *sv)
{
	for (size_t i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	sv->v = NULL;
	sv->n = sv->cap = 0;
}

bool strv_has(const struct strv *sv, const char *s)
{
	for (size_t i = 0; i < sv->n; i++)
		if (strcmp(sv->v[i], s) == 0)
			return true;
	return false;
}

int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "NAME=VALUE" entries: NAME's entry, or NULL. */
char *envv_find(const struct strv *e, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; i < e->n; i++)
		if (strncmp(e->v[i], name, n) == 0 && e->v[i][n] == '=')
			return e->v[i];
	return NULL;
}

/* Sets NAME=VALUE in E; an existing entry is replaced only with OVERRIDE. */
void envv_set(struct strv *e, const char *name, const char *value, bool override)
{
	size_t n = strlen(name);
	for (size_t i = 0; i < e->n; i++)
		if (strncmp(e->v[i], name, n) == 0 && e->v[i][n] == '=') {
			if (override) {
				free(e->v[i]);
				e->v[i] = xasprintf("%s=%s", name, value);
			}
			return;
		}
	strv_take(e, xasprintf("%s=%s", name, value));
}

bool valid_env_name(const char *s, size_t n)
{
	if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return false;
	return true;
}

/* Splits S into words the way sh(1) would, without expansions: blanks
 * separate, '...' and "..." quote, backslash escapes. -1 on an open quote. */
int split_words(const char *s, struct strv *out)
{
	size_t len = strlen(s);
	char *w = malloc(len + 1);
	if (!w)
		out_of_memory();
	const char *p = s;
	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		if (!*p)
			break;
		size_t n = 0;
		while (*p && *p != ' ' && *p != '\t' && *p != '\n') {
			if (*p == '\'') {
				const char *q = strchr(p + 1, '\'');
				if (!q)
					goto open;
				memcpy(w + n, p + 1, q - p - 1);
				n += q - p - 1;
				p = q + 1;
			} else if (*p == '"') {
				for (p++; *p && *p != '"'; p++) {
					if (*p == '\\' && p[1] && strchr("\"\\$`", p[1]))
						p++;
					w[n++] = *p;
				}
				if (!*p)
					goto open;
				p++;
			} else if (*p == '\\' && p[1]) {
				w[n++] = p[1];
				p += 2;
			} else {
				w[n++] = *p++;
			}
		}
		w[n] = '\0';
		strv_add(out, w);
	}
	free(w);
	return 0;
open:
	free(w);
	return -1;
}

/* S as one sh(1) word: bare when safe, else in single quotes. */
void print_quoted(FILE *f, const char *s)
{
	if (*s && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	                    "0123456789_@%+=:,./-") == strlen(s)) {
		fputs(s, f);
		return;
	}
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'')
			fputs("'\\''", f);
		else
			fputc(*s, f);
	}
	fputc('\'', f);
}


/* Host names and addresses as Open MPI's --host takes them: no ':' (IPv6
 * addresses are not supported there), no blanks, no commas. */
bool valid_host(const char *h)
{
	size_t n = strlen(h);
	if (n == 0 || n > 255 || h[0] == '-' || h[0] == '.')
		return false;
	return strspn(h, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-_") == n;
}


/* One rank per NVIDIA GPU device node (/dev/nvidia0, /dev/nvidia1...). */
int count_gpus(void)
{
	glob_t g;
	int n = 0;
	if (glob("/dev/nvidia[0-9]*", 0, NULL, &g) == 0) {
		for (size_t i = 0; i < g.gl_pathc; i++)
			if (strspn(g.gl_pathv[i] + strlen("/dev/nvidia"), "0123456789") ==
			    strlen(g.gl_pathv[i] + strlen("/dev/nvidia")))
				n++;
		globfree(&g);
	}
	return n;
}


/* This program's own path, for mpirun to start it on every host as the
 * rank wrapper: hosts of one job share the installation (one container
 * image, or one shared file system). */
char *self_path(void)
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
	if (n <= 0)
		return xstrdup("smddp-run");
	buf[n] = '\0';
	return xstrdup(buf);
}


/* The words of AV; a line break (" \\") before each word that starts a new
 * line: NEWLINE[i] says whether word i does. */
void print_words(char *const *av, const bool *newline)
{
	for (size_t i = 0; av[i]; i++) {
		if (i && newline[i])
			fputs(" \\\n  ", stdout);
		else if (i)
			putchar(' ');
		print_quoted(stdout, av[i]);
	}
	putchar('\n');
}

