/* proto.c: the registry of protocols a listener can name, filled at start (proto_builtin.c). */
#include "proto.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define PROTO_MAX	16

/*
 * Written at start, before any thread but main's runs, and read after:
 * the configuration names protocols without depending on them, so no
 * module a protocol calls (delivery, the store, the cluster) reaches back
 * to the protocols through the configuration.
 */
static const struct proto *protos[PROTO_MAX];
static unsigned nprotos;
static char names[PROTO_MAX * 16];

int
proto_register(const struct proto *p)
{
	size_t used = strlen(names);

	for (unsigned i = 0; i < nprotos; i++)
		if (protos[i] == p)
			return 0;
	if (nprotos == PROTO_MAX || proto_find(p->name) != NULL ||
	    used + strlen(p->name) + 3 > sizeof(names)) {
		errno = EINVAL;
		return -1;
	}
	protos[nprotos++] = p;
	snprintf(names + used, sizeof(names) - used, "%s%s",
	    used > 0 ? ", " : "", p->name);
	return 0;
}

const struct proto *
proto_find(const char *name)
{
	for (unsigned i = 0; i < nprotos; i++)
		if (strcmp(protos[i]->name, name) == 0)
			return protos[i];
	return NULL;
}

const char *
proto_names(void)
{
	return names;
}
