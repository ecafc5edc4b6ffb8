/* proto.c: the registry of protocols a listener can name. */
#include "proto.h"

#include <string.h>

static const struct proto *const protos[] = {
	&proto_echo,
	&proto_router,
	&proto_smpp,
	&proto_metrics,
};

const struct proto *
proto_find(const char *name)
{
	for (size_t i = 0; i < sizeof(protos) / sizeof(protos[0]); i++)
		if (strcmp(protos[i]->name, name) == 0)
			return protos[i];
	return NULL;
}

const char *
proto_names(void)
{
	return "echo, router, smpp, metrics";
}
