/* config.c: the walker: libconfig file -> validated struct config, by the rows of config_keys.c. */
#include "config.h"
#include "config_table.h"
#include "transport.h"

#include <errno.h>
#include <libconfig.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cferr.h"
#include "util.h"

/* Stores v in an unsigned field of size bytes. */
static void
field_set(void *f, size_t size, unsigned long long v)
{
	uint8_t v8 = (uint8_t)v;
	uint16_t v16 = (uint16_t)v;
	uint32_t v32 = (uint32_t)v;
	uint64_t v64 = (uint64_t)v;

	switch (size) {
	case 1: memcpy(f, &v8, 1); break;
	case 2: memcpy(f, &v16, 2); break;
	case 4: memcpy(f, &v32, 4); break;
	default: memcpy(f, &v64, 8); break;
	}
}

/*
 * The walker: a group's settings in file order (the 32-bit check in
 * cferr.c counts settings of one name on one line in that order), each
 * against its row.
 */

/* Gives the fields of group g in base the table's defaults. */
static void
set_defaults(const struct cfgroup *g, void *base)
{
	for (size_t i = 0; i < g->nkeys; i++) {
		const struct cfkey *k = &g->keys[i];
		char *f = (char *)base + k->off;

		/* Structs are zeroed: a default of 0 needs no write. */
		if (k->type == CFK_GROUP && !k->sub->lazy)
			set_defaults(k->sub, f);
		else if (k->init != NULL)
			k->init(NULL, NULL, base);
		else if (k->sdef != NULL)
			snprintf(f, k->size, "%s", k->sdef);
		else if (k->def != 0 && k->type != CFK_GROUP &&
		    k->type != CFK_LIST)
			field_set(f, k->size, k->def);
	}
}

static void
get_enum(struct walk *w, const struct cfkey *k, const config_setting_t *s,
    void *f)
{
	const char *v = cferr_string(w->e, s);
	char names[256] = "";
	size_t n = 0;

	if (v == NULL)
		return;
	for (const struct cfenum *p = k->names; p->name != NULL; p++) {
		if (strcmp(v, p->name) == 0) {
			field_set(f, k->size, p->value);
			return;
		}
		n += (size_t)snprintf(names + n, sizeof(names) - n, "%s%s",
		    n > 0 ? ", " : "", p->name);
	}
	cferr_add(w->e, s, "%s.%s: \"%s\" is not one of %s", w->g->name,
	    k->name, v, names);
}

static void walk_group(struct walk *w, const struct cfgroup *g,
	    const config_setting_t *s, void *base, bool elem);
static void walk_list(struct walk *w, const struct cfkey *k,
	    const config_setting_t *s, void *base);

/* Reads setting s, of row k, into the group's struct at base. */
static void
walk_value(struct walk *w, const struct cfkey *k, const config_setting_t *s,
    void *base)
{
	char *f = (char *)base + k->off, what[128];
	unsigned long long v;
	bool b;

	switch (k->type) {
	case CFK_BOOL:
		if (cferr_bool(w->e, s, &b))
			memcpy(f, &b, sizeof(b));
		break;
	case CFK_UINT:
		if (cferr_int(w->e, s, k->min, k->max, "", &v))
			field_set(f, k->size, v);
		break;
	case CFK_BYTES:
		if (cferr_bytes(w->e, s, k->min, k->max, &v))
			field_set(f, k->size, v);
		break;
	case CFK_ENUM:
		get_enum(w, k, s, f);
		break;
	case CFK_PATH:
		snprintf(what, sizeof(what), "%s.%s", w->g->name, k->name);
		cferr_path(w->e, s, w->cf->path, what, f, k->size);
		break;
	case CFK_STRING:
	case CFK_FN:
		k->fn(w, s, base);
		break;
	case CFK_GROUP:
		walk_group(w, k->sub, s, f, false);
		break;
	case CFK_LIST:
		walk_list(w, k, s, base);
		break;
	}
}

/* One setting of the group being read: its row, or an error naming it. */
static void
walk_key(struct walk *w, const config_setting_t *s, void *base)
{
	const char *name = config_setting_name(s);
	const struct cfgroup *g = w->g;

	for (size_t i = 0; i < g->nkeys; i++) {
		const struct cfkey *k = &g->keys[i];

		if (strcmp(k->name, name) != 0)
			continue;
		if (k->option != NULL && !k->built) {
			cferr_add(w->e, s, "\"%s\" needs echorouterd built with "
			    "%s (this build has it off)", name, k->option);
			return;
		}
		/* Present even when of the wrong type: not also "missing". */
		w->seen |= 1u << i;
		walk_value(w, k, s, base);
		return;
	}
	cferr_add(w->e, s, "%s%s%s: unknown setting", g->name,
	    g->name[0] != '\0' ? "." : "", name);
}

/* The keys of the group being read at s, then its own checks. */
static void
walk_keys(struct walk *w, const config_setting_t *s, void *base)
{
	const struct cfgroup *g = w->g;

	if (g->enabled != CFK_NONE)
		*((bool *)((char *)base + g->enabled)) = true;
	if (g->lazy)
		set_defaults(g, base);
	for (int i = 0; i < config_setting_length(s); i++)
		walk_key(w, config_setting_get_elem(s, i), base);
	for (size_t i = 0; i < g->nkeys; i++)
		if (g->keys[i].missing != NULL && !(w->seen & (1u << i)))
			cferr_add(w->e, s, "%s: \"%s\" is missing%s", g->what,
			    g->keys[i].name, g->keys[i].missing);
	if (g->finish != NULL)
		g->finish(w, s, base);
}

/* Group g at s into base; elem: s is an entry of a list. */
static void
walk_group(struct walk *w, const struct cfgroup *g,
    const config_setting_t *s, void *base, bool elem)
{
	struct walk outer = *w;
	int line = config_setting_source_line(s);

	w->g = g;
	w->seen = 0;
	w->before = w->e->count;
	if (g->line != CFK_NONE)
		memcpy((char *)base + g->line, &line, sizeof(line));
	if (config_setting_is_group(s))
		walk_keys(w, s, base);
	else if (elem)
		cferr_add(w->e, s, "%s: each entry must be a group%s", g->name,
		    g->shape);
	else
		cferr_add(w->e, s, "%s: expected a group%s", g->name,
		    g->shape);
	w->g = outer.g;
	w->seen = outer.seen;
	w->before = outer.before;
}

/* A list of k's groups into a new array of base's, its length beside. */
static void
walk_list(struct walk *w, const struct cfkey *k, const config_setting_t *s,
    void *base)
{
	const struct cfgroup *g = k->sub;
	char *elems;
	int n;

	if (!config_setting_is_list(s) && !config_setting_is_array(s)) {
		cferr_add(w->e, s, "%s: expected a list ( { ... }, ... )",
		    g->name);
		return;
	}
	n = config_setting_length(s);
	if (n == 0 && g->empty != NULL) {
		cferr_add(w->e, s, "%s: %s", g->name, g->empty);
		return;
	}
	if (g->max_elems > 0 && n > g->max_elems) {
		cferr_add(w->e, s, "%s: %d of them, at most %d", g->name, n,
		    g->max_elems);
		return;
	}
	elems = xcalloc((size_t)n, g->size);
	memcpy((char *)base + k->off, &elems, sizeof(elems));
	field_set((char *)base + g->count, sizeof(size_t), (size_t)n);
	for (int i = 0; i < n; i++) {
		set_defaults(g, elems + (size_t)i * g->size);
		walk_group(w, g, config_setting_get_elem(s, (unsigned)i),
		    elems + (size_t)i * g->size, true);
	}
	if (g->finish_list != NULL)
		g->finish_list(w, s, base);
}

static void
load_file(struct cferr *e, config_t *lc, struct config *cf)
{
	struct walk w = { .e = e, .cf = cf };

	if (config_read_file(lc, cf->path) != CONFIG_TRUE) {
		if (config_error_type(lc) == CONFIG_ERR_FILE_IO)
			cferr_at(e, cf->path, 0, "cannot read the file: %s",
			    strerror(errno));
		else
			cferr_at(e, config_error_file(lc) ?
			    config_error_file(lc) : cf->path,
			    config_error_line(lc), "%s", config_error_text(lc));
		return;
	}
	walk_group(&w, &config_root_group, config_root_setting(lc), cf, false);
	if (config_lookup(lc, "listeners") == NULL)
		cferr_add(e, NULL, "listeners: at least one listener is needed");
	if (cf->store.jetstream && !cf->cluster.enabled)
		cferr_at(e, cf->path, cf->store.line, "store.backend: "
		    "\"jetstream\" needs a cluster group (its NATS servers)");
}

struct config *
config_load(const char *path, char **errors)
{
	struct cferr e = { .path = path };
	struct config *cf = xcalloc(1, sizeof(*cf));
	config_t lc;

	atomic_init(&cf->refs, 1);
	set_defaults(&config_root_group, cf);
	cf->path = xstrdup(path);
	config_init(&lc);
	load_file(&e, &lc, cf);
	config_destroy(&lc);
	cferr_fini(&e);
	if (errors != NULL)
		*errors = e.text;
	else
		free(e.text);
	if (e.count > 0) {
		config_unref(cf);
		return NULL;
	}
	return cf;
}

struct config *
config_ref(struct config *cf)
{
	atomic_fetch_add_explicit(&cf->refs, 1, memory_order_relaxed);
	return cf;
}

void
config_unref(struct config *cf)
{
	if (cf == NULL ||
	    atomic_fetch_sub_explicit(&cf->refs, 1, memory_order_acq_rel) != 1)
		return;
	for (size_t i = 0; i < cf->nlisteners; i++)
		transport_ctx_unref(cf->listeners[i].xp_ctx);
	free(cf->listeners);
	for (size_t i = 0; i < cf->nupstreams; i++)
		transport_ctx_unref(cf->upstreams[i].xp_ctx);
	free(cf->upstreams);
	free(cf->accounts);
	free(cf->account_slots);
	free(cf->account_ids);
	free(cf->routes);
	free(cf->route_slots);
	free(cf->path);
	free(cf);
}

/* The reload rules, by the rows' reload classes. */

static bool
field_equal(const struct cfkey *k, const char *a, const char *b)
{
	if (k->type == CFK_STRING || k->type == CFK_PATH)
		return strncmp(a, b, k->size) == 0;
	return memcmp(a, b, k->size) == 0;
}

static unsigned reload_group(const struct cfgroup *g, char *nb,
	    const char *ob, enum cfk_reload cls);

/* Group row k: came, went, or the same group with rows to compare. */
static unsigned
reload_sub(const struct cfkey *k, char *nf, const char *of,
    enum cfk_reload cls)
{
	const struct cfgroup *g = k->sub;
	bool on = g->enabled == CFK_NONE || *(const bool *)(nf + g->enabled);
	bool was = g->enabled == CFK_NONE || *(const bool *)(of + g->enabled);

	if (on != was) {
		if (k->reload != cls)
			return 0;
		if (cls == CFK_KEEP)
			memcpy(nf, of, g->size);
		return on ? k->change : k->gone;
	}
	return on ? reload_group(g, nf, of, cls) : 0;
}

/* List row k: another length, or an entry with a row that differs. */
static unsigned
reload_list(const struct cfkey *k, char *nb, const char *ob,
    enum cfk_reload cls)
{
	const struct cfgroup *g = k->sub;
	size_t n, o;
	char *na, *oa;

	if (k->reload != cls)
		return 0;
	memcpy(&n, nb + g->count, sizeof(n));
	memcpy(&o, ob + g->count, sizeof(o));
	if (n != o)
		return k->change;
	memcpy(&na, nb + k->off, sizeof(na));
	memcpy(&oa, ob + k->off, sizeof(oa));
	for (size_t i = 0; i < n; i++)
		if (reload_group(g, na + i * g->size, oa + i * g->size, cls))
			return k->change;
	return 0;
}

/*
 * The bits of the rows of class cls that differ between nb (the new) and
 * ob; for CFK_KEEP also gives nb ob's values. Other classes write nothing.
 */
static unsigned
reload_group(const struct cfgroup *g, char *nb, const char *ob,
    enum cfk_reload cls)
{
	unsigned bits = 0;

	for (size_t i = 0; i < g->nkeys; i++) {
		const struct cfkey *k = &g->keys[i];
		char *nf = nb + k->off;
		const char *of = ob + k->off;

		if (k->type == CFK_GROUP)
			bits |= reload_sub(k, nf, of, cls);
		else if (k->type == CFK_LIST)
			bits |= reload_list(k, nb, ob, cls);
		else if (k->reload == cls && !field_equal(k, nf, of)) {
			bits |= k->change;
			if (cls == CFK_KEEP)
				memcpy(nf, of, k->size);
		}
	}
	return bits;
}

unsigned
config_keep_start_only(struct config *cf, const struct config *old)
{
	return reload_group(&config_root_group, (char *)cf, (const char *)old,
	    CFK_KEEP);
}

unsigned
config_restart_changes(const struct config *cf, const struct config *old)
{
	/* A CFK_RESTART walk only reads. */
	return reload_group(&config_root_group, (char *)(uintptr_t)cf,
	    (const char *)old, CFK_RESTART);
}

/* Row k's default, as text, into buf (size n); NULL for a group's. */
static const char *
shown_default(const struct cfkey *k, char *buf, size_t n)
{
	switch (k->type) {
	case CFK_BOOL:
		return k->def ? "true" : "false";
	case CFK_ENUM:
		for (const struct cfenum *p = k->names; p->name != NULL; p++)
			if (p->value == k->def)
				return p->name;
		return k->shown;	/* a default no name says */
	case CFK_STRING:
	case CFK_PATH:
		return k->sdef != NULL ? k->sdef : "";
	case CFK_GROUP:
	case CFK_LIST:
		return NULL;
	default:
		if (k->shown != NULL)
			return k->shown;
		snprintf(buf, n, "%llu", k->def);
		return buf;
	}
}

static void
keys_each(const struct cfgroup *g, const char *path, config_key_fn *fn,
    void *arg)
{
	char sub[128], def[32];

	for (size_t i = 0; i < g->nkeys; i++) {
		const struct cfkey *k = &g->keys[i];
		struct config_key_doc d = {
			.group = path, .name = k->name, .section = k->doc,
			.def = shown_default(k, def, sizeof(def)),
			.restart = k->reload != CFK_RELOAD,
		};

		fn(&d, arg);
		if (k->type != CFK_GROUP && k->type != CFK_LIST)
			continue;
		snprintf(sub, sizeof(sub), "%s%s%s", path,
		    path[0] != '\0' ? "." : "", k->name);
		keys_each(k->sub, sub, fn, arg);
	}
}

void
config_keys_each(config_key_fn *fn, void *arg)
{
	keys_each(&config_root_group, "", fn, arg);
}

const struct listener_conf *
config_find_listener(const struct config *cf, const char *name)
{
	for (size_t i = 0; i < cf->nlisteners; i++)
		if (strcmp(cf->listeners[i].name, name) == 0)
			return &cf->listeners[i];
	return NULL;
}

unsigned
config_store_shards(const struct config *cf)
{
	if (cf->store.jetstream)
		return 1;
	if (cf->store.shards != 0)
		return cf->store.shards;
	if (cf->dispatchers == 0)	/* a configuration not read from a file */
		return 1;
	return cf->dispatchers < CONFIG_SHARDS_AUTO_MAX ? cf->dispatchers :
	    CONFIG_SHARDS_AUTO_MAX;
}

const struct account_conf *
config_find_account(const struct config *cf, const char *id)
{
	size_t n = cf->account_nslots, j;

	if (n == 0)
		return NULL;
	for (j = fnv1a_str(id) & (n - 1); cf->account_slots[j] != 0;
	    j = (j + 1) & (n - 1)) {
		uint32_t i = cf->account_slots[j] - 1;

		if (strcmp(cf->account_ids[i], id) == 0)
			return &cf->accounts[i];
	}
	return NULL;
}

const struct upstream_conf *
config_find_upstream(const struct config *cf, const char *name)
{
	for (size_t i = 0; i < cf->nupstreams; i++)
		if (strcmp(cf->upstreams[i].name, name) == 0)
			return &cf->upstreams[i];
	return NULL;
}
