/* transport.c: the registry of transport types, and their shared contexts. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "transport.h"
#include "version.h"

#define TRANSPORT_TYPES_MAX	8

/*
 * The types by name. Written only by the main thread before the reactors
 * and the acceptor start; read by any after.
 */
static const struct transport_type *types[TRANSPORT_TYPES_MAX] = {
	&transport_type_plain,
#if ER_WITH_TLS
	&transport_type_tls,
#endif
};

int
transport_register(const struct transport_type *type)
{
	size_t i;

	for (i = 0; i < TRANSPORT_TYPES_MAX && types[i] != NULL; i++)
		if (strcmp(types[i]->name, type->name) == 0) {
			errno = EEXIST;
			return -1;
		}
	if (i == TRANSPORT_TYPES_MAX) {
		errno = ENOSPC;
		return -1;
	}
	types[i] = type;
	return 0;
}

const struct transport_type *
transport_find(const char *name)
{
	for (size_t i = 0; i < TRANSPORT_TYPES_MAX && types[i] != NULL; i++)
		if (strcmp(types[i]->name, name) == 0)
			return types[i];
	return NULL;
}

const char *
transport_name(const struct listener_conf *lc)
{
	return lc->tls.enabled ? "tls" : "plain";
}

struct transport_ctx *
transport_prepare(const struct listener_conf *lc, char *err, size_t len)
{
	const char *name = transport_name(lc);
	const struct transport_type *type = transport_find(name);

	if (type == NULL) {
		snprintf(err, len, "no transport \"%s\" in this build", name);
		return NULL;
	}
	return type->prepare(lc, err, len);
}

void
transport_ctx_init(struct transport_ctx *ctx,
    const struct transport_type *type)
{
	ctx->type = type;
	atomic_init(&ctx->refs, 1);
}

struct transport_ctx *
transport_ctx_ref(struct transport_ctx *ctx)
{
	if (ctx != NULL)
		atomic_fetch_add_explicit(&ctx->refs, 1, memory_order_relaxed);
	return ctx;
}

void
transport_ctx_unref(struct transport_ctx *ctx)
{
	if (ctx == NULL || atomic_fetch_sub_explicit(&ctx->refs, 1,
	    memory_order_acq_rel) != 1)
		return;
	ctx->type->release(ctx);
}
