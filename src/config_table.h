/* config_table.h: the rows that describe every setting, for config.c's walker. */
#ifndef ECHOROUTERD_CONFIG_TABLE_H
#define ECHOROUTERD_CONFIG_TABLE_H

#include <libconfig.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cferr.h"
#include "config.h"

/*
 * Every setting is a row of a table: its name, type, field (by offsetof),
 * range, default, what a reload does with it and where the man page
 * describes it. One walker reads a file's settings against the tables;
 * what no row says (a listener's address syntax, a TLS key pair) is the
 * row's own function or its group's finish.
 */
enum cfk_type {
	CFK_BOOL,		/* true or false */
	CFK_UINT,		/* an integer within [min, max] */
	CFK_BYTES,		/* the same, or a size such as "4G" */
	CFK_ENUM,		/* one of names, stored as its value */
	CFK_PATH,		/* a file, absolute against the config's dir */
	CFK_STRING,		/* a char array, read by fn */
	CFK_FN,			/* anything else, read by fn */
	CFK_GROUP,		/* a group of the rows of sub */
	CFK_LIST,		/* a list of such groups */
};

/* What a SIGHUP does with a changed setting. */
enum cfk_reload {
	CFK_RELOAD,		/* applies it */
	CFK_RESTART,		/* warns: only a restart applies it */
	CFK_KEEP,		/* keeps the running value, and warns */
};

#define CFK_NONE	SIZE_MAX	/* a group without that field */

struct walk;
struct cfkey;
typedef void cfkey_fn(struct walk *, const config_setting_t *, void *base);
typedef void cfgroup_fn(struct walk *, const config_setting_t *, void *base);

struct cfenum {
	const char *name;
	unsigned value;
};

struct cfgroup;

struct cfkey {
	const char *name;
	enum cfk_type type;
	size_t	off;			/* the field in the group's struct */
	size_t	size;			/* and its size */
	long long min, max;		/* CFK_UINT, CFK_BYTES */
	unsigned long long def;		/* a number's default */
	const char *sdef;		/* a char array's default */
	const char *shown;		/* CFK_FN: its default, as text */
	const struct cfenum *names;	/* CFK_ENUM, ended by a NULL name */
	cfkey_fn *fn;			/* CFK_STRING, CFK_FN */
	cfgroup_fn *init;		/* a default no constant says */
	const struct cfgroup *sub;	/* CFK_GROUP, CFK_LIST */
	const char *missing;		/* required: what its error adds */
	const char *option;		/* the make option it needs, or NULL */
	bool	built;			/* whether this build has option on */
	enum cfk_reload reload;
	unsigned change;		/* CONFIG_KEPT_ or _RESTART_ bit */
	unsigned gone;			/* a group's bit when it went */
	const char *doc;		/* the man page's section for it */
};

struct cfgroup {
	const char *name;		/* "limits"; "" the top level */
	const char *what;		/* its "missing" errors' subject */
	const char *shape;		/* what "expected a group" adds */
	const struct cfkey *keys;
	size_t	nkeys;
	size_t	size;			/* its struct's */
	size_t	enabled;		/* a bool set when it is present */
	size_t	line;			/* an int: where it was defined */
	size_t	count;			/* a list's length, in its parent */
	int	max_elems;		/* a list's most; 0 no limit */
	const char *empty;		/* a list's error when empty */
	bool	lazy;			/* defaults only once it is present */
	cfgroup_fn *finish;		/* checks across its keys */
	cfgroup_fn *finish_list;	/* checks across a list's groups */
};

/* One load's state, as the walker and the rows' functions see it. */
struct walk {
	struct cferr *e;
	struct config *cf;
	const struct cfgroup *g;	/* the group being read */
	unsigned seen;			/* its keys present: bit i for row i */
	unsigned before;		/* errors when it began */
};

/* The top level: the root of every table (config_keys.c). */
extern const struct cfgroup config_root_group;

/* Whether row name of the group being read was present. */
bool	config_walk_seen(const struct walk *w, const char *name);

#endif
