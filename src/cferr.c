/* cferr.c: a config load's error list, and typed reads of settings that report into it. */
#include "cferr.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* The most of a config file read again to see an integer's literal. */
#define SOURCE_MAX	(16 << 20)

static void
cferr_vadd(struct cferr *e, const char *file, int line, const char *fmt,
    va_list ap)
{
	char msg[512];
	int n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	for (;;) {
		n = snprintf(e->text ? e->text + e->len : NULL,
		    e->text ? e->cap - e->len : 0, "%s:%d: %s\n", file, line,
		    msg);
		if (e->text != NULL && (size_t)n < e->cap - e->len)
			break;
		e->cap = e->cap * 2 + (size_t)n + 1;
		e->text = xrealloc(e->text, e->cap);
		e->text[e->len] = '\0';
	}
	e->len += (size_t)n;
	e->count++;
}

void
cferr_at(struct cferr *e, const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	cferr_vadd(e, file, line, fmt, ap);
	va_end(ap);
}

void
cferr_add(struct cferr *e, const config_setting_t *s, const char *fmt, ...)
{
	const char *file = s ? config_setting_source_file(s) : NULL;
	int line = s ? config_setting_source_line(s) : 0;
	va_list ap;

	va_start(ap, fmt);
	cferr_vadd(e, file ? file : e->path, line, fmt, ap);
	va_end(ap);
}

static bool
is_int(const config_setting_t *s)
{
	int t = config_setting_type(s);

	return t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64;
}

static void
source_free(struct cferr_source *src)
{
	free(src->file);
	free(src->text);
	free(src->lines);
	memset(src, 0, sizeof(*src));
}

/*
 * Reads file into src unless it holds it already; false if it cannot be
 * read. Config files are small; SOURCE_MAX bounds what is read.
 */
static bool
source_load(struct cferr_source *src, const char *file)
{
	FILE *f;
	size_t cap = 0, len = 0, n;

	if (src->file != NULL && strcmp(src->file, file) == 0)
		return src->text != NULL;
	source_free(src);
	src->file = xstrdup(file);
	if ((f = fopen(file, "re")) == NULL)
		return false;
	do {
		if (len + 4096 > cap)
			src->text = xrealloc(src->text,
			    cap = cap * 2 + 4096 + 1);
		n = fread(src->text + len, 1, cap - len - 1, f);
		len += n;
	} while (n > 0 && len < SOURCE_MAX);
	fclose(f);
	src->text[len] = '\0';
	for (size_t i = 0, ncap = 0; i <= len; i++)
		if (i == 0 || src->text[i - 1] == '\n') {
			if (src->nlines == ncap)
				src->lines = xrealloc(src->lines,
				    (ncap = ncap * 2 + 64) * sizeof(size_t));
			src->lines[src->nlines++] = i;
		}
	return true;
}

static bool
is_name_char(char ch)
{
	return isalnum((unsigned char)ch) || (ch != '\0' &&
	    strchr("_*-", ch) != NULL);
}

/*
 * Just past the first place in p where the key name stands alone (text is
 * where p's buffer starts), or NULL.
 */
static char *
find_key(char *p, const char *text, const char *name)
{
	size_t nl = strlen(name);

	for (; (p = strstr(p, name)) != NULL; p += nl)
		if ((p == text || !is_name_char(p[-1])) &&
		    !is_name_char(p[nl]))
			return p + nl;
	return NULL;
}

/*
 * The integer literal after "= " or ": " at p: whether it is beyond 32
 * bits (without the L that makes it 64), its value as libconfig 1.5 keeps
 * it (the low 32 bits), and a copy in lit.
 */
static bool
literal_cut(const char *p, int32_t *kept, char *lit, size_t litlen)
{
	char *end;
	long long v;

	for (; isspace((unsigned char)*p); p++)
		;
	for (p += *p == '=' || *p == ':'; isspace((unsigned char)*p); p++)
		;
	errno = 0;
	v = strtoll(p, &end, p[0] == '0' && (p[1] == 'x' || p[1] == 'X') ?
	    16 : 10);
	if (end == p || *end == 'L' || (errno != ERANGE && v <= INT32_MAX &&
	    v >= INT32_MIN))
		return false;
	*kept = (int32_t)(uint32_t)(unsigned long long)v;
	snprintf(lit, litlen, "%.*s", (int)(end - p), p);
	return true;
}

/*
 * libconfig 1.5 reads an integer beyond 32 bits written without its L
 * suffix as its low 32 bits (4294967296 is 0, 4294967297 is 1), with no
 * error. The file shows what was written: true, with the literal in lit,
 * if the setting's was cut. Settings come in file order, so the nth of
 * one name on one line is the nth such key there.
 */
static bool
int_truncated(struct cferr *e, const config_setting_t *s, char *lit,
    size_t litlen)
{
	struct cferr_source *src = &e->src;
	const char *file = config_setting_source_file(s);
	const char *name = config_setting_name(s);
	int line = config_setting_source_line(s);
	char *p, *eol;
	unsigned k = 0;
	int32_t kept;

	if (file == NULL || name == NULL || line < 1 ||
	    !source_load(src, file) || (size_t)line > src->nlines)
		return false;
	if (src->name != NULL && strcmp(src->name, name) == 0 &&
	    src->line == line)
		src->nth++;
	else
		src->nth = 0;
	src->name = name;
	src->line = line;
	/* Counted above whatever its type; only a plain one can be cut. */
	if (config_setting_type(s) != CONFIG_TYPE_INT)
		return false;
	p = src->text + src->lines[line - 1];
	eol = strchr(p, '\n');
	while ((p = find_key(p, src->text, name)) != NULL &&
	    (eol == NULL || p - strlen(name) < eol))
		if (k++ == src->nth)
			return literal_cut(p, &kept, lit, litlen) &&
			    kept == config_setting_get_int(s);
	return false;
}

void
cferr_fini(struct cferr *e)
{
	source_free(&e->src);
}

bool
cferr_int(struct cferr *e, const config_setting_t *s, long long min,
    long long max, const char *unit, unsigned long long *out)
{
	long long v;
	char lit[32];

	if (!is_int(s)) {
		cferr_add(e, s, "%s: expected an integer%s",
		    config_setting_name(s), unit);
		return false;
	}
	if (int_truncated(e, s, lit, sizeof(lit))) {
		cferr_add(e, s, "%s: %s is beyond a plain libconfig integer "
		    "(-2147483648..2147483647); write %sL%s",
		    config_setting_name(s), lit, lit, unit);
		return false;
	}
	v = config_setting_get_int64(s);
	if (v < min || v > max) {
		cferr_add(e, s, "%s: %lld is out of range %lld..%lld",
		    config_setting_name(s), v, min, max);
		return false;
	}
	*out = (unsigned long long)v;
	return true;
}

/* A size's string: digits and one optional unit letter; false if not. */
static bool
parse_size(const char *v, unsigned long long *n, unsigned *shift)
{
	static const char units[] = "KMGT";
	const char *u;
	char *end;

	if (!isdigit((unsigned char)v[0]))
		return false;
	errno = 0;
	*n = strtoull(v, &end, 10);
	*shift = 0;
	if (*end != '\0' && end[1] == '\0' &&
	    (u = strchr(units, toupper((unsigned char)*end))) != NULL) {
		*shift = 10 * (unsigned)(u - units + 1);
		end++;
	}
	return *end == '\0';
}

bool
cferr_bytes(struct cferr *e, const config_setting_t *s, long long min,
    long long max, unsigned long long *out)
{
	const char *v;
	unsigned long long n;
	unsigned shift;

	if (config_setting_type(s) != CONFIG_TYPE_STRING)
		return cferr_int(e, s, min, max, " or a size such as \"4G\"",
		    out);
	v = config_setting_get_string(s);
	if (!parse_size(v, &n, &shift)) {
		cferr_add(e, s, "%s: \"%s\" is not a size: digits and an "
		    "optional K, M, G or T, as \"512M\"",
		    config_setting_name(s), v);
		return false;
	}
	if (errno == ERANGE || n > (unsigned long long)max >> shift ||
	    n << shift < (unsigned long long)min) {
		cferr_add(e, s, "%s: \"%s\" is out of range %lld..%lld bytes",
		    config_setting_name(s), v, min, max);
		return false;
	}
	*out = n << shift;
	return true;
}

bool
cferr_bool(struct cferr *e, const config_setting_t *s, bool *out)
{
	if (config_setting_type(s) != CONFIG_TYPE_BOOL) {
		cferr_add(e, s, "%s: expected true or false",
		    config_setting_name(s));
		return false;
	}
	*out = config_setting_get_bool(s);
	return true;
}

const char *
cferr_string(struct cferr *e, const config_setting_t *s)
{
	if (config_setting_type(s) != CONFIG_TYPE_STRING) {
		/* An element of a list has no name: its list's. */
		const char *name = config_setting_name(s);

		if (name == NULL && config_setting_parent(s) != NULL)
			name = config_setting_name(config_setting_parent(s));
		cferr_add(e, s, "%s: expected a string",
		    name != NULL ? name : "value");
		return NULL;
	}
	return config_setting_get_string(s);
}

/*
 * The directory of the configuration file, absolute, into dir (size n):
 * what a relative store path is relative to. 0, or -1 with errno.
 */
static int
conf_dir(const char *path, char *dir, size_t n)
{
	const char *slash = strrchr(path, '/');
	char cwd[4096];
	int len = slash == NULL ? 0 : slash == path ? 1 : (int)(slash - path);
	int w;

	if (path[0] == '/') {
		w = snprintf(dir, n, "%.*s", len, path);
	} else {
		if (getcwd(cwd, sizeof(cwd)) == NULL)
			return -1;
		w = snprintf(dir, n, "%s%s%.*s", cwd, len > 0 ? "/" : "", len,
		    path);
	}
	if (w < 0 || (size_t)w >= n) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

void
cferr_path(struct cferr *e, const config_setting_t *k,
    const char *config_path, const char *what, char *out, size_t n)
{
	const char *v = cferr_string(e, k);
	char dir[4096];
	int w;

	if (v == NULL || v[0] == '\0') {
		out[0] = '\0';
		return;
	}
	if (v[0] == '/') {
		w = snprintf(out, n, "%s", v);
	} else {
		if (conf_dir(config_path, dir, sizeof(dir)) < 0) {
			cferr_add(e, k, "%s: cannot make \"%s\" absolute: %s",
			    what, v, strerror(errno));
			return;
		}
		w = snprintf(out, n, "%s%s%s", dir,
		    strcmp(dir, "/") == 0 ? "" : "/", v);
	}
	if (w < 0 || (size_t)w >= n) {
		out[0] = '\0';
		cferr_add(e, k, "%s: longer than %zu characters", what, n - 1);
	}
}
